"""Warnings for criteria sets that pull against themselves.

Three checks, deliberately simple:

1. Length: two criteria that the judge reads as length wishes pointing opposite ways (the judge's
   ``CriteriaReading``, the one reading of length the judge and length control use too; a judge that
   does not read criteria reads none): two likes ("be concise" + "give detailed explanations"), or a
   like and a dislike ("be brief" + avoid "short answers"). Two dislikes do not contradict: avoiding both
   short and long answers asks for the middle.
2. An antonym lexicon of the other style axes (formality, technicality, tone, format). Each criterion
   is tagged with the poles it names; a word after a negation ("without jargon") flips its pole. Two
   likes on opposite poles of one axis contradict; so do a like and an avoid on the *same* pole.
3. A like and an avoid that say the same thing: identical after normalisation, or (when an
   embedder is given) cosine similarity of their sentence embeddings >= ``threshold``. Embeddings
   are not used between two likes: antonyms embed close together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from usl.types import Criteria, LengthWish

# axis -> (pole 0 words, pole 1 words). Multi-word entries match as phrases.
AXES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "formality": (("formal", "professional", "academic"),
                  ("casual", "informal", "conversational", "colloquial", "slang", "chatty")),
    "technicality": (("simple", "plain", "beginner", "layman", "laymen", "non-technical", "jargon-free"),
                     ("technical", "advanced", "expert", "jargon", "sophisticated")),
    "tone": (("serious", "sober", "solemn"),
             ("humorous", "humor", "humour", "funny", "playful", "witty", "jokes", "joke")),
    "format": (("bullet", "bullets", "bulleted", "list", "lists", "table", "tables"),
               ("prose", "paragraph", "paragraphs", "narrative", "essay")),
}
NEGATIONS = ("not", "no", "never", "without", "less", "avoid", "avoiding", "don't", "dont", "isn't",
             "nothing", "fewer")
_WORD = re.compile(r"[a-z][a-z'\-]*")


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Pole:
    axis: str
    side: int      # 0 or 1
    word: str


def poles(text: str) -> list[Pole]:
    """The style poles a criterion names, negation-aware.

    >>> [(p.axis, p.side) for p in poles("Not too formal, please")]
    [('formality', 1)]
    """
    tokens = _WORD.findall(text.lower())
    found: list[Pole] = []
    for axis, sides in AXES.items():
        for side, words in enumerate(sides):
            for w in words:
                parts = w.split()
                for i in range(len(tokens) - len(parts) + 1):
                    if tokens[i:i + len(parts)] == parts:
                        negated = any(t in NEGATIONS for t in tokens[max(0, i - 3):i])
                        found.append(Pole(axis, 1 - side if negated else side, w))
    # one entry per (axis, side)
    uniq = {(p.axis, p.side): p for p in found}
    return list(uniq.values())


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def find_contradictions(criteria: Criteria, length: Sequence[LengthWish | None] = (),
                        embedder: Encoder | None = None, threshold: float = 0.8) -> list[str]:
    """Human-readable warnings, one per contradicting pair (empty list: none found). ``length``: the length
    wish a judge reads in each criterion of ``criteria.as_list()`` (``CriteriaReading.length``; none given:
    no length check)."""
    c = criteria.canonical()
    out, seen = _length_contradictions(c, {" ".join(t.split()): w for t, w in zip(criteria.as_list(), length)})
    tagged_likes = [(t, poles(t)) for t in c.likes]
    tagged_avoid = [(t, poles(t)) for t in c.avoid]
    for i, (a, pa) in enumerate(tagged_likes):
        for b, pb in tagged_likes[i + 1:]:
            for x in pa:
                for y in pb:
                    if x.axis == y.axis and x.side != y.side:
                        out.append(f"liked criteria contradict on {x.axis}: {a!r} ({x.word}) vs {b!r} ({y.word})")
    for a, pa in tagged_likes:
        for b, pb in tagged_avoid:
            for x in pa:
                for y in pb:
                    if x.axis == y.axis and x.side == y.side and (a, b) not in seen:
                        seen.add((a, b))
                        out.append(f"{a!r} is liked but {b!r} is to be avoided ({x.axis}: {x.word} / {y.word})")
            if (a, b) not in seen and _norm(a) == _norm(b):
                seen.add((a, b))
                out.append(f"{a!r} is both liked and to be avoided")
    if embedder is not None and c.likes and c.avoid:
        vl = np.asarray(embedder.encode(list(c.likes)), dtype=np.float64)
        va = np.asarray(embedder.encode(list(c.avoid)), dtype=np.float64)
        vl /= np.linalg.norm(vl, axis=1, keepdims=True) + 1e-12
        va /= np.linalg.norm(va, axis=1, keepdims=True) + 1e-12
        sim = vl @ va.T
        for i, j in zip(*np.nonzero(sim >= threshold)):
            a, b = c.likes[i], c.avoid[j]
            if (a, b) not in seen:
                seen.add((a, b))
                out.append(f"{a!r} is liked but the similar {b!r} is to be avoided "
                           f"(similarity {sim[i, j]:.2f})")
    return out


def _length_contradictions(c: Criteria, read: dict[str, LengthWish | None]) -> tuple[list[str], set[tuple[str, str]]]:
    """Warnings for likes and dislikes that the judge reads as length wishes pointing opposite ways (``read``:
    criterion as ``Criteria.as_list`` words it -> its wish), and the (like, avoid) pairs warned about."""
    wishes = [read.get(t) for t in c.as_list()]      # c is canonical: its texts whitespace-normalised
    texts = list(c.likes) + list(c.avoid)
    n = len(c.likes)
    out, seen = [], set()
    for i in range(n):
        for j in range(i + 1, len(texts)):
            a, b = wishes[i], wishes[j]
            if a and b and a.side != b.side:
                out.append(f"criteria contradict on length: {a.criterion!r} asks for {a.side} answers, "
                           f"{b.criterion!r} for {b.side} ones")
                if j >= n:
                    seen.add((texts[i], texts[j]))
    return out, seen
