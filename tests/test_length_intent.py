"""The one reading of length intent (``usl.fast.length_intent``): the default judge's length reader, which the
judge, length control and the contradiction check all read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from usl.fast.length_intent import length_wish, length_wishes, read_wishes
from usl.leaderboard.contradictions import find_contradictions
from usl.leaderboard.service import LeaderboardService
from usl.leaderboard.types import LeaderboardSpec
from usl.store import Store
from usl.store.benchmarks import save_benchmark
from usl.types import Benchmark, Criteria, Query, Response

# Written for this test and never trained on (`usl train-reader --test` keeps it out of the reader's training)
# nor used to choose anything: a fresh measure of the reading on wordings nobody tuned it by.
HELD_OUT = Path(__file__).parent / "data" / "length_intent_heldout.json"
# Wordings no keyword list of the product held, which the judge acts on
UNLISTED = ("Keep it tight", "No walls of text", "tl;dr please", "I do not have much time")
NOT_LENGTH = ("Use formal language", "Cite sources", "Be accurate")


@pytest.mark.parametrize("text,side", [
    ("Prefer concise answers", "shorter"), ("Be thorough", "longer"), ("Avoid: long answers", "shorter"),
    ("Avoid: short answers", "longer"), ("Keep it tight", "shorter"), ("No walls of text", "shorter"),
    ("tl;dr please", "shorter"), *[(t, None) for t in NOT_LENGTH]])
def test_reads_which_way_a_criterion_points(text, side):
    wish = read_wishes([text])[0]
    assert (wish.side if wish else None) == side


def test_a_dislike_is_read_as_the_judge_reads_it():
    wishes = length_wishes(Criteria(("Use formal language",), ("long answers",)))
    assert [(w.criterion, w.side) for w in wishes] == [("Avoid: long answers", "shorter")]
    assert length_wish(Criteria(NOT_LENGTH)) is None


def test_held_out_wordings():
    table = json.loads(HELD_OUT.read_text())
    length = [(t, "shorter") for t in table["concise"]] + [(t, "longer") for t in table["detailed"]]
    wishes = read_wishes([t for t, _ in length])
    read = sum(w is not None for w in wishes) / len(length)
    right = sum(w is not None and w.side == side for w, (_, side) in zip(wishes, length)) / len(length)
    other = sum(w is not None for w in read_wishes(table["neutral"]))
    assert read >= 0.9 and right >= 0.85 and other <= 1, (read, right, other)


@pytest.mark.parametrize("text", [*UNLISTED, *NOT_LENGTH, "Be concise", "Give detailed explanations"])
def test_the_contradiction_check_reads_length_as_length_control_does(text):
    wish = length_wish(Criteria((text,)))
    for other, side in (("Be brief", "shorter"), ("Be thorough", "longer")):
        c = Criteria((text, other))
        warned = any("on length" in w for w in find_contradictions(c, read_wishes(c.as_list())))
        assert warned == (wish is not None and wish.side != side), (text, other)


QUESTIONS = ("How do I boil an egg?", "How do I keep basil fresh?", "Why is the sky blue?",
             "How do I remove a stripped screw?")
ANSWERS = {
    "base": ("Boil it for about nine minutes, then cool it in cold water so it peels easily.",
             "Keep it in a glass of water on the counter, loosely covered, away from cold drafts.",
             "Air scatters blue sunlight more than red, so blue light reaches your eyes from every direction.",
             "Press a wide rubber band between the screwdriver and the screw to get more grip, then turn slowly."),
    "brief": ("Boil it nine minutes.", "Stand it in water.", "Air scatters blue light most.",
              "Use a rubber band for grip."),
    "wordy": tuple(a + " " + " ".join([
        "It helps to understand why this works before you start, because the details matter a great deal.",
        "Many people skip this step and are disappointed with the result, so take your time with it.",
        "There are several variations worth knowing, and each suits a slightly different situation.",
        "If the first attempt does not go as planned, adjust one thing at a time and try again.",
        "With a little practice this becomes second nature, and you will rarely need to think about it."])
        for a in ("Boil the egg for about nine minutes, then move it to cold water.",
                  "Keep basil in a glass of water on the counter, loosely covered.",
                  "Sunlight is scattered by the air, and blue light is scattered most.",
                  "Put a wide rubber band between the screwdriver and the screw.")),
}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    home = tmp_path_factory.mktemp("length_home")
    store = Store(home / "usl.sqlite")
    queries = tuple(Query(f"q{i}", q) for i, q in enumerate(QUESTIONS))
    save_benchmark(store, Benchmark("kitchen", queries, tuple(ANSWERS), "base"),
                   [Response(q.id, m, a[i]) for m, a in ANSWERS.items() for i, q in enumerate(queries)], source="test")
    store.close()
    return LeaderboardService(Store(home / "usl.sqlite"), home=home, auto_topics=False)


def board(service, text: str):
    spec = LeaderboardSpec(benchmark="kitchen", judge="default", criteria=Criteria((text,)), n_bootstrap=0)
    board = service.rank(spec)
    return board.spec["length_control"], {r.model: r for r in board.rows}


@pytest.mark.parametrize("text", UNLISTED)
def test_a_board_keeps_the_length_wish_it_was_asked_for(service, text):
    control, rows = board(service, text)
    assert control.startswith("off: the criteria ask for shorter answers") or (
        text == "I do not have much time" and control.startswith("off")), control
    assert all(r.lc_win_rate is None for r in rows.values())
    if text != "I do not have much time":  # the judge acts on the wish: the brief answers win
        assert rows["brief"].win_rate > rows["wordy"].win_rate


@pytest.mark.parametrize("text", NOT_LENGTH)
def test_a_board_controls_for_length_when_the_criteria_do_not_ask_for_it(service, text):
    control, rows = board(service, text)
    assert control == "on" and all(r.lc_win_rate is not None for r in rows.values())
