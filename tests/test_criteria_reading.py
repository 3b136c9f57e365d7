"""The criteria reader (usl.fast.criteria_reading): the blind set it is measured on, its recipe, and what the
shipped reader reads there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from usl.data.criteria import KINDS
from usl.fast.criteria_reading import (
    CriteriaReader,
    CriteriaReaderConfig,
    blind_set,
    evaluate,
    library_held_out_set,
    reading_of,
    training_set,
    wordings_set,
)

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs" / "criteria_reader.yaml"


def test_blind_set_is_labelled_with_the_library_kinds_both_directions_and_both_signs():
    items = blind_set()
    assert len(items) >= 140
    assert {x.kind for x in items} == set(KINDS)
    assert {x.direction for x in items if x.kind == "length"} == {"shorter", "longer"}
    assert {x.direction for x in items if x.kind != "length"} == {"neither"}
    assert {x.sign for x in items} == {1, -1}


def test_a_malformed_blind_item_is_refused(tmp_path):
    bad = tmp_path / "blind.json"
    bad.write_text(json.dumps({"items": [["Not too long", "length", "briefer", -1]]}))
    with pytest.raises(ValueError, match="item 0"):
        blind_set(bad)
    bad.write_text(json.dumps({"concise": ["Be brief"], "sideways": ["?"]}))
    with pytest.raises(ValueError, match="sideways"):
        wordings_set(bad)


def test_recipe_never_trains_on_the_blind_set_the_tests_or_the_library_held_out_wordings():
    cfg = CriteriaReaderConfig.from_yaml(RECIPE)
    examples, dropped = training_set(cfg)
    norm = lambda t: " ".join(t.lower().split()).strip(" .!")
    trained = {norm(x.text) for x in examples}
    never = [*blind_set(), *library_held_out_set(cfg.library_seed), *(x for f in cfg.test for x in wordings_set(f))]
    assert not trained & {norm(x.text) for x in never}
    assert not set(cfg.wordings) & set(cfg.test)
    assert dropped["test"] > 0  # the wordings files restate some test wordings: they go


def test_recipe_refuses_an_unknown_field(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("epochs: 3\nlayer: [-1]\n")
    with pytest.raises(ValueError, match="layer"):
        CriteriaReaderConfig.from_yaml(recipe)
    recipe.write_text("epochs: 3\n")
    assert CriteriaReaderConfig.from_yaml(recipe, ["epochs=7", "layers=[-2]"]).epochs == 7


def test_evaluate_counts_what_a_reading_gets_right():
    from usl.fast.criteria_reading import Labelled

    items = [Labelled("a", "length", "shorter", -1), Labelled("b", "length", "longer", 1),
             Labelled("c", "style", "neither", 1)]
    got = {"a": ("length", "shorter", -1), "b": ("style", "shorter", -1), "c": ("style", "longer", 1)}
    r = evaluate(lambda texts: [got[t] for t in texts], items)
    assert r["kind"] == 0.667 and r["length_direction"] == 0.5
    assert r["length_direction_negated"] == 1.0 and r["false_length_wish"] == 1.0 and r["sign"] == 0.667
    assert r["length_wrong"] == ["b"]


@pytest.fixture(scope="module")
def shipped_reading():
    return evaluate(reading_of(CriteriaReader.load()), blind_set())


def test_shipped_reader_reads_the_blind_kinds(shipped_reading):
    """Kinds of the blind set (0.70 with the kind classifier, which the gate still reads; 0.91 shipped)."""
    assert shipped_reading["kind"] >= 0.85, shipped_reading["kind_by_kind"]
    assert min(shipped_reading["kind_by_kind"].values()) >= 0.75, shipped_reading["kind_by_kind"]


def _engine_reading(texts):
    from usl.fast.length_intent import read_wishes

    return [(None, w.side if w else None, None) for w in read_wishes(texts)]


def test_the_engine_reads_the_blind_length_wishes_as_the_judge_does():
    """Length control, the contradiction check and the judge's length prior read length with the mean of the
    length reader and the criteria reader (usl.fast.length_intent): 0.982 of the blind set's length wishes the
    right way and 0.045 of its other wishes taken for length ones, where the length reader alone read 0.839
    and 0.114."""
    got = evaluate(_engine_reading, blind_set())
    assert got["length_direction"] >= 0.95 and got["false_length_wish"] <= 0.05, got


def test_shipped_reader_records_its_recipe_and_figures():
    reader = CriteriaReader.load()
    assert reader.cfg == CriteriaReaderConfig.from_yaml(RECIPE)
    assert reader.trained["dev_library_held_out"]["kind"] >= 0.85
    assert set(reader.trained["test"]) == {Path(f).stem for f in reader.cfg.test}


def test_the_page_notes_what_the_reader_reads_as_correctness():
    """The default judge's reading of a board's criteria (the page's labels) follows the criteria reader: the
    blind set's code and fact criteria carry the note that a small judge cannot verify them."""
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    items = [x.text for x in blind_set() if x.kind == "correctness"]
    judge = load_judge("default")
    noted = [r for r in judge.criteria_reading(Criteria(tuple(items[:10]))) if "cannot verify" in r.note]
    kinds = [r.kind for r in CriteriaReader.load().read(items[:10])]
    assert len(noted) == kinds.count("correctness") >= 7


# Length wishes said through a negation or indirectly ("Not too long", "I'm in a hurry", "I have all day",
# "No need to be brief", "Spare me the details"), and 22 wishes of no length said alike ("Spare me the jokes",
# "Not too formal"): written before any reader was trained on them (issue 46), never trained on.
NEGATED_INDIRECT = ROOT / "configs" / "length_wordings" / "heldout_negated_indirect.json"


def test_negated_and_indirect_length_wishes_are_held_out():
    items = wordings_set(NEGATED_INDIRECT)
    assert len(items) >= 60 and {x.direction for x in items} == {"shorter", "longer", "neither"}
    cfg = CriteriaReaderConfig.from_yaml(RECIPE)
    norm = lambda t: " ".join(t.lower().split()).strip(" .!")
    assert not {norm(x.text) for x in training_set(cfg)[0]} & {norm(x.text) for x in items}


def test_the_engine_reads_most_negated_and_indirect_length_wishes_the_right_way():
    """0.886 with both readers, where the length reader alone read 0.729 and the criteria reader alone 0.857
    (each taking 0.136 of the wishes of no length for length ones, both together 0.091)."""
    items = wordings_set(NEGATED_INDIRECT)
    got = evaluate(_engine_reading, items)
    assert got["length_direction"] >= 0.85 and got["false_length_wish"] <= 0.1, got


@pytest.mark.xfail(strict=True, reason="issue 46 open: the engine reads 0.886 of them the right way "
                                       "(docs/log.md, 2026-12-03, length wishes read by two readers)")
def test_the_engine_reads_negated_and_indirect_length_wishes_the_right_way():
    got = evaluate(_engine_reading, wordings_set(NEGATED_INDIRECT))
    assert got["length_direction"] >= 0.95, got["length_wrong"]


def test_the_composed_wordings_are_what_their_script_writes():
    """configs/length_wordings/composed_u.json is rebuilt by its script with the default arguments."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compose", ROOT / "scripts" / "compose_length_wordings.py")
    compose = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compose)
    shipped = json.loads((ROOT / "configs" / "length_wordings" / "composed_u.json").read_text())
    assert compose.compose() == shipped
    assert min(len(v) for v in shipped.values()) > 900
