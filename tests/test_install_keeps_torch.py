"""`pip install .` into an environment that already has its own torch keeps that torch.

A user with a CUDA build of torch must not see it replaced by the CPU wheel the project tests with: the
package asks for a range (``torch>=2.4``), and the pin lives in constraints.txt, which only the Makefile
uses. The test builds a fresh virtual environment (no system site-packages), installs torch there first
(the local wheel, as a user's own build would be), installs the checkout, and checks that torch's files
were not touched and that the ``usl`` command runs. About 1-3 minutes: most of it is unpacking torch and
the other dependencies from the local package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_asks_for_a_torch_range_and_the_makefile_pins_it():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = [d for d in deps if d.split(">")[0].split("=")[0].split("<")[0].strip() == "torch"]
    assert torch == ["torch>=2.4"], torch
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().splitlines()
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile and "$(PIP) torch\n\t$(PIP) -e ." in makefile


def _run(*cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


def _torch_state(python: Path) -> tuple[str, str, dict[str, int]]:
    """(version, location, mtime in ns of each file its RECORD lists that pip wrote): a reinstall rewrites them."""
    out = _run(str(python), "-c", """
import importlib.metadata as md, json, os
d = md.distribution("torch")
files = [f for f in d.files if f.name.endswith((".py", ".so", "RECORD", "METADATA"))][:400]
print(json.dumps([d.version, str(d.locate_file("")), {str(f): os.stat(d.locate_file(f)).st_mtime_ns for f in files}]))
""")
    version, where, mtimes = json.loads(out.stdout)
    return version, where, mtimes


def _stand_in_torch(folder: Path, version: str) -> Path:
    """A wheel named torch at ``version``, with nothing in it: another build than the one this machine
    holds (only 2.13.0 is on its disk), for pip to keep or to replace."""
    import base64
    import hashlib
    import zipfile

    info = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: usl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    digest = lambda text: base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record = "".join(f"{name},sha256={digest(text)},{len(text.encode())}\n" for name, text in files.items())
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


@pytest.mark.install
def test_pip_install_into_an_environment_with_its_own_torch_keeps_it(tmp_path):
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    python, pip = venv / "bin" / "python", [str(venv / "bin" / "python"), "-m", "pip"]

    # Another torch than the CPU pin (a user's CUDA build, say): pip plans to install usl and keep that torch.
    _run(*pip, "install", "-q", "--no-deps", str(_stand_in_torch(tmp_path, "2.6.0")))
    report = tmp_path / "report.json"
    _run(*pip, "install", "-q", "--dry-run", "--report", str(report), str(ROOT))
    planned = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "usl" in planned and "torch" not in planned, sorted(planned)

    # A real torch: installing the checkout leaves its files as they were, and the command runs.
    _run(*pip, "install", "-q", "torch==2.13.0")
    before = _torch_state(python)
    assert before[1].startswith(str(venv)), before[1]          # its own torch, not one seen from outside
    _run(*pip, "install", "-q", str(ROOT))
    assert _torch_state(python) == before
    assert "Rank the benchmark's models" in _run(str(venv / "bin" / "usl"), "rank", "--help").stdout
