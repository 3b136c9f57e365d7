"""`make judge` is the whole recipe of the default judge: one command lists every step, in the order that
each step's inputs exist. Checked with a dry run (`make -n`), which runs nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_judge_runs_every_step_of_the_recipe_in_order():
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "judge"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    steps = ["usl train-fast --config configs/fast_crm.yaml",
             "usl train-criteria --config configs/criteria_reader.yaml --out artifacts/fast-crm",
             "usl train-keywords --config configs/keyword_reader.yaml",
             "usl train-signs --config configs/keyword_reader.yaml",
             "-m usl.fast.static_embed artifacts/fast-crm/static_table.npz",
             "usl quality fit-kinds --weights artifacts/fast-crm",
             "usl eval --judge fast:artifacts/fast-crm",
             "cp -r artifacts/substance artifacts/fast-crm/substance",
             "usl quality fit-length --weights artifacts/fast-crm",
             "usl eval --judge substance:artifacts/fast-crm/substance",
             "usl quality fit-gate --weights artifacts/fast-crm",
             "usl quality fit-substance --weights artifacts/fast-crm",
             "-m usl.judges.quality --judge substance:artifacts/fast-crm/substance"]
    at = [next((i for i, line in enumerate(lines) if step in line), -1) for step in steps]
    assert -1 not in at, [s for s, i in zip(steps, at) if i == -1]
    assert at == sorted(at), "the steps run out of order"
    # the gate is fitted on the same eval files the two judges' predictions were written for
    fast, substance = (lines[i].split("--data ", 1)[1].split(" --limit")[0] for i in (at[6], at[9]))
    assert fast == substance and fast.count("--data") == 5
