"""`usl data ...` end to end on a temporary data directory: a bad file changes nothing."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from usl import paths
from usl.cli import app
from test_data_alpaca_eval import shared_layout  # noqa: E402  (tests dir is on sys.path)
from test_data_arena import arena_folder

runner = CliRunner()


def usl(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def test_import_then_bad_file_leaves_stats_identical(tmp_path):
    home, src = tmp_path / "home", shared_layout(tmp_path / "ae")
    r = usl(home, "data", "import", "alpaca-eval", "--source", str(src))
    assert r.exit_code == 0, r.output
    assert "missing answers: m2: 2 of 4" in r.output
    before = usl(home, "data", "stats", "--json")
    assert before.exit_code == 0
    st = json.loads(before.stdout)
    assert st["queries"] == 4 and st["baseline"] == "base"
    assert st["models"] == [{"name": "base", "answers": 4, "missing": 0}, {"name": "m1", "answers": 4, "missing": 0},
                            {"name": "m2", "answers": 2, "missing": 2}]

    (src / "outputs" / "m2.json.gz").write_bytes(gzip.compress(b'[{"instruction": "Instruction number 1?", "output": 7}]'))
    bad = usl(home, "data", "import", "alpaca-eval", "--source", str(src))
    assert bad.exit_code == 2
    assert "m2.json.gz: field '[0].output': expected a string or null" in bad.output
    bad_arena = usl(home, "data", "import", "arena", "--source", str(tmp_path / "nowhere"), "--name", "alpaca_eval")
    assert bad_arena.exit_code == 2 and "no such folder" in bad_arena.output
    assert usl(home, "data", "stats", "--json").stdout == before.stdout


def test_arena_and_named_stats(tmp_path):
    home = tmp_path / "home"
    r = usl(home, "data", "import", "arena", "--source", str(arena_folder(tmp_path / "ah")), "--name", "ah")
    assert r.exit_code == 0, r.output
    assert json.loads(usl(home, "data", "stats", "--json").stdout)["name"] == "ah"  # the only one
    text = usl(home, "data", "stats", "--name", "ah")
    assert "3 queries, 2 models" in text.stdout and "(2 missing)" in text.stdout
    unknown = usl(home, "data", "stats", "--name", "nope")
    assert unknown.exit_code == 2 and "unknown benchmark 'nope'; known: ah" in unknown.output


def test_jsonl_validation(tmp_path):
    ok = tmp_path / "ok.jsonl"
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    ok.write_text(json.dumps({"idx": 1, "prompt": "q", "model_a": conv, "model_b": conv,
                              "criteria": ["short"], "preference": "tie"}) + "\n")
    r = runner.invoke(app, ["data", "import", "jsonl", str(ok), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[str(ok)]["preferences"] == {"tie": 1}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(ok.read_text() + '{"idx": 2, "prompt": "q", "model_a": []\n')
    r = runner.invoke(app, ["data", "import", "jsonl", str(bad)])
    assert r.exit_code == 2 and "bad.jsonl:line 2: invalid JSON (truncated line?)" in r.output


@pytest.mark.parametrize("cmd", [[], ["data"], ["data", "import"], ["data", "import", "alpaca-eval"],
                                 ["data", "import", "arena"], ["data", "import", "jsonl"], ["data", "stats"]])
def test_help_everywhere(cmd):
    r = runner.invoke(app, [*cmd, "--help"])
    assert r.exit_code == 0 and "Usage" in r.stdout


SHARED = paths.shared_data()


@pytest.mark.skipif(SHARED is None or not (SHARED / "alpaca_eval").is_dir(), reason="no ../shared/data")
def test_acceptance_default_import_in_a_real_process(tmp_path):
    """The acceptance check, through the installed entry point in a fresh process."""
    exe = [str(Path(sys.executable).parent / "usl")]
    env_home = ["--home", str(tmp_path / "home")]
    r = subprocess.run(exe + env_home + ["data", "import", "alpaca-eval"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    st = json.loads(subprocess.run(exe + env_home + ["data", "stats", "--json"], capture_output=True,
                                   text=True, check=True).stdout)
    split = json.loads((SHARED / "alpaca_eval" / "split.json").read_text())
    assert st["queries"] == 483 and st["baseline"] == "gpt4_1106_preview"
    assert {m["name"] for m in st["models"]} == set(split["board_models"]) | {"gpt4_1106_preview"}
    assert all(m["answers"] + m["missing"] == 483 for m in st["models"])
