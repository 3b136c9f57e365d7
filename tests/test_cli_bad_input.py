"""Bad arguments and empty inputs: one line naming what is wrong, exit code 2, nothing stored.

Each case is one a new user is likely to hit: a traceback, or exit 0 with nothing done, would
leave them guessing."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from crm_fixtures import sample_dict, write_jsonl
from usl.cli import app
from test_data_alpaca_eval import shared_layout  # noqa: E402  (tests dir is on sys.path)

runner = CliRunner()


def usl(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def one_error_line(r, *needles):
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.output
    for n in needles:
        assert n in lines[0], lines[0]


def test_a_data_home_that_is_a_file_is_named(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    one_error_line(usl(f, "data", "stats"), str(f), "is a file")


@pytest.mark.parametrize("args, needle", [
    (["--criteria", ""], "--criteria #1 is empty"),
    (["--criteria", "Concise", "--avoid", "  "], "--avoid #1 is empty"),
    (["--topics", ","], "names no topic"),
])
def test_rank_refuses_empty_criteria_and_topics(tmp_path, args, needle):
    one_error_line(usl(tmp_path / "home", "rank", *args), needle)


def test_compare_names_the_set_whose_criterion_is_empty(tmp_path):
    one_error_line(usl(tmp_path / "home", "compare", "--a-criteria", "Concise", "--b-criteria", ""),
                   "--b-criteria #1 is empty")


@pytest.fixture
def pairs(tmp_path):
    return write_jsonl(tmp_path / "pairs.jsonl", [sample_dict(1), sample_dict(2)])


@pytest.mark.parametrize("judge, needle", [("length:3", "takes no argument"),
                                           ("random:abc", "must be an integer")])
def test_eval_names_a_judge_argument_it_cannot_use(tmp_path, pairs, judge, needle):
    one_error_line(usl(tmp_path / "home", "eval", "--judge", judge, "--data", str(pairs)), judge, needle)


def test_eval_refuses_an_empty_file_and_a_folder(tmp_path, pairs):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    one_error_line(usl(tmp_path / "home", "eval", "--judge", "length", "--data", str(pairs), "--data", str(empty)),
                   str(empty), "no samples")
    one_error_line(usl(tmp_path / "home", "eval", "--judge", "length", "--data", str(tmp_path)),
                   str(tmp_path), "a folder")


@pytest.mark.parametrize("option", [["--limit", "-1"], ["--batch-size", "0"], ["--batch-size", "-3"]])
def test_eval_refuses_counts_below_their_range(tmp_path, pairs, option):
    r = usl(tmp_path / "home", "eval", "--judge", "length", "--data", str(pairs), *option)
    assert r.exit_code == 2 and "Traceback" not in r.output and option[0] in r.output


def test_a_report_that_cannot_be_written_is_one_line(tmp_path, pairs):
    """/dev/full accepts the open and fails the write (ENOSPC), as a full disk does."""
    one_error_line(usl(tmp_path / "home", "eval", "--judge", "length", "--data", str(pairs), "--out", "/dev/full"),
                   "No space left")


def test_build_train_names_an_out_path_under_a_file_before_building(tmp_path):
    f = tmp_path / "train.jsonl"
    f.write_text("{}")
    one_error_line(usl(tmp_path / "home", "data", "build-train", "--source", str(tmp_path / "nowhere"),
                       "--out", str(f / "data")), str(f), "is a file")


def test_a_model_with_no_answers_is_not_imported_and_the_store_is_unchanged(tmp_path):
    home, src = tmp_path / "home", shared_layout(tmp_path / "ae")
    assert usl(home, "data", "import", "alpaca-eval", "--source", str(src)).exit_code == 0
    before = usl(home, "data", "stats", "--json").stdout
    (src / "outputs" / "m1.json.gz").write_bytes(gzip.compress(json.dumps([]).encode()))
    one_error_line(usl(home, "data", "import", "alpaca-eval", "--source", str(src)),
                   "no answer to any of the 4 queries", "m1")
    assert usl(home, "data", "stats", "--json").stdout == before


def test_a_line_cut_short_is_reported_at_its_own_line(tmp_path, pairs):
    cut = tmp_path / "cut.jsonl"
    cut.write_text(pairs.read_text().splitlines()[0] + "\n[\n")
    one_error_line(usl(tmp_path / "home", "eval", "--judge", "length", "--data", str(cut)),
                   f"{cut}:line 2", "(column 2)")


def test_a_model_named_twice_is_named(tmp_path):
    src = shared_layout(tmp_path / "ae")
    one_error_line(usl(tmp_path / "home", "data", "import", "alpaca-eval", "--source", str(src), "--models", "m1,m1"),
                   "'m1' is named twice")
