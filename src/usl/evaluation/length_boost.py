"""The fast CRM's factor on its length prior (``length_boost``), chosen after training.

No training pair of the default build holds a bare answer ("Chihuahua") against one that gives it at
length, so the learned terms never meet a one-word answer, and under some concise wordings they
outweigh the length prior there. This judges ``data`` (pairs of that kind from *training* queries:
``usl data build-train --terse-per-query 6`` writes them to ``train.jsonl`` as source
``length/alpaca_terse``) and ``guard`` (the dev files the CRM was early-stopped on) with the prior
times each factor, and picks the smallest factor with the best accuracy on ``data`` among those that
keep the guard's accuracy on every kind of pair (the first part of its source: human, general, style,
domain, length) within ``tolerance`` of factor 1. The factors multiply the one the weights hold (1
after training); the product is stored in their ``config.json``. The shipped weights took factors
1-4: over 1-12 the rule picks 8, which costs our human files 0.7-1.3 points.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from usl.data.paper_jsonl import read_samples
from usl.evaluation import metrics
from usl.evaluation.report import judge_samples
from usl.judges.fast import FastJudge

log = logging.getLogger(__name__)


def accuracy(judge, samples) -> dict[str, float]:
    """`usl eval`'s accuracy, in all ("all") and per kind of source (its first part: "human", ...)."""
    judged = judge_samples(judge, samples, batch_size=512)
    groups = {"all": judged}
    for j in judged:
        groups.setdefault(j.sample.source.split("/")[0], []).append(j)
    scored = {k: metrics.accuracy(v)[0] for k, v in groups.items()}
    return {k: v for k, v in scored.items() if v is not None}  # a kind with only ties has none


def choose(rows: dict[float, tuple[float, dict[str, float]]], tolerance: float) -> float:
    """The smallest factor with the best accuracy on the data among those whose guard accuracy, on every
    kind of pair, is within ``tolerance`` of factor 1's. ``rows``: factor -> (data, guard by kind)."""
    if 1.0 not in rows:
        raise ValueError("the length factors must include 1 (the guard's reference)")
    allowed = [b for b, (_, guard) in rows.items()
               if all(v >= rows[1.0][1].get(k, 0.0) - tolerance for k, v in guard.items())]
    return max(allowed, key=lambda b: (rows[b][0], -b))


def tune_length_boost(weights: str | Path, data: str, guard: Sequence[str], boosts: Sequence[float],
                      tolerance: float, source: str = "", home: str | None = None) -> dict:
    """Choose and write ``length_boost`` into ``weights/config.json``; returns what was measured."""
    samples = [s for s in read_samples(data) if not source or s.source == source]
    if not samples:
        raise ValueError(f"{data}: no samples{f' of source {source}' if source else ''} to choose the length factor on")
    guarded = [s for f in guard for s in read_samples(f)]
    judge = FastJudge(weights, home=home)
    base = judge.model.cfg.length_boost
    rows = {}
    for b in sorted(set(boosts) | {1.0}):
        judge.model.cfg.length_boost = base * b
        rows[b] = (accuracy(judge, samples)["all"], accuracy(judge, guarded))
        log.info("length factor %g: data %.3f (%d), guard %s", b, rows[b][0], len(samples),
                 {k: round(v, 3) for k, v in rows[b][1].items()})
    best = choose(rows, tolerance)
    path = Path(weights) / "config.json"
    cfg = json.loads(path.read_text())
    cfg["length_boost"] = base * best
    tuning = {"data": data, "source": source, "guard": list(guard), "tolerance": tolerance, "chosen": best,
              "accuracy": {f"{b:g}": {"data": d, "guard": g} for b, (d, g) in rows.items()}}
    cfg.setdefault("extra", {})["length_boost_tuning"] = tuning
    path.write_text(json.dumps(cfg, indent=2))
    log.info("length prior: factor %g (length_boost %g)", best, base * best)
    return tuning
