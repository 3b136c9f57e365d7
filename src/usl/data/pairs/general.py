"""General-preference pairs from LLM judges: AlpacaEval annotations and Arena-bench GPT-4 scores.

These labels say which answer a judge found better overall, not under a user's criteria, so they
get the general helpfulness family. Only confident labels are kept: AlpacaEval's preference is a
float in [1, 2] (1 = generator_1 better), kept when within ``margin`` of either end; Arena-bench
scores are 1-10 per answer, kept when two answers to one question differ by ``min_gap`` or more.

LLM judges favour long answers, and a reward model trained on their labels alone would learn
"longer wins". :func:`balance_length` subsamples so that longer and shorter winners are about
equally common, leaving the content of the answers as the signal.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from usl.data.io import iter_jsonl
from usl.data.pairs.alpaca import AlpacaOutputs
from usl.data.pairs.base import Pair, single_turn
from usl.types import DataError

log = logging.getLogger(__name__)
GENERAL = "general_helpful"
# The one wording under which the quality reader is trained and read: it reads general quality, not a
# user's criteria, so its input always carries the same text.
QUALITY_CRITERIA = ("The answer is helpful, accurate and well written.",)


def alpaca_annotation_pairs(annotations_dir: str | Path, out: AlpacaOutputs, allowed: set[str], *,
                            source: str, margin: float = 0.1) -> list[Pair]:
    """One file per model: its answer (``output_2``) against ``generator_1``'s answer in outputs/."""
    pairs = []
    for path in sorted(Path(annotations_dir).glob("*.jsonl.gz")):
        for n, obj in iter_jsonl(path):
            q = obj.get("instruction")
            if q not in allowed or obj.get("preference") is None:
                continue  # a few annotations have no preference (the judge failed to answer)
            try:
                pref = float(obj["preference"])
                g1, g2, out2 = obj["generator_1"], obj["generator_2"], obj["output_2"]
            except (KeyError, TypeError, ValueError) as e:
                raise DataError(f"bad annotation: {e}", path=str(path), line=n) from e
            out1 = out.answers.get(g1, {}).get(q)
            if out1 is None or not isinstance(out2, str) or not out2.strip() or out1 == out2:
                continue
            if pref <= 1 + margin:
                win, lose, note = out1, out2, f"{g1} > {g2}"
            elif pref >= 2 - margin:
                win, lose, note = out2, out1, f"{g2} > {g1}"
            else:
                continue
            pairs.append(Pair(source, q, q, single_turn(q), win, lose, GENERAL, note=note))
    return pairs


def alpaca_cross_pairs(annotations_dir: str | Path, allowed: set[str], rng: np.random.Generator, *,
                       source: str, confident: float = 0.1, per_query: int = 40) -> list[Pair]:
    """Pairs of two non-baseline models' answers to one query, from their judgments against the
    same baseline: one judged clearly better than the baseline (preference >= 2 - ``confident``),
    the other clearly worse (<= 1 + ``confident``). The judge never compared the two directly; the
    label holds by going through the baseline, as a Bradley-Terry reading of the two judgments
    would. At most ``per_query`` pairs a query, a seeded draw, so no query dominates."""
    by_query: dict[str, dict[str, tuple[float, str]]] = defaultdict(dict)
    for path in sorted(Path(annotations_dir).glob("*.jsonl.gz")):
        for n, obj in iter_jsonl(path):
            q = obj.get("instruction")
            if q not in allowed or obj.get("preference") is None:
                continue
            try:
                pref, model, answer = float(obj["preference"]), str(obj["generator_2"]), obj["output_2"]
            except (KeyError, TypeError, ValueError) as e:
                raise DataError(f"bad annotation: {e}", path=str(path), line=n) from e
            if isinstance(answer, str) and answer.strip():
                by_query[q][model] = (pref, answer)
    pairs = []
    for q in sorted(by_query):
        scored = sorted(by_query[q].items())
        better = [(m, a) for m, (p, a) in scored if p >= 2 - confident]
        worse = [(m, a) for m, (p, a) in scored if p <= 1 + confident]
        cand = [(w, lo) for w in better for lo in worse if w[1] != lo[1]]
        for i in rng.permutation(len(cand))[:per_query]:
            (mw, aw), (ml, al) = cand[int(i)]
            pairs.append(Pair(source, q, q, single_turn(q), aw, al, GENERAL, note=f"{mw} > {ml}"))
    return pairs


def arena_bench_pairs(bench_dir: str | Path, *, source: str = "general/arena_bench", min_gap: float = 3.0
                      ) -> list[Pair]:
    """Pairs of answers to one Arena-bench question whose GPT-4 scores differ by ``min_gap``+."""
    bench_dir = Path(bench_dir)
    questions, answers = _arena(bench_dir)
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _, obj in iter_jsonl(bench_dir / "gpt4_scores.jsonl.gz"):
        scores[(obj["question_id"], obj["model"].split("/")[-1])].append(float(obj["score"]))
    by_q: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for (qid, model), s in sorted(scores.items()):
        if model in answers.get(qid, {}) and qid in questions:
            by_q[qid].append((model, sum(s) / len(s)))
    pairs = []
    for qid, scored in sorted(by_q.items()):
        q = questions[qid]
        for (ma, sa), (mb, sb) in itertools.combinations(scored, 2):
            if abs(sa - sb) < min_gap or answers[qid][ma] == answers[qid][mb]:
                continue
            (mw, sw), (ml, sl) = ((ma, sa), (mb, sb)) if sa > sb else ((mb, sb), (ma, sa))
            pairs.append(Pair(source, q, q, single_turn(q), answers[qid][mw], answers[qid][ml], GENERAL,
                              note=json.dumps({mw: sw, ml: sl})))
    return pairs


def balance_length(pairs: list[Pair], rng: np.random.Generator, *, max_ratio: float = 1.0) -> list[Pair]:
    """Keep all pairs of the rarer kind (longer winner / shorter winner) and at most
    ``max_ratio`` times as many of the other, chosen at random; order is preserved."""
    longer = [i for i, p in enumerate(pairs) if len(p.winner) > len(p.loser)]
    shorter = [i for i, p in enumerate(pairs) if len(p.winner) <= len(p.loser)]
    few, many = sorted((longer, shorter), key=len)
    keep_many = rng.permutation(many)[: int(max_ratio * len(few))] if len(many) > max_ratio * len(few) else many
    keep = set(few) | {int(i) for i in keep_many}
    log.debug("length balance: %d longer-wins, %d shorter-wins -> %d kept", len(longer), len(shorter), len(keep))
    return [p for i, p in enumerate(pairs) if i in keep]


def under_length_wishes(pairs: list[Pair], *, max_ratio: float = 1.5) -> list[Pair]:
    """The pairs whose two answers both fit one length wish, put under it: a wish for brevity when both are
    shorter than the median answer to their query among ``pairs``, a wish for detail when both are longer.
    Only pairs whose answers are within ``max_ratio`` of each other in words are kept, so the two differ in
    quality and hardly in length: the label stays the better answer, and a judge that lets the wish decide
    instead of quality gets them wrong half the time."""
    words = lambda t: max(1, len(t.split()))
    by_query: dict[tuple[str, str], set[str]] = defaultdict(set)
    for p in pairs:
        by_query[(p.source, p.key)] |= {p.winner, p.loser}
    median = {k: float(np.median([words(t) for t in v])) for k, v in by_query.items()}
    out = []
    for p in pairs:
        w, lo, m = words(p.winner), words(p.loser), median[(p.source, p.key)]
        if max(w, lo) > max_ratio * min(w, lo):
            continue
        if max(w, lo) < m:
            out.append(replace(p, family="length_concise", note=f"{p.note}; both under the median {m:g} words"))
        elif min(w, lo) > m:
            out.append(replace(p, family="length_detailed", note=f"{p.note}; both over the median {m:g} words"))
    return out


def _arena(bench_dir: Path) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """({question_id: first turn}, {question_id: {model: answer}}) of an MT-Bench-format folder."""
    questions = {q["question_id"]: q["turns"][0] for _, q in iter_jsonl(bench_dir / "question.jsonl")}
    answers: dict[str, dict[str, str]] = {}
    for path in sorted((bench_dir / "model_answer").glob("*.jsonl.gz")):
        model = path.name.removesuffix(".jsonl.gz")
        for n, obj in iter_jsonl(path):
            try:
                text = obj["choices"][0]["turns"][0]
            except (KeyError, IndexError, TypeError) as e:
                raise DataError(f"bad model answer: {e}", path=str(path), line=n) from e
            if isinstance(text, str) and text.strip():
                answers.setdefault(obj["question_id"], {})[model] = text
    return questions, answers


def arena_answers(bench_dir: str | Path) -> dict[str, list[tuple[str, str]]]:
    """``{question: [(model, answer), ...]}``, the input :func:`usl.data.pairs.style.style_pairs` wants."""
    questions, answers = _arena(Path(bench_dir))
    return {questions[qid]: sorted(by_model.items()) for qid, by_model in sorted(answers.items())
            if qid in questions}
