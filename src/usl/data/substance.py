"""Answers that do not answer: constructed from real answers, for the substance reader and its tests.

A judge that follows a user's style wishes must still never prefer an answer that says nothing. The
ways of saying nothing that matter for a leaderboard are the ones a model (or someone gaming the board)
can produce cheaply, and each is made here from real data:

========================  ==================================================================
kind                      how it is made
========================  ==================================================================
``cut_chars``             a real answer's first 3-40 characters ("Many famou")
``cut_words``             its first 1-12 words
``cut_mid``               a long answer cut mid-sentence at 15-60% of its length
``gibberish``             letters grouped into made-up words
``keyboard``              random printable characters
``word_salad``            real words of other answers in random order
``fixed``                 one content-free string shared by many queries
``other_answer``          a real answer to another query
``copy``                  the query itself
``refusal``               a refusal of a harmless request
========================  ==================================================================

Real answers are the AlpacaEval outputs of every model, and with :func:`pair_answers` the answers of
other training pairs (human conversations, other benchmarks): replies of other forms that answer, such as a
one-line reply in a conversation or the refusal of a harmful request. :func:`examples` gives labelled
(query, text) items for training a reader; :func:`pairs` gives (real answer, non-answer) pairs for the judge's test.
Both take the query list they may use, so the caller keeps board queries out of training.
``HELD_OUT_KINDS`` are never trained on: the test reports them apart, as non-answers of a form the
reader has not seen.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

KINDS = ("cut_chars", "cut_words", "cut_mid", "gibberish", "keyboard", "word_salad", "fixed", "other_answer",
         "copy", "refusal")
HELD_OUT_KINDS = ("lorem", "punctuation", "shuffled")   # test only: forms no training item has
# A refusal says nothing only where the request is harmless: it is made for AlpacaEval's queries, not for the
# queries of other pairs (:func:`pair_answers`), some of which ask for harm.
PAIR_KINDS = tuple(k for k in KINDS if k != "refusal")
# the sources of `usl data build-train` pairs whose answers were written by people or models (not constructed
# from other answers): their answers are real answers to their queries
REAL_PAIR_SOURCES = ("human/", "general/arena_bench", "domain/")
_SENTENCE_END = re.compile(r"[.!?:;)\]\"'`*]\s*$")
_WORD = re.compile(r"\S+")

# Content-free strings a degenerate model might emit for every query (``fixed``); half of the
# ``fixed`` items use one of these, half the first sentence of an answer to another query.
FILLERS = (
    "Thank you for your question.", "I hope this helps!", "That is a great question.", "Sure!", "OK.",
    "Here is the answer.", "Let me know if you have any other questions.", "I understand.",
    "As an AI language model, I am here to help.", "Certainly, I can help with that.", "Interesting.",
    "The answer depends on many factors.", "Please see below.", "Good question!", "Hello! How can I help you today?",
    "This is a complex topic with many perspectives.", "Yes.", "No.", "Done.", "N/A",
)
REFUSALS = (
    "I'm sorry, but I can't help with that request.", "I am unable to assist with this.",
    "Sorry, I cannot provide that information.", "I'm afraid I can't do that.",
    "As an AI, I am not able to answer this question.", "I apologize, but I cannot fulfill this request.",
    "I won't be able to help with that, sorry.", "Unfortunately, I cannot respond to this request.",
    "I'm not comfortable answering that.", "That is not something I can help with.",
)
LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
         "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip.")


@dataclass(frozen=True)
class Item:
    """One (query, text) with whether the text answers the query; ``kind`` is ``real`` or a non-answer kind."""

    query: str
    text: str
    answers: bool
    kind: str


def _cut_ok(answer: str, cut: str) -> bool:
    """A cut says less than the answer and does not end where a sentence ends (that would be a short
    answer, not a cut one)."""
    cut = cut.rstrip()
    return bool(cut) and len(cut) * 3 <= len(answer.strip()) and not _SENTENCE_END.search(cut)


def non_answer(kind: str, query: str, answer: str, rng: np.random.Generator, pool: Sequence[str]) -> str | None:
    """A non-answer of ``kind`` made from ``answer`` (a real answer to ``query``) and ``pool`` (real answers
    to other queries); None where this answer cannot give one (too short to cut, say)."""
    if kind == "cut_chars":
        cut = answer.strip()[:int(rng.integers(3, 41))]
        return cut if _cut_ok(answer, cut) else None
    if kind == "cut_words":
        words = _WORD.findall(answer)
        cut = " ".join(words[:int(rng.integers(1, 13))])
        return cut if _cut_ok(answer, cut) else None
    if kind == "cut_mid":
        text = answer.strip()
        if len(text) < 300:
            return None
        end = int(len(text) * rng.uniform(0.15, 0.6))
        cut = text[:end].rsplit(" ", 1)[0]
        return cut if not _SENTENCE_END.search(cut) else None
    if kind == "gibberish":
        n = int(rng.integers(1, 60))
        return " ".join("".join(rng.choice(list(string.ascii_lowercase), int(rng.integers(2, 11)))) for _ in range(n))
    if kind == "keyboard":
        chars = list(string.ascii_letters + string.digits + string.punctuation + "    ")
        return "".join(rng.choice(chars, int(rng.integers(3, 200)))).strip() or None
    if kind == "word_salad":
        words = _WORD.findall(pool[int(rng.integers(len(pool)))]) + _WORD.findall(pool[int(rng.integers(len(pool)))])
        if len(words) < 3:
            return None
        take = rng.choice(len(words), min(len(words), int(rng.integers(3, 80))), replace=False)
        return " ".join(words[i] for i in take)
    if kind == "fixed":
        if rng.random() < 0.5:
            return FILLERS[int(rng.integers(len(FILLERS)))]
        first = re.split(r"(?<=[.!?])\s", pool[int(rng.integers(len(pool)))].strip(), maxsplit=1)[0]
        return first[:200] or None
    if kind == "other_answer":
        return pool[int(rng.integers(len(pool)))]
    if kind == "copy":
        return query
    if kind == "refusal":
        return REFUSALS[int(rng.integers(len(REFUSALS)))]
    if kind == "lorem":
        return LOREM[:int(rng.integers(20, len(LOREM)))]
    if kind == "punctuation":
        return "".join(rng.choice(list(".,!?-*#~ "), int(rng.integers(1, 30)))).strip() or "..."
    if kind == "shuffled":
        words = _WORD.findall(answer)
        return " ".join(words[i] for i in rng.permutation(len(words))) if len(words) >= 8 else None
    raise ValueError(f"unknown non-answer kind {kind!r}; expected one of {KINDS + HELD_OUT_KINDS}")


def examples(answers: dict[str, dict[str, str]], queries: Sequence[str], rng: np.random.Generator, *,
             kinds: Sequence[str] = KINDS, negatives_per_answer: float = 1.0) -> list[Item]:
    """Every model's real answer to each of ``queries`` (``answers``: model -> query -> text) and, for each,
    about ``negatives_per_answer`` non-answers of kinds drawn uniformly from ``kinds``. Non-answers made from
    other answers draw those from the same ``queries`` only."""
    reals = [(q, a) for m in sorted(answers) for q in queries if (a := answers[m].get(q)) and a.strip()]
    out = [Item(q, a, True, "real") for q, a in reals]
    by_query: dict[str, list[str]] = {}
    for q, a in reals:
        by_query.setdefault(q, []).append(a)
    qs = list(by_query)
    for q, a in reals:
        for _ in range(int(negatives_per_answer) + (rng.random() < negatives_per_answer % 1)):
            other = qs[int(rng.integers(len(qs)))]
            if other == q:
                continue
            kind = str(rng.choice(list(kinds)))
            text = non_answer(kind, q, a, rng, by_query[other])
            if text is not None and text.strip():
                out.append(Item(q, text, False, kind))
    return out


def pair_answers(pairs_read: Iterable[tuple[str, str, str]]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Both answers of each preference pair, given as a judge reads it (``(query, answer_a, answer_b)``: a
    conversation's shared turns are the query, its last replies the answers), as :func:`examples` takes
    answers (``"pair0"``, ``"pair1"``, ...: a query's distinct answers in order), and the queries they answer."""
    by_query: dict[str, list[str]] = {}
    for q, a, b in pairs_read:
        seen = by_query.setdefault(q, [])
        for t in (a, b):
            if t.strip() and t not in seen:
                seen.append(t)
    answers: dict[str, dict[str, str]] = {}
    for q, texts in by_query.items():
        for i, t in enumerate(texts):
            answers.setdefault(f"pair{i}", {})[q] = t
    return answers, list(by_query)


def pairs(answers: dict[str, dict[str, str]], queries: Sequence[str], rng: np.random.Generator, *,
          source: str, kinds: Sequence[str] = KINDS + HELD_OUT_KINDS, models: Sequence[str] = (),
          per_kind: int = 200) -> list[tuple[str, str, str, str]]:
    """(query, real answer, non-answer, kind): for each kind, ``per_kind`` queries whose real answer is a
    random model's of ``models`` and whose non-answer is made from ``source``'s answer to the same query (the
    way the board is gamed: a strong model's answer cut short), or from other queries' answers."""
    models = [m for m in (models or sorted(answers)) if m in answers]
    src = answers[source]
    qs = [q for q in queries if q in src]
    pool = [src[q] for q in qs]
    out = []
    for kind in kinds:
        made = 0
        for i in rng.permutation(len(qs)):
            q = qs[i]
            real = answers[models[int(rng.integers(len(models)))]].get(q)
            text = non_answer(kind, q, src[q], rng, [p for p in pool if p != src[q]])
            if real and real.strip() and text and text.strip() and text != real:
                out.append((q, real, text, kind))
                made += 1
                if made == per_kind:
                    break
    return out


@dataclass(frozen=True)
class LabelledPair:
    """A pair judged under ``likes``; ``a_wins`` says which answer the label prefers; ``group`` its kind of
    pair (``non_answer``, ``length`` or ``general``)."""

    query: str
    a: str
    b: str
    likes: tuple[str, ...]
    a_wins: bool
    group: str


def calibration_pairs(answers: dict[str, dict[str, str]], annotations: dict[str, list[dict]], queries: Sequence[str],
                      wishes: dict[str, Sequence[str]], rng: np.random.Generator, *, baseline: str,
                      per_group: int = 160) -> list[LabelledPair]:
    """The three kinds of pairs that substance first must weigh against each other, on ``queries``:

    - ``non_answer``: a real answer of a concise style model (the hardest case: short, and often a few words)
      against a non-answer made from the baseline's, under a wish drawn from ``wishes`` (family -> wordings);
      the real answer wins whatever the wish;
    - ``length``: a style model's concise answer against its verbose one, under a brevity or a detail wish;
      the label follows the wish (an answer that is short but real must keep winning);
    - ``general``: a model's answer against the baseline's with a confident GPT-4 label (``annotations``:
      model -> AlpacaEval annotation rows), under no criteria (the judge's general wording).
    """
    qs = set(queries)
    out: list[LabelledPair] = []
    fams = sorted(wishes)
    short_models = [m for m in answers if m.endswith("_concise")]
    for q, real, non, kind in pairs(answers, queries, rng, kinds=KINDS, models=short_models,
                                    per_kind=max(1, per_group // len(KINDS)), source=baseline):
        fam = fams[int(rng.integers(len(fams)))]
        out.append(LabelledPair(q, real, non, (str(rng.choice(list(wishes[fam]))),), True, "non_answer"))
    stems = sorted({m.removesuffix("_concise") for m in answers if m.endswith("_concise")})
    length = []
    for m in stems:
        for q in queries:
            short, long_ = answers[m + "_concise"].get(q), answers.get(m + "_verbose", {}).get(q)
            if short and long_ and len(long_) > 1.2 * len(short):
                concise = bool(rng.random() < 0.5)
                fam = "length_concise" if concise else "length_detailed"
                length.append(LabelledPair(q, short, long_, (str(rng.choice(list(wishes[fam]))),), concise, "length"))
    out += [length[i] for i in rng.permutation(len(length))[:per_group]]
    general = [LabelledPair(r["instruction"], r["output_2"], answers[baseline][r["instruction"]], (), r["preference"] > 1.5,
                            "general")
               for rows in annotations.values() for r in rows
               if r.get("instruction") in qs and r["instruction"] in answers[baseline]
               and isinstance(r.get("output_2"), str) and r["output_2"].strip() and abs(r["preference"] - 1.5) > 0.3]
    out += [general[i] for i in rng.permutation(len(general))[:per_group]]
    return out
