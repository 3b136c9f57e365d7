"""AlpacaEval outputs: the query split, and concise-vs-verbose pairs of the style models.

``outputs/<model>.json.gz`` holds every model's answers to the same 805 instructions (not always in
the same order, and a few files miss an instruction, so answers are matched by instruction text).
``split.json`` names the ``board`` queries (the leaderboard; never trained on) and the ``train``
queries. Style models come in three variants: ``<m>_concise``, ``<m>`` and ``<m>_verbose``.
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from usl.data.io import read_json
from usl.data.pairs.base import Pair, single_turn

log = logging.getLogger(__name__)

CONCISE, DETAILED = "length_concise", "length_detailed"


@dataclass(frozen=True)
class AlpacaOutputs:
    """Answers by model and instruction, plus the split's query lists (in baseline order)."""

    answers: dict[str, dict[str, str]]
    train: tuple[str, ...]
    board: tuple[str, ...]
    board_models: tuple[str, ...]
    style_models: tuple[str, ...]
    baseline: str = ""


def load_outputs(alpaca_dir: str | Path) -> AlpacaOutputs:
    alpaca_dir = Path(alpaca_dir)
    split = read_json(alpaca_dir / "split.json")
    answers: dict[str, dict[str, str]] = {}
    for path in sorted((alpaca_dir / "outputs").glob("*.json.gz")):
        model = path.name.removesuffix(".json.gz")
        answers[model] = {x["instruction"]: x["output"] for x in read_json(path)
                          if isinstance(x.get("output"), str) and x["output"].strip()}
    base = read_json(alpaca_dir / "outputs" / f"{split['baseline']}.json.gz")
    return AlpacaOutputs(answers,
                         tuple(base[i]["instruction"] for i in split["train"]),
                         tuple(base[i]["instruction"] for i in split["board"]),
                         tuple(split["board_models"]), tuple(split["style_models"]), str(split["baseline"]))


def board_answers(out: AlpacaOutputs) -> dict:
    """The default board as the GPU and bank tools read it: ``{"queries", "baseline", "answers": {model: [answer
    or None, one a query]}}``, the baseline and every board model."""
    models = [out.baseline, *out.board_models]
    return {"queries": list(out.board), "baseline": out.baseline,
            "answers": {m: [out.answers[m].get(q) for q in out.board] for m in models}}


def length_pairs(out: AlpacaOutputs, instructions: tuple[str, ...], *, source: str,
                 variants: tuple[tuple[str, str], ...] = (("_concise", "_verbose"), ("_concise", ""), ("", "_verbose")),
                 min_ratio: float = 1.2) -> list[Pair]:
    """Same model, shorter vs longer variant: the shorter wins under concise criteria.

    Pairs whose "verbose" answer is not at least ``min_ratio`` times longer are dropped: the
    prompt asked for length, but the label would then be noise.
    """
    pairs = []
    for model in out.style_models:
        for short_suffix, long_suffix in variants:
            short_m, long_m = out.answers.get(model + short_suffix), out.answers.get(model + long_suffix)
            if short_m is None or long_m is None:
                continue
            for q in instructions:
                s, lg = short_m.get(q), long_m.get(q)
                if s is None or lg is None or len(lg) < min_ratio * len(s):
                    continue
                pairs.append(Pair(source, q, q, single_turn(q), s, lg, CONCISE, DETAILED,
                                  note=f"{model}{short_suffix} vs {model}{long_suffix}"))
    return pairs


def cross_model_length_pairs(out: AlpacaOutputs, instructions: tuple[str, ...], rng: np.random.Generator,
                             *, source: str, per_query: int = 4, min_ratio: float = 2.5,
                             min_chars: int = 60) -> list[Pair]:
    """Answers of two different models where one is at least ``min_ratio`` times the other."""
    models = sorted(m for m in out.answers if m in out.board_models)
    pairs = []
    for q in instructions:
        texts = [(m, out.answers[m][q]) for m in models if q in out.answers[m]]
        cands = [(a, b) for a, b in itertools.combinations(texts, 2)
                 if min(len(a[1]), len(b[1])) >= min_chars
                 and max(len(a[1]), len(b[1])) >= min_ratio * min(len(a[1]), len(b[1]))]
        for i in rng.permutation(len(cands))[:per_query]:
            a, b = cands[i]
            short, long = (a, b) if len(a[1]) < len(b[1]) else (b, a)
            pairs.append(Pair(source, q, q, single_turn(q), short[1], long[1], CONCISE, DETAILED,
                              note=f"{short[0]} vs {long[0]}"))
    return pairs


_STOP = frozenset("a an and are as at be by for in is it its of on or that the this to was were with".split())
_REFUSAL = re.compile(r"\b(?:sorry|cannot|can't|unable)\b", re.I)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


def terse_length_pairs(out: AlpacaOutputs, instructions: tuple[str, ...], rng: np.random.Generator,
                       *, source: str, per_query: int = 6, max_chars: int = 60, min_long_chars: int = 200,
                       min_ratio: float = 4.0) -> list[Pair]:
    """A bare answer ("Chihuahua", "2 stars", "Yes.") against another model's answer that says the
    same and elaborates: the bare one wins under concise criteria.

    ``cross_model_length_pairs`` skips answers under 60 characters, so without these pairs a judge
    never sees a one-word answer. The long answer must contain every content word of the short one
    (so both give the same answer, and a truncated or off-topic short answer rarely qualifies);
    short answers that refuse or end in a colon (a list that never came) are left out.
    """
    models = sorted(m for m in out.answers if m in out.board_models)
    pairs = []
    for q in instructions:
        texts = [(m, out.answers[m][q]) for m in models if q in out.answers[m]]
        shorts = [(m, a, _content_words(a)) for m, a in texts
                  if len(a) < max_chars and not a.rstrip().endswith(":") and not _REFUSAL.search(a)]
        longs = [(m, a, _content_words(a)) for m, a in texts if len(a) >= min_long_chars]
        cands = [(s, lg) for s in shorts if s[2] for lg in longs
                 if lg[0] != s[0] and len(lg[1]) >= min_ratio * len(s[1]) and s[2] <= lg[2]]
        for i in rng.permutation(len(cands))[:per_query]:
            (ms, short, _), (ml, long, _) = cands[i]
            pairs.append(Pair(source, q, q, single_turn(q), short, long, CONCISE, DETAILED, note=f"{ms} vs {ml}"))
    return pairs


def answers_by_query(out: AlpacaOutputs, instructions: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """``{instruction: [(model, answer), ...]}`` over every outputs file, models sorted."""
    return {q: [(m, out.answers[m][q]) for m in sorted(out.answers) if q in out.answers[m]]
            for q in instructions}
