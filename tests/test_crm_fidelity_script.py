"""scripts/crm_fidelity.py: the full CRM's scores saved per set and resumed, and the fast path's
boards compared with them."""

import gzip
import importlib.util
import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("crm_fidelity", ROOT / "scripts" / "crm_fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inputs(tmp_path, split: str):
    answers = {"split": split, "baseline": "base", "models": ["m1", "m2"],
               "queries": [{"id": "q0", "text": "Name a colour."}, {"id": "q1", "text": "Name a fruit."}],
               "answers": {"base": ["Red.", "Apple."], "m1": ["Blue, like the sky.", None],
                           "m2": ["Green.", "A ripe mango."]}}
    a = tmp_path / "answers.json.gz"
    with gzip.open(a, "wt") as f:
        json.dump(answers, f)
    sets = tmp_path / "sets.yaml"
    sets.write_text("sets:\n  - name: vivid\n    likes: [\"Vivid words.\"]\n    avoid: [\"Dull lists.\"]\n")
    P = np.array([[[0.8, np.nan], [0.3, 0.6]]], np.float32)       # (sets, models, queries)
    scores = tmp_path / "scores.npz"
    np.savez(scores, P=P, qidx=np.array([0, 1]), sets=np.array(["vivid"]), models=np.array(["m1", "m2"]),
             judge=np.array("crm@test"))
    return Namespace(answers=str(a), scores=str(scores), sets=str(sets), out=str(tmp_path / "distill.jsonl.gz"),
                     skip_sets=[])


def _score_args(tmp_path, judge="length"):
    args = _inputs(tmp_path, "board")
    sets = tmp_path / "sets2.yaml"
    sets.write_text("sets:\n  - name: short\n    likes: [\"Short.\"]\n  - name: long\n    likes: [\"Long.\"]\n")
    return Namespace(answers=args.answers, sets=str(sets), judge=judge, device=None, batch_size=8, n_queries=None,
                     seed=0, out=str(tmp_path / "board.npz"))


def test_score_saves_every_set_and_resumes_an_interrupted_run(tmp_path):
    mod, args = _script(), _score_args(tmp_path)
    mod.score(args)
    z = np.load(args.out)
    assert z["complete"].all() and z["P"].shape == (2, 2, 2)
    assert z["P"][0, 0, 0] == 1.0 and np.isnan(z["P"][0, 0, 1])   # the longer answer wins; m1 has no answer to q1
    # an interrupted run: only the first set was finished (its scores marked to see that they are kept)
    P, complete = z["P"].copy(), np.array([True, False])
    P[0, 0, 0], P[1] = 0.25, np.nan
    np.savez(args.out, P=P, qidx=z["qidx"], sets=z["sets"], models=z["models"], judge=z["judge"], complete=complete)
    mod.score(args)
    z2 = np.load(args.out)
    assert z2["complete"].all() and z2["P"][0, 0, 0] == 0.25                       # kept, not rescored
    np.testing.assert_array_equal(z2["P"][1], z["P"][1])                          # the missing set scored
    with pytest.raises(SystemExit, match="another judge"):
        mod.score(_score_args(tmp_path, judge="random:3"))


def test_score_treats_a_file_from_before_per_set_saving_as_finished(tmp_path):
    mod, args = _script(), _score_args(tmp_path)
    mod.score(args)
    z = np.load(args.out)
    P = z["P"].copy()
    P[0, 0, 0] = 0.25                                   # marked: a rescore would overwrite it
    np.savez(args.out, P=P, qidx=z["qidx"], sets=z["sets"], models=z["models"], judge=z["judge"])
    mod.score(args)
    assert np.load(args.out)["P"][0, 0, 0] == 0.25


def test_report_gives_tau_length_coupling_and_the_references_split_half_tau(tmp_path, capsys):
    # three models whose answers grow longer m1 < m2 < m3; the reference orders them the same way on
    # every query, so its board, its halves' boards and the `length` judge's board all agree
    # (the baseline's answers alternate 3 and 7 words, so `length` gives m1, m2, m3 win rates 0, 0.5, 1)
    words = {"base": [3, 7, 3, 7], "m1": [1] * 4, "m2": [5] * 4, "m3": [9] * 4}
    answers = {"split": "board", "baseline": "base", "models": ["m1", "m2", "m3"],
               "queries": [{"id": f"q{i}", "text": f"Question {i}?"} for i in range(4)],
               "answers": {m: [" ".join(["word"] * n) for n in ns] for m, ns in words.items()}}
    a = tmp_path / "board.json.gz"
    with gzip.open(a, "wt") as f:
        json.dump(answers, f)
    sets = tmp_path / "sets.yaml"
    sets.write_text("sets:\n  - name: long\n    likes: [\"Long answers.\"]\n")
    P = np.tile(np.array([0.2, 0.5, 0.8], np.float32)[None, :, None], (1, 1, 4))
    scores = tmp_path / "full.npz"
    np.savez(scores, P=P, qidx=np.arange(4), sets=np.array(["long"]), models=np.array(["m1", "m2", "m3"]),
             judge=np.array("crm@test"))
    _script().report(Namespace(answers=str(a), scores=str(scores), sets=str(sets), fast="length", refine_queries=None))
    out = json.loads(capsys.readouterr().out)
    row = out["sets"][0]
    assert row["kendall_tau"] == 1.0 and row["full_length_tau"] == 1.0 and row["fast_length_tau"] == 1.0
    assert row["full_split_half_tau"] == 1.0 and out["median_full_split_half_tau"] == 1.0
    # the reference reversed: a board that is a length dial the other way
    np.savez(scores, P=P[:, ::-1], qidx=np.arange(4), sets=np.array(["long"]), models=np.array(["m1", "m2", "m3"]),
             judge=np.array("crm@test"))
    _script().report(Namespace(answers=str(a), scores=str(scores), sets=str(sets), fast="length",
                               refine_queries=[4], refine_draws=2))
    out = json.loads(capsys.readouterr().out)
    row = out["sets"][0]
    assert row["kendall_tau"] == -1.0 and row["full_length_tau"] == -1.0 and row["fast_length_tau"] == 1.0
    # refinement replayed with every query judged by the reference: its own board, whatever the fast judge says
    assert out["refined"] == [{"queries_judged": 4, "median_tau": 1.0, "mean_tau": 1.0, "min_tau": 1.0,
                               "sets_closer_than_fast": "1 of 1", "ci_coverage": 1.0,
                               "unshrunk_median_tau": 1.0, "judged_only_median_tau": 1.0}]


def test_scores_are_read_only_with_the_answers_they_were_scored_from(tmp_path, capsys):
    mod, args = _script(), _score_args(tmp_path)
    mod.score(args)
    capsys.readouterr()
    assert np.load(args.out)["query_ids"].tolist() == ["q0", "q1"]
    report = Namespace(answers=args.answers, scores=args.out, sets=args.sets, fast="length", refine_queries=None)
    mod.report(report)
    out = json.loads(capsys.readouterr().out)
    assert out["n_sets"] == 2 and out["median_full_split_half_tau"] is None   # two queries cannot be split
    with gzip.open(args.answers, "rt") as f:                  # the same export, its queries in another order
        data = json.load(f)
    data["queries"].reverse()
    data["answers"] = {m: a[::-1] for m, a in data["answers"].items()}
    other = tmp_path / "other.json.gz"
    with gzip.open(other, "wt") as f:
        json.dump(data, f)
    with pytest.raises(SystemExit, match="was not scored from .*other queries"):
        mod.report(Namespace(answers=str(other), scores=args.out, sets=args.sets, fast="length", refine_queries=None))
    with pytest.raises(SystemExit, match="another judge, query subset"):   # nor resumed with them
        mod.score(Namespace(**{**vars(args), "answers": str(other)}))
    with pytest.raises(SystemExit, match="missing.json.gz: cannot read an answers export"):
        mod.report(Namespace(**{**vars(report), "answers": str(tmp_path / "missing.json.gz")}))
    with pytest.raises(SystemExit, match="--fast: unknown judge 'bogus'"):
        mod.report(Namespace(**{**vars(report), "fast": "bogus"}))
