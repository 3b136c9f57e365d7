"""`import usl`: the API surface, and every example of docs/python_api.md run in order on a real store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from server_real import make_tiny

DOC = Path(__file__).resolve().parents[1] / "docs" / "python_api.md"


def test_import_usl_is_cheap_and_names_its_surface():
    out = subprocess.run([sys.executable, "-c", "import sys, usl; print(sorted(usl.__all__)); "
                          "print('torch' in sys.modules, 'numpy' in sys.modules)"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    names, heavy = out.stdout.splitlines()
    assert names == str(sorted(["load", "Bench", "Comparison", "Criteria", "Leaderboard", "LeaderboardSpec", "Row"]))
    assert heavy == "False False"


def test_the_docs_examples_run(tmp_path, capsys):
    make_tiny(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    namespace = {"HOME": str(tmp_path)}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{DOC.name} example {i + 1}", "exec"), namespace)
        except Exception as e:  # noqa: BLE001 - name the example that failed
            pytest.fail(f"docs/python_api.md example {i + 1} failed: {type(e).__name__}: {e}\n{code}")
    printed = capsys.readouterr().out
    assert "tiny 16 queries, 3 models and the baseline base" in printed
    assert "Kendall tau" in printed


def test_bad_arguments_are_named(tmp_path):
    import usl

    make_tiny(tmp_path)
    with pytest.raises(ValueError, match="unknown benchmark 'nope'; known: tiny"):
        usl.load("nope", home=tmp_path)
    bench = usl.load(home=tmp_path)
    with pytest.raises(TypeError, match="lists of criteria, not one string"):
        bench.rank("Concise")
    with pytest.raises(ValueError, match="unknown topic"):
        bench.rank(["Concise"], topics=["astronomy"], judge="length")
