"""Evaluation metrics against hand-computed examples, and `usl eval` end to end on a tiny file."""

import json

import pytest
from typer.testing import CliRunner

from crm_fixtures import sample_dict, write_jsonl
from usl.evaluation.metrics import Judged, accuracy, agreement, flip_consistency, summarize, swap_consistency
from usl.judges.base import Verdict
from usl.types import Message, PreferenceSample


def S(idx, pref, a="ra", b="rb", group=""):
    return PreferenceSample(idx, "q", (Message("user", "q"), Message("assistant", a)),
                            (Message("user", "q"), Message("assistant", b)), ("c",), pref, "src", group)


A, B, T = Verdict(1.0), Verdict(0.0), Verdict(0.0, 1.0)


def test_accuracy_agreement_swap_by_hand():
    items = [
        Judged(S("1", "model_a"), A, B),              # says A both orders: correct, consistent
        Judged(S("2", "model_b"), A, B),              # says A: wrong, consistent
        Judged(S("3", "model_a"), A, A),              # always the first: undecided -> half credit, inconsistent
        Judged(S("4", "tie"), T, T),                  # tie label, tie decision: agrees; not in accuracy
        Judged(S("5", "model_b"), Verdict(0.2), Verdict(0.9)),   # avg p_a = (0.2+0.1)/2 -> B: correct
    ]
    acc, n = accuracy(items)
    assert n == 4 and acc == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert agreement(items) == pytest.approx(3 / 5)          # 1, 4, 5 (3 is a tie decision on an A label)
    assert swap_consistency(items) == pytest.approx(4 / 5)   # only item 3 changes with the order
    m = summarize(items)
    assert (m["n"], m["n_non_tie"]) == (5, 4)


def test_an_undecided_verdict_in_both_orders_is_swap_consistent():
    """Two identical answers: a judge antisymmetric by construction says 0.5 / 0.5 whichever comes
    first. That is the same decision in both orders; one that always picks the first is not."""
    even = Verdict(0.5)
    same = Judged(S("1", "model_a", a="same", b="same"), even, even)
    assert same.label == "tie" and same.swap_consistent
    assert swap_consistency([same, Judged(S("2", "model_a"), A, B)]) == 1.0
    assert not Judged(S("3", "model_a"), Verdict(0.6), Verdict(0.6)).swap_consistent
    assert not Judged(S("4", "model_a"), even, Verdict(0.6)).swap_consistent


def test_flip_consistency_by_hand():
    g1 = [Judged(S("g1a", "model_a", group="g1"), A, B),                    # judge: ra
          Judged(S("g1b", "model_b", group="g1"), B, A)]                    # judge: rb -> flipped, both right
    g2 = [Judged(S("g2a", "model_a", group="g2"), A, B),                    # judge: ra
          Judged(S("g2b", "model_a", a="rb", b="ra", group="g2"), B, A)]    # swapped order, gold rb; judge ra
    g3 = [Judged(S("g3a", "model_a", group="g3"), A, B),
          Judged(S("g3b", "model_a", group="g3"), A, B)]                    # criteria agree: not counted
    g4 = [Judged(S("g4a", "model_a", group="g4"), A, B),
          Judged(S("g4b", "model_b", a="other", group="g4"), B, A)]         # different responses: skipped
    f = flip_consistency(g1 + g2 + g3 + g4)
    assert (f["pairs"], f["flip_rate"], f["flip_both_correct"], f["skipped_pairs"]) == (2, 0.5, 0.5, 1)


def test_empty_and_all_tie():
    assert accuracy([]) == (None, 0)
    assert summarize([Judged(S("1", "tie"), A, B)])["accuracy"] is None


@pytest.fixture
def tiny_file(tmp_path):
    rows = [sample_dict(i, pref="model_b" if i % 2 == 0 else "model_a") for i in range(6)]  # longer wins
    rows += [sample_dict(6, pref="tie")]
    return write_jsonl(tmp_path / "tiny.jsonl", rows)


def test_usl_eval_length_json(tiny_file, tmp_path):
    from usl.cli import app

    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "eval", "--judge", "length",
                                   "--data", str(tiny_file), "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert {"n", "accuracy", "swap_consistency", "agreement", "flip", "by_file", "by_source"} <= set(d)
    assert d["n"] == 7 and d["n_non_tie"] == 6 and d["accuracy"] == 1.0 and d["swap_consistency"] == 1.0
    assert d["by_file"]["tiny.jsonl"]["n"] == 7 and json.loads(out.read_text())["n"] == 7
    res = CliRunner().invoke(app, ["eval", "--judge", "length", "--data", str(tiny_file), "--limit", "2"])
    assert res.exit_code == 0 and "overall" in res.output and "     2" in res.output


def test_usl_eval_writes_one_prediction_per_sample(tiny_file, tmp_path):
    from usl.cli import app

    pred = tmp_path / "sub" / "pred.jsonl"
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "eval", "--judge", "random:3",
                                   "--data", str(tiny_file), "--predictions", str(pred), "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in pred.read_text().splitlines()]
    src = [json.loads(line) for line in tiny_file.read_text().splitlines()]
    assert [r["idx"] for r in rows] == [str(s["idx"]) for s in src]
    assert [r["preference"] for r in rows] == [s["preference"] for s in src]
    for r in rows:
        # the decision averages the two orders; credit follows the label, none on a tie sample
        assert abs(r["p_a"] - (r["p_a_given_order"] + r["p_a_swapped_order"]) / 2) < 1e-5
        assert r["correct"] == (None if r["preference"] == "tie" else
                                1.0 if r["label"] == r["preference"] else 0.5 if r["label"] == "tie" else 0.0)
    credits = [r["correct"] for r in rows if r["correct"] is not None]
    assert abs(sum(credits) / len(credits) - json.loads(res.output)["accuracy"]) < 1e-9


def test_usl_eval_keeps_files_of_one_name_apart(tmp_path):
    from usl.evaluation.report import evaluate
    from usl.judges.registry import load_judge

    # the same base name in two folders: two rows of by_file, each with its own samples
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # even rows have the longer answer second: `length` is right on every row of a, wrong on every row of b
    a = write_jsonl(tmp_path / "a" / "human.jsonl", [sample_dict(i, pref="model_b") for i in (0, 2, 4)])
    b = write_jsonl(tmp_path / "b" / "human.jsonl", [sample_dict(i, pref="model_a") for i in (0, 2)])
    c = write_jsonl(tmp_path / "style.jsonl", [sample_dict(0, pref="model_b")])
    report = evaluate(load_judge("length"), [a, b, c]).to_dict()
    assert report["files"] == [str(a), str(b), "style.jsonl"]
    assert [(report["by_file"][str(f)]["n"], report["by_file"][str(f)]["accuracy"]) for f in (a, b)] == \
        [(3, 1.0), (2, 0.0)]
    assert report["n"] == 6


def test_usl_eval_breaks_down_by_family(tmp_path):
    from usl.evaluation.report import evaluate
    from usl.judges.registry import load_judge

    # A is the short answer in even rows (concise side, A wins) and the long one in odd rows
    # (detailed side, A wins): the `length` judge is wrong on one side and right on the other
    rows = [sample_dict(i, pref="model_a") | {
        "family": "length_concise" if i % 2 == 0 else "length_detailed"} for i in range(6)]
    rows.append(sample_dict(6, pref="model_b"))  # no family: counted overall only
    report = evaluate(load_judge("length"), [write_jsonl(tmp_path / "f.jsonl", rows)]).to_dict()
    fam = report["by_family"]
    assert set(fam) == {"length_concise", "length_detailed"}
    assert (fam["length_concise"]["n"], fam["length_concise"]["accuracy"]) == (3, 0.0)
    assert (fam["length_detailed"]["n"], fam["length_detailed"]["accuracy"]) == (3, 1.0)
    assert report["n"] == 7


def test_usl_eval_errors(tiny_file, tmp_path):
    from usl.cli import app

    res = CliRunner().invoke(app, ["eval", "--judge", "nosuch", "--data", str(tiny_file)])
    assert res.exit_code == 2 and "unknown judge" in res.output
    res = CliRunner().invoke(app, ["eval", "--judge", "length", "--data", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and "file not found" in res.output
    # where the results go is checked before judging: a folder, or a folder under a file, is one line
    (tmp_path / "plain_file").write_text("keep")
    for option, path in (("--predictions", tmp_path), ("--out", tmp_path / "plain_file" / "r.json")):
        res = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "eval", "--judge", "length",
                                       "--data", str(tiny_file), option, str(path)])
        assert res.exit_code == 2 and f"error: {option} {path}" in res.output, res.output
        assert "overall" not in res.output  # nothing was judged
    assert (tmp_path / "plain_file").read_text() == "keep"


def test_subsample_keeps_groups_and_order():
    from usl.evaluation.report import subsample

    samples = [S(f"{g}{k}", "model_a", group=f"g{g}") for g in range(10) for k in range(2)]
    sub = subsample(samples, 6)
    assert len(sub) == 6 and sub == [s for s in samples if s in sub]          # file order kept
    groups = [s.group for s in sub]
    assert all(groups.count(g) == 2 for g in groups)                          # whole groups
    assert sub != samples[:6] or subsample(samples, 6, seed=1) != samples[:6]  # not simply the head
    assert subsample(samples, 0) == samples


def test_evaluate_lets_a_judge_read_every_answer_once_before_judging(tiny_file, tmp_path):
    from usl.evaluation.report import evaluate
    from usl.judges.registry import load_judge

    class Reading:
        """The `length` judge, plus the `prepare` hook the fast CRM has: it must see every answer first."""

        def __init__(self):
            self.inner, self.seen, self.judged_unseen = load_judge("length"), set(), 0
            self.identity = "reading"
            self.can_tie = False

        def prepare(self, queries, answers):
            assert len(queries) == len(answers)
            self.seen |= set(zip(queries, answers))

        def judge(self, requests):
            self.judged_unseen += sum((r.query, a) not in self.seen for r in requests
                                      for a in (r.response_a, r.response_b))
            return self.inner.judge(requests)

    j = Reading()
    report = evaluate(j, [tiny_file, write_jsonl(tmp_path / "g.jsonl", [sample_dict(9, pref="model_a")])])
    assert report.to_dict()["n"] == 8 and j.seen and j.judged_unseen == 0
