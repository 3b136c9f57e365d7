"""Choose the fast CRM's factor on its length prior (``length_boost``) after training.

No training pair of the default build holds a bare answer ("Chihuahua") against one that gives it at
length, so the learned terms never meet a one-word answer, and under some concise wordings they
outweigh the length prior there (docs/log.md). This judges ``--data`` (pairs
of that kind from *training* queries: ``usl data build-train --terse-per-query 6`` writes them to
``train.jsonl`` as source ``length/alpaca_terse``) and ``--guard`` (the dev file the CRM was early-
stopped on) with the prior times each factor of ``--boosts``, and picks the smallest factor with the
best accuracy on ``--data`` among those that keep the guard's accuracy on every kind of pair (the
first part of its source: human, general, style, domain, length) within ``--tolerance`` of factor 1.
The factors multiply the one the weights hold (1 after ``usl train-fast``); ``--write`` stores the
product in their ``config.json`` (the judge's identity changes with it). The shipped weights took
``--boosts 1,1.5,2,3,4``: over 1-12 the rule picks 8, which costs our human files 0.7-1.3 points.

    python scripts/tune_length_boost.py --weights artifacts/fast \\
        --data artifacts/data-full2/train.jsonl --source length/alpaca_terse \\
        --guard artifacts/data-full/dev.jsonl [--write]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from usl.data.paper_jsonl import read_samples
from usl.evaluation import metrics
from usl.evaluation.report import judge_samples
from usl.judges.fast import FastJudge
from usl.types import DataError


def accuracy(judge: FastJudge, samples) -> dict[str, float]:
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
    allowed = [b for b, (_, guard) in rows.items()
               if all(v >= rows[1.0][1].get(k, 0.0) - tolerance for k, v in guard.items())]
    return max(allowed, key=lambda b: (rows[b][0], -b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", required=True, help="a fast CRM directory (usl train-fast --out)")
    ap.add_argument("--data", required=True, help="paper JSONL of bare-vs-elaborated pairs under length criteria")
    ap.add_argument("--source", default="", help="keep only the samples of this source (default: all)")
    ap.add_argument("--guard", required=True, help="paper JSONL whose accuracy must not fall (the dev file)")
    ap.add_argument("--boosts", default="1,1.5,2,3,4,6,8", help="factors tried, comma-separated")
    ap.add_argument("--tolerance", type=float, default=0.005,
                    help="largest fall of the guard's accuracy allowed on any kind of pair")
    ap.add_argument("--home", default=None, help="usl data home for the answer caches")
    ap.add_argument("--write", action="store_true", help="store the chosen factor in the weights' config.json")
    args = ap.parse_args()

    try:
        boosts = sorted({float(b) for b in args.boosts.split(",")} | {1.0})
    except ValueError as e:
        raise SystemExit(f"--boosts {args.boosts!r}: expected numbers separated by commas") from e
    if min(boosts) <= 0:
        raise SystemExit(f"--boosts {args.boosts!r}: factors must be > 0")
    try:  # everything read before anything is judged or written
        data = [s for s in read_samples(args.data) if not args.source or s.source == args.source]
        guard = read_samples(args.guard)
        judge = FastJudge(args.weights, home=args.home)
    except (DataError, FileNotFoundError, ValueError) as e:
        raise SystemExit(str(e)) from e
    if not data:
        raise SystemExit(f"{args.data}: no samples{f' of source {args.source}' if args.source else ''}")
    base = judge.model.cfg.length_boost
    rows = {}
    for b in boosts:
        judge.model.cfg.length_boost = base * b
        rows[b] = (accuracy(judge, data)["all"], accuracy(judge, guard))
        print(f"factor {b:>4g}: data {rows[b][0]:.3f} ({len(data)})  guard "
              + "  ".join(f"{k} {v:.3f}" for k, v in rows[b][1].items()), flush=True)
    best = choose(rows, args.tolerance)
    print(f"chosen factor {best:g}: length_boost {base * best:g}")
    if args.write:
        path = Path(args.weights) / "config.json"
        cfg = json.loads(path.read_text())
        cfg["length_boost"] = base * best
        cfg.setdefault("extra", {})["length_boost_tuning"] = {
            "data": args.data, "source": args.source, "guard": args.guard, "tolerance": args.tolerance,
            "accuracy": {f"{b:g}": {"data": d, "guard": g} for b, (d, g) in rows.items()}}
        path.write_text(json.dumps(cfg, indent=2))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
