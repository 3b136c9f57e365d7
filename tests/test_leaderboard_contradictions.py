"""Contradiction warnings: tables of criteria sets that must and must not warn."""

import numpy as np
import pytest

from usl.leaderboard.contradictions import find_contradictions, poles
from usl.types import Criteria


def check(likes, avoid):
    """The warnings for criteria as the default judge reads them (its length wishes), as a board gives them."""
    from usl.judges.registry import load_judge

    c = Criteria(likes, avoid)
    return find_contradictions(c, load_judge("default").read_criteria(c).length)

# A miss of the length reading (the mean of the length reader and the criteria reader) that the contradiction
# check shares with the judge instead of hiding it: the criteria reader reads the dislike of answers without
# detail as a wish for shorter answers (P 0.59), and outweighs the length reader, which cannot tell (P 0.35 / 0.30)
WITHOUT_DETAIL = pytest.mark.xfail(strict=True, reason="'Avoid: answers without detail' is read as asking for shorter")


@pytest.mark.parametrize("likes,avoid,needle", [
    (("Be concise", "Give detailed explanations"), (), "length"),
    (("Use a formal tone", "Keep it casual"), (), "formality"),
    (("Explain in simple terms", "Use technical jargon"), (), "technicality"),
    (("Be brief",), ("short answers",), "length"),
    (("Answer with bullet points",), ("lists",), "format"),
    (("Cite sources",), ("cite  SOURCES",), "both liked and"),
    (("Not too long", "Be thorough"), (), "length"),   # negation flips "long"
    (("Keep it tight", "Be thorough"), (), "length"),
    (("tl;dr please",), ("short answers",), "length"),
])
def test_warns(likes, avoid, needle):
    out = check(likes, avoid)
    assert out and needle in " ".join(out)


@pytest.mark.parametrize("likes,avoid", [
    (("Be concise", "Use a formal tone"), ()),
    (("Be concise",), ("long rambling answers",)),
    (("Not too long", "Be brief"), ()),
    (("No walls of text", "Be brief"), ()),
    pytest.param(("Give detailed explanations",), ("answers without detail",), marks=WITHOUT_DETAIL),  # = avoid(short)
    ((), ("short answers", "long answers")),                           # wants medium: not a contradiction
    (("Be accurate",), ()),
])
def test_does_not_warn(likes, avoid):
    assert check(likes, avoid) == []


def test_a_judge_that_reads_no_length_wish_gets_no_length_warning():
    """The default reading (a judge that does not read criteria) has no length wishes: only the word checks."""
    assert find_contradictions(Criteria(("Be concise", "Give detailed explanations"))) == []
    assert "formality" in " ".join(find_contradictions(Criteria(("Use a formal tone", "Keep it casual"))))


def test_poles_negation():
    assert [(p.axis, p.side) for p in poles("without jargon")] == [("technicality", 0)]
    assert [(p.axis, p.side) for p in poles("not too formal")] == [("formality", 1)]


class FakeEncoder:
    """Maps each text to a fixed vector: two near-duplicates and one unrelated."""

    table = {"Mention prices": [1.0, 0.0], "Talk about costs": [0.95, 0.1], "Use emoji": [0.0, 1.0]}

    def encode(self, texts):
        return np.array([self.table[t] for t in texts])


def test_embedding_similarity_between_like_and_avoid():
    out = find_contradictions(Criteria(("Mention prices",), ("Talk about costs", "Use emoji")), embedder=FakeEncoder())
    assert len(out) == 1 and "similar 'Talk about costs'" in out[0]
    assert find_contradictions(Criteria(("Mention prices",), ("Use emoji",)), embedder=FakeEncoder()) == []
