"""How well does a judge follow length criteria worded in ways it was not trained on?

Takes the length-flip eval file (concise vs detailed answers to the same query, each pair under
the criteria of one side), replaces each pair's criteria by every wording of a probe file for that
side, and reports the judge's accuracy per wording: the mean over wordings per side, the worst
wordings, and how many wordings reach 0.95.

    python scripts/length_wordings.py --judge default \\
        --wordings configs/length_wordings/probe_independent_a.json [--wordings ...] \\
        --data artifacts/data-full/eval/length_flip.jsonl [--limit 600] [--json]

Probe files hold {"concise": [...], "detailed": [...]}. All ``probe_independent_*.json`` were
written by helper sessions that saw neither the code nor the criteria libraries nor each other's
files, each briefed differently (a settings box of a ranking site; varied phrasings; rubric and user
styles; criteria for a reward-model test; a free-text box filled in by many kinds of people).
Which of them still measure fairly depends on whether their failures steered the keyword reading:
``a``, ``b``, ``c`` (30, 60, 60 a side, session 9) and ``d``, ``e``, ``f`` (60 a side, session 11)
did, and so did ``probe_worked_on.json``; ``g`` and ``h`` (60 a side, session 11) have not been
looked at, and are the held-out measure. Write new blind sets before steering by them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from usl.data.paper_jsonl import read_samples
from usl.evaluation.report import family_of, judge_samples, subsample
from usl.judges.registry import load_judge

SIDES = {"length_concise": "concise", "length_detailed": "detailed"}


def read_probe(path: str) -> dict[str, list[str]]:
    """A probe file: {"concise": [wordings], "detailed": [wordings]}, each a non-empty list of strings."""
    try:
        with open(path) as f:
            probe = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path}: {e}") from e
    if not isinstance(probe, dict):
        raise SystemExit(f"{path}: expected an object with lists 'concise' and 'detailed'")
    for side in ("concise", "detailed"):
        words = probe.get(side)
        if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise SystemExit(f"{path}: field '{side}' must be a non-empty list of non-empty strings")
    return {side: probe[side] for side in ("concise", "detailed")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judge", default="default")
    ap.add_argument("--wordings", required=True, action="append", help="probe file; repeatable (pooled)")
    ap.add_argument("--data", required=True, help="length-flip eval file (paper JSONL with a 'family' field)")
    ap.add_argument("--limit", type=int, default=600, help="pairs drawn from the file (whole groups, seeded)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    wordings: dict[str, list[str]] = {"concise": [], "detailed": []}
    for path in args.wordings:
        for side, words in read_probe(path).items():
            wordings[side] += [w for w in words if w not in wordings[side]]
    samples = subsample(read_samples(args.data), args.limit)
    judge = load_judge(args.judge)
    by_side = {side: [s for s in samples if SIDES.get(family_of(s)) == side] for side in wordings}
    per: dict[str, dict[str, float]] = {}
    for side, mine in by_side.items():
        if not mine:
            raise SystemExit(f"{args.data}: no pairs of family length_{side}")
        per[side] = {}
        for w in wordings[side]:
            judged = judge_samples(judge, [dataclasses.replace(s, criteria=(w,)) for s in mine], batch_size=512)
            per[side][w] = float(np.mean([j.label == j.sample.preference for j in judged]))
    summary = {side: {"wordings": len(v), "pairs": len(by_side[side]),
                      "mean": round(float(np.mean(list(v.values()))), 3),
                      "at_least_0.95": int(sum(x >= 0.95 for x in v.values())),
                      "worst": sorted(v.items(), key=lambda kv: kv[1])[:5]} for side, v in per.items()}
    if args.json:
        print(json.dumps({"judge": judge.identity, "summary": summary, "per_wording": per}, indent=1))
        return
    print(f"judge {judge.identity}; wordings from {', '.join(args.wordings)}")
    for side, m in summary.items():
        print(f"{side}: mean {m['mean']:.3f} over {m['wordings']} wordings x {m['pairs']} pairs; "
              f"{m['at_least_0.95']} wordings >= 0.95")
        for w, acc in m["worst"]:
            print(f"   {acc:.3f}  {w}")


if __name__ == "__main__":
    main()
