"""Which kind of wish a criterion states, and how reliably the default judge reads that kind."""

from __future__ import annotations

import numpy as np
import pytest

from usl.fast import criterion_kinds as ck
from usl.data.criteria import load_library
from usl.types import DataError


def test_reliability_is_the_pair_weighted_accuracy_over_each_kinds_families():
    by_family = {"length_concise": {"accuracy": 1.0, "n": 30}, "length_detailed": {"accuracy": 0.9, "n": 10},
                 "factual": {"accuracy": 0.5, "n": 8}, "not_a_family": {"accuracy": 0.1, "n": 99},
                 "harmless": {"accuracy": 0.7, "n": 0}}
    rel = ck.reliability_by_kind(by_family, load_library())
    assert rel == {"length": {"accuracy": 0.975, "n": 40}, "correctness": {"accuracy": 0.5, "n": 8}}


def test_classifier_separates_planted_kinds_and_weighs_rare_ones_up():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 3
    y = np.array([0] * 200 + [1] * 20 + [2] * 5)
    x = centres[y] + rng.normal(size=(len(y), 8))
    w = ck.fit_weights(x, y, 3, l2=1e-4)
    model = ck.KindModel(("a", "b", "c"), tuple(map(tuple, w)), {}, {})
    test_y = np.repeat([0, 1, 2], 50)
    p = model.probabilities(centres[test_y] + rng.normal(size=(150, 8)))
    assert p.shape == (150, 3) and np.allclose(p.sum(1), 1)
    assert (p.argmax(1) == test_y).mean() > 0.9
    assert (p[test_y == 2].argmax(1) == 2).mean() > 0.8          # 5 examples of 225, still found


def test_a_family_must_declare_its_kind(tmp_path):
    words = "\n".join(f"- wording {i}" for i in range(12))
    (tmp_path / "terse.yaml").write_text(f"family: terse\nopposite: null\nwordings:\n{words}\n")
    with pytest.raises(DataError, match=r"terse.yaml: field 'kind': expected one of"):
        load_library(tmp_path)


def test_kind_file_round_trips_and_a_bad_one_is_named(tmp_path):
    model = ck.KindModel(("length", "style"), ((1.0, 0.0, 0.5), (0.0, 1.0, 0.0)),
                         {"length": {"accuracy": 0.99, "n": 400}}, {"seed": 0})
    model.save(tmp_path)
    assert ck.KindModel.load(tmp_path) == model
    got = model.read(["short", "formal"], np.array([[5.0, 0.0], [0.0, 5.0]]), [0.1, 0.0])
    assert [(r.kind, r.accuracy, r.n) for r in got] == [("length", 0.99, 400), ("style", None, 0)]
    (tmp_path / ck.KINDS_FILE).write_text("{}")
    with pytest.raises(ValueError, match="criterion_kinds.json: not a criterion-kind model"):
        ck.KindModel.load(tmp_path)


def test_shipped_judge_reads_kinds_of_held_out_wordings_and_flags_correctness():
    """The shipped kind model was fitted on the library's training wordings; its recorded held-out figure is
    what the fit measured, and the default judge tells a user that it cannot verify facts."""
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    judge = load_judge("default")
    assert judge.kinds is not None and judge.kinds.fitted_on["held_out_accuracy"] >= 0.8
    reading = judge.criteria_reading(Criteria(("I prefer answers that are factually right.", "Be brief."),
                                              ("bullet points",)))
    assert [r.kind for r in reading] == ["correctness", "length", "style"]
    assert "cannot verify" in reading[0].note and not reading[1].note
    assert reading[1].accuracy is not None and reading[1].accuracy > 0.9
