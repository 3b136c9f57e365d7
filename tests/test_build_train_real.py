"""The real build from ../shared/data (skipped without it): no board query in train or dev."""

from __future__ import annotations

import json
import time

import pytest

from usl.data.build_train import BuildConfig, build
from usl.data.io import read_json
from usl.data.leakage import load_guard, normalise
from usl.data.paper_jsonl import read_samples
from usl.paths import shared_data

ROOT = shared_data()
pytestmark = pytest.mark.skipif(ROOT is None, reason="no ../shared/data")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    t0 = time.time()
    res = build(BuildConfig(out=str(out), max_per_source=400, write_gzip=False), root=ROOT)
    return out, res, time.time() - t0


def test_no_board_query_in_train_or_dev(built):
    out, res, _ = built
    split = read_json(ROOT / "alpaca_eval" / "split.json")
    base = read_json(ROOT / "alpaca_eval" / "outputs" / f"{split['baseline']}.json.gz")
    board = {normalise(base[i]["instruction"]) for i in split["board"]}
    guard = load_guard(ROOT)
    for name in ("train", "dev"):
        samples = read_samples(out / f"{name}.jsonl")
        assert len(samples) > 100
        users = {normalise(m.content) for s in samples for m in s.model_a + s.model_b if m.role == "user"}
        assert not (users & board), name                  # independent exact check
        assert not ({normalise(s.prompt) for s in samples} & board), name
        assert guard.find_leaks(samples) == [], name      # the containment guard


def test_eval_files_and_manifest(built):
    out, res, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    for name in ("length_flip", "length_terse", "domain_style", "domain_new_family", "new_topic", "human", "contradictory"):
        assert manifest["counts"][name]["_total"] > 0, name
        samples = read_samples(out / "eval" / f"{name}.jsonl")
        prefs = [s.preference for s in samples]
        assert 0.35 < prefs.count("model_a") / len(prefs) < 0.65, name  # positions randomised
    assert manifest["counts"]["pairs"]["human/pandalm:dropped_board"] > 400
    # Length flip: the same pair under concise and detailed criteria, preferring opposite answers.
    flip = read_samples(out / "eval" / "length_flip.jsonl")
    groups: dict[str, list] = {}
    for s in flip:
        groups.setdefault(s.group, []).append(s)
    assert all(len(g) == 2 for g in groups.values())
    a, b = next(iter(groups.values()))
    pa = a.response_a if a.preference == "model_a" else a.response_b
    pb = b.response_a if b.preference == "model_a" else b.response_b
    assert pa != pb


def test_wish_quality_pairs_differ_in_quality_not_length(built):
    """eval/wish_quality: both answers fit the length wish they are put under (within 1.5x of each other in
    words, both on the wish's side of their query's median), and the better answer is preferred."""
    out, res, _ = built
    samples = read_samples(out / "eval" / "wish_quality.jsonl")
    assert len(samples) > 100 and {s.source.split("/")[0] for s in samples} == {"wish_quality"}
    families = set()
    for s in samples:
        wa, wb = len(s.response_a.split()), len(s.response_b.split())
        assert max(wa, wb) <= 1.5 * max(1, min(wa, wb)), s.idx
        fam = s.meta_value("family")
        families.add(fam)
        assert fam in ("length_concise", "length_detailed") and len(s.criteria) == 1, s.idx
    assert families == {"length_concise", "length_detailed"}
    prefs = [s.preference for s in samples]
    assert 0.35 < prefs.count("model_a") / len(prefs) < 0.65
    assert len({s.source for s in samples[:60]}) > 1          # shuffled: a --limit takes every source


def test_wish_quality_training_pairs_come_from_training_queries_and_leave_the_rest_of_the_build_alone(built, tmp_path):
    """--wish-quality-train N: such pairs of training queries join train.jsonl, at most N a source; every other
    sample and file is byte for byte the build without them."""
    out, _, _ = built
    more = tmp_path / "more"
    build(BuildConfig(out=str(more), max_per_source=400, write_gzip=False, wish_quality_train=40), root=ROOT)
    lines = (more / "train.jsonl").read_text().splitlines(keepends=True)
    wish = [line for line in lines if '"source": "wish_quality/' in line]
    assert "".join(line for line in lines if line not in wish) == (out / "train.jsonl").read_text()
    for name in ("dev.jsonl", "eval/wish_quality.jsonl", "eval/general.jsonl"):
        assert (more / name).read_bytes() == (out / name).read_bytes(), name
    samples = read_samples(more / "train.jsonl")
    wish = [s for s in samples if s.source.startswith("wish_quality/")]
    by_source = {s.source for s in wish}
    assert len(by_source) >= 2 and all(sum(s.source == src for s in wish) <= 40 for src in by_source)
    evals = {s.prompt for s in read_samples(out / "eval" / "wish_quality.jsonl")}
    for s in wish:
        wa, wb = len(s.response_a.split()), len(s.response_b.split())
        assert max(wa, wb) <= 1.5 * max(1, min(wa, wb)) and s.prompt not in evals, s.idx
        assert s.meta_value("family") in ("length_concise", "length_detailed"), s.idx


def test_no_board_query_in_the_register_answers_we_wrote():
    """configs/register_answers.jsonl (answers written in named registers, `usl train-style --aux-registers`) is
    training data too: its queries are DSP training queries, none of them a board query."""
    from pathlib import Path

    from usl.fast.style_scorer import read_register_answers

    answers = read_register_answers(Path(__file__).parents[1] / "configs" / "register_answers.jsonl")
    assert len(answers) >= 100 and all(len(g) == 5 for g in answers.values())
    guard = load_guard(ROOT)
    assert [q for q in answers if guard.leaks(q)] == []
