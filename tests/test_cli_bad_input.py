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
    (["--criteria", ""], "--criteria #1: blank; a criterion needs words"),
    (["--criteria", "Concise", "--avoid", "  "], "--avoid #1: blank"),
    (["--topics", ","], "names no topic"),
])
def test_rank_refuses_empty_criteria_and_topics(tmp_path, args, needle):
    one_error_line(usl(tmp_path / "home", "rank", *args), needle)


def test_compare_names_the_set_whose_criterion_is_empty(tmp_path):
    one_error_line(usl(tmp_path / "home", "compare", "--a-criteria", "Concise", "--b-criteria", ""),
                   "--b-criteria #1: blank; a criterion needs words")


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


def test_train_substance_names_a_base_that_is_not_there_before_reading_data(tmp_path):
    missing = tmp_path / "nowhere" / "model.gguf"
    one_error_line(usl(tmp_path / "home", "train-substance", "--base", str(missing), "--alpaca", str(tmp_path / "ae"),
                       "--out", str(tmp_path / "out")), f"--base {missing}", "no such file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["init", "dev-pairs alone", "bad pairs line", "bad real-pairs line"])
def test_train_substance_names_its_pairs_and_init_before_reading_data(tmp_path, case):
    """The quality head's inputs are checked before AlpacaEval (a missing folder here) is read."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"idx": "a"}\n')
    args, needles = {"init": (["--init", str(tmp_path / "noreader")], ["--init", "no substance reader"]),
                     "dev-pairs alone": (["--dev-pairs", str(pairs)], ["--dev-pairs needs --pairs"]),
                     "bad pairs line": (["--pairs", str(pairs)], [str(pairs)]),
                     "bad real-pairs line": (["--real-pairs", str(pairs)], [str(pairs)])}[case]
    one_error_line(usl(tmp_path / "home", "train-substance", *args, "--alpaca", str(tmp_path / "ae"),
                       "--out", str(tmp_path / "out")), *needles)
    assert not (tmp_path / "out").exists()


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


# ---- every input in its range, from one definition (usl.leaderboard.limits) -----------------------
BAD_SPEC_INPUTS = [
    (["--n-bootstrap", "1000000000000"], "--n-bootstrap: 1000000000000 is out of range; it must be from 0 to 10,000"),
    (["--n-bootstrap", "3"], "--n-bootstrap: 3 resamples give no usable interval; use 0 (no interval) or 10 to 10,000"),
    (["--n-bootstrap", "-5"], "--n-bootstrap: -5 is out of range"),
    (["--seed", "-1"], "--seed: -1 is out of range; it must be from 0 to 4,294,967,295"),
    (["--seed", str(2**40)], "--seed: 1099511627776 is out of range"),
    ([x for i in range(10_000) for x in ("--criteria", f"wish {i}")], "--criteria: 10000 given; at most 10"),
    ([x for i in range(11) for x in ("--avoid", f"fault {i}")], "--avoid: 11 given; at most 10"),
    (["--criteria", "Concise", "--criteria", "w" * 301], "--criteria #2: 301 characters; at most 300"),
    (["--criteria", "Concise", "--criteria", "caf\udce9 style"], "--criteria #2: not valid UTF-8"),  # b"caf\xe9"
    (["--avoid", "\udcff\udcfe"], "--avoid #1: not valid UTF-8"),
    (["--use-case", "u" * 501], "--use-case: 501 characters; at most 500"),
    (["--topics", ",".join(f"t{i}" for i in range(201))], "--topics: 201 given; at most 200"),
    (["--baseline", "b" * 201], "--baseline: 201 characters; at most 200"),
    (["--judge", "llm:" + "j" * 1000], "--judge: 1004 characters; at most 1000"),
]


@pytest.fixture
def tiny_home(tmp_path):
    from server_real import make_tiny

    home = tmp_path / "home"
    home.mkdir()
    make_tiny(home)
    return home


def _files(home):
    return {p.name: p.read_bytes() for p in sorted(home.iterdir()) if p.is_file()}


@pytest.mark.parametrize("args, needle", BAD_SPEC_INPUTS, ids=[n.split(":")[0] + str(i) for i, (_, n) in
                                                              enumerate(BAD_SPEC_INPUTS)])
def test_rank_refuses_inputs_out_of_range_at_once_naming_the_option(tiny_home, args, needle):
    import time

    before = _files(tiny_home)
    t0 = time.perf_counter()
    r = usl(tiny_home, "rank", "--benchmark", "tiny", "--no-server", *args)
    assert time.perf_counter() - t0 < 2.0
    one_error_line(r, needle)
    assert _files(tiny_home) == before


def test_compare_and_a_saved_spec_are_held_to_the_same_ranges(tiny_home, tmp_path):
    one_error_line(usl(tiny_home, "compare", "--a-criteria", "Concise", "--b-criteria", "x\udcff"),
                   "--b-criteria #1: not valid UTF-8")
    one_error_line(usl(tiny_home, "compare", "--a-criteria", "x", "--b-criteria", "y", "--n-bootstrap", "-1"),
                   "--n-bootstrap: -1 is out of range")
    spec = tmp_path / "board.json"
    spec.write_text(json.dumps({"spec": {"n_bootstrap": 10**12, "benchmark": "tiny"}, "rows": []}))
    one_error_line(usl(tiny_home, "rank", "--spec", str(spec)), f"{spec}: spec.n_bootstrap: 1000000000000 is out of range")
    spec.write_text(json.dumps({"criteria": {"likes": [f"c{i}" for i in range(11)]}}))
    one_error_line(usl(tiny_home, "rank", "--spec", str(spec)), "spec.criteria.likes: 11 given; at most 10")
    spec.write_text(json.dumps({"benchmark": "tiny", "judge": f"fast:{tmp_path / 'nowhere'}"}))
    one_error_line(usl(tiny_home, "rank", "--spec", str(spec), "--no-server"),
                   f"{spec}: no fast CRM weights in {tmp_path / 'nowhere'}")


@pytest.mark.parametrize("options, match", [
    ({"n_bootstrap": 10_001}, r"n_bootstrap: 10001 is out of range; it must be from 0 to 10,000"),
    ({"n_bootstrap": True}, r"n_bootstrap: expected an integer, got bool"),
    ({"seed": -3}, r"seed: -3 is out of range"),
    ({"likes": ["ok", "x" * 301]}, r"criteria\.likes\[1\]: 301 characters; at most 300"),
    ({"likes": ["", "Concise"]}, r"criteria\.likes\[0\]: blank; a criterion needs words"),
    ({"avoid": ["bad \udc80 bytes"]}, r"criteria\.avoid\[0\]: not valid UTF-8 \(undecodable bytes at character 4\)"),
    ({"likes": [f"c{i}" for i in range(11)]}, r"criteria\.likes: 11 given; at most 10"),
    ({"topics": ["t" * 201]}, r"topics\[0\]: 201 characters"),
])
def test_the_python_api_raises_the_same_errors_before_any_work(options, match):
    from usl.leaderboard.limits import InputError
    from usl.leaderboard.types import LeaderboardSpec
    from usl.types import Criteria

    likes, avoid = options.pop("likes", ()), options.pop("avoid", ())
    kw = {"criteria": Criteria(tuple(likes), tuple(avoid))} if likes or avoid else {}
    with pytest.raises(InputError, match=match):
        LeaderboardSpec(**kw, **options)


def test_the_edges_of_each_range_are_accepted():
    from usl.leaderboard.limits import LIMITS
    from usl.leaderboard.types import LeaderboardSpec
    from usl.server.schemas import SpecIn
    from usl.types import Criteria

    likes = tuple(str(i) + "l" * (LIMITS.max_criterion_chars - 1) for i in range(LIMITS.max_criteria))
    for n, seed in ((0, 0), (LIMITS.max_bootstrap, LIMITS.max_seed)):
        spec = LeaderboardSpec(criteria=Criteria(likes, ("Jargon, clichés",)), n_bootstrap=n, seed=seed)
        assert spec.n_bootstrap == n and len(spec.criteria.likes) == 10
    # the HTTP schema is built from the same numbers
    props = SpecIn.model_json_schema()["properties"]
    assert props["likes"]["maxItems"] == LIMITS.max_criteria
    assert props["likes"]["items"]["maxLength"] == LIMITS.max_criterion_chars
