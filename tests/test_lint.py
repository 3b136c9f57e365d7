"""The code passes the linter configured in pyproject.toml (``[tool.ruff.lint]``)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    pytest.importorskip("ruff", reason="needs ruff (the test extra: pip install -e '.[test]')")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "src", "tests", "scripts"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
