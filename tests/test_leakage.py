"""The board-query guard: table of texts that must and must not count as leaks, plus the real board."""

from __future__ import annotations

import pytest

from usl.data.leakage import BoardGuard, assert_clean, load_guard, normalise
from usl.paths import shared_data
from usl.types import DataError, Message, PreferenceSample

BOARD = ["Who is Larry Page?", "Write a haiku about autumn leaves falling in the park.",
         "Rewrite the sentence to be more concise.\n\nThe meeting that we had yesterday was long.", "Hi"]


@pytest.mark.parametrize("text", [
    "Who is Larry Page?",                                              # exact
    "who is   LARRY page",                                             # case, spaces, punctuation
    "\n\nHuman: Who is Larry Page?\n\nAssistant: A co-founder of Google.",  # hh-rlhf transcript
    "## Human:\nWho is Larry Page?\n\n## Assistant:\nHe founded Google.",   # WebGPT markup
    "Please help. Write a haiku about autumn leaves falling in the park. Thanks!",  # contained
    "Rewrite the sentence to be more concise.\n\nThe meeting that we had yesterday was long.",  # PandaLM instr+input
    "Rewrite the sentence to be more concise. The meeting that we had yesterday was long",
    "Write a haiku about autumn leaves falling",                       # long enough and inside a board query
    "Hi",                                                              # short board query: exact match only
])
def test_leaks(text):
    assert BoardGuard(BOARD).leaks(text)


@pytest.mark.parametrize("text", [
    "Who is Larry King?",
    "Write a haiku about spring.",
    "Hi there, how do I bake bread?",       # "hi" is too short to look for inside other text
    "autumn leaves",                         # too short to count as a truncated board query
    "Whois Larry Page",                      # word boundaries matter
    "",
])
def test_does_not_leak(text):
    assert not BoardGuard(BOARD).leaks(text)


def test_normalise_strips_markup_and_punctuation():
    assert normalise("\n\nHuman: Who's  there?\n\nAssistant: Me!") == "who s there me"
    assert normalise("Ｆｕｌｌ－width") == "full width"


def _sample(prompt: str, user: str) -> PreferenceSample:
    conv = (Message("user", user), Message("assistant", "x"))
    return PreferenceSample("s1", prompt, conv, conv, ("concise",), "model_a")


def test_sample_check_reads_every_user_turn():
    guard = BoardGuard(BOARD)
    assert guard.sample_leaks(_sample("something else", "Who is Larry Page?"))
    assert not guard.sample_leaks(_sample("something else", "nothing here"))
    with pytest.raises(DataError, match="1 train samples contain board queries"):
        assert_clean(guard, [_sample("Who is Larry Page", "x")], what="train")


def test_empty_board_is_an_error():
    with pytest.raises(ValueError, match="at least one non-empty board instruction"):
        BoardGuard(["", "  ?! "])


@pytest.mark.skipif(shared_data() is None, reason="no ../shared/data")
def test_real_board_catches_known_copies():
    """PandaLM and hh-rlhf helpful-base hold AlpacaEval board queries; the guard must see them."""
    import json

    from usl.data.io import read_json
    from usl.data.pairs.human import pandalm_prompt

    root = shared_data()
    guard = load_guard(root)
    split = read_json(root / "alpaca_eval" / "split.json")
    assert len(guard) == len(split["board"]) == 483
    base = read_json(root / "alpaca_eval" / "outputs" / f"{split['baseline']}.json.gz")
    train = [base[i]["instruction"] for i in split["train"]]
    board = [base[i]["instruction"] for i in split["board"]]
    assert all(guard.leaks(f"\n\nHuman: {b}\n\nAssistant: ok") for b in board)
    assert sum(guard.leaks(t) for t in train) <= 3  # disjoint split; at most a few substring overlaps
    pandalm = read_json(root / "human" / "pandalm_testset_v1.json.gz")
    leaking = sum(guard.leaks(pandalm_prompt(x)) for x in pandalm)
    assert 400 < leaking < len(pandalm), json.dumps({"pandalm_leaking": leaking})
