"""How well does a judge follow criteria worded in ways it was not trained on?

Takes an eval file whose pairs carry a criteria ``family`` (the length flip: concise vs detailed
answers to the same query, each pair under the criteria of one side; the domain styles: an answer
in the style of the criteria against one in another style), replaces each pair's criteria by every
wording a probe file gives for its family, and reports the judge's accuracy per wording: the mean
over wordings per family, the worst wordings, and how many wordings reach 0.95.

    python scripts/criteria_wordings.py --judge default \\
        --wordings configs/length_wordings/probe_independent_g.json [--wordings ...] \\
        --data artifacts/data-full/eval/length_flip.jsonl [--limit 600] [--json]

Probe files hold {family: [wordings]}; ``concise`` and ``detailed`` stand for the families
``length_concise`` and ``length_detailed``, ``academy`` ... ``plain`` for ``domain_academy`` ...
All ``probe_independent_*.json`` were written blind: by writers who saw neither the code nor the
criteria libraries nor each other's files, each briefed differently. In ``configs/length_wordings/``
(a settings box of a ranking site; varied phrasings; rubric and user styles; criteria for a
reward-model test; a free-text box filled in by many kinds of people), which still measure fairly
depends on whether their failures steered the reading: ``a``, ``b``, ``c`` (30, 60, 60 a side) and
``d``, ``e``, ``f`` (60 a side) steered the keyword reading, and so did ``probe_worked_on.json``;
training wordings were written after reading the misses of ``g`` and ``h`` (60 a side); readers
were compared on ``i``; ``j`` has steered nothing. Write new blind sets before steering by them.
``configs/domain_wordings/probe_independent_a.json`` (40 a style) and ``_b.json`` (50 a style) are
blind too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from usl.fast.criterion_reader import DOMAIN
from usl.data.paper_jsonl import read_samples
from usl.evaluation.report import family_of, judge_samples, subsample
from usl.judges.registry import load_judge

ALIASES = {"concise": "length_concise", "detailed": "length_detailed"} | {
    s: f"domain_{s}" for s in DOMAIN.labels[1:]}


def read_probe(path: str) -> dict[str, list[str]]:
    """A probe file: {family: [wordings]}, each a non-empty list of strings; length aliases resolved."""
    try:
        with open(path) as f:
            probe = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path}: {e}") from e
    if not isinstance(probe, dict) or not probe:
        raise SystemExit(f"{path}: expected an object of lists of wordings, one per criteria family")
    for family, words in probe.items():
        if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise SystemExit(f"{path}: field '{family}' must be a non-empty list of non-empty strings")
    return {ALIASES.get(family, family): words for family, words in probe.items()}


def per_wording(judge, samples, wordings: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """family -> wording -> the share of the family's pairs in ``samples`` judged right with the pair's
    criteria replaced by that one wording."""
    per: dict[str, dict[str, float]] = {}
    for family, words in wordings.items():
        mine = [s for s in samples if family_of(s) == family]
        per[family] = {}
        for w in words:
            judged = judge_samples(judge, [dataclasses.replace(s, criteria=(w,)) for s in mine], batch_size=512)
            per[family][w] = float(np.mean([j.label == j.sample.preference for j in judged]))
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judge", default="default")
    ap.add_argument("--wordings", required=True, action="append", help="probe file; repeatable (pooled)")
    ap.add_argument("--data", required=True, help="eval file (paper JSONL with a 'family' field)")
    ap.add_argument("--limit", type=int, default=600, help="pairs drawn from the file (whole groups, seeded)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    wordings: dict[str, list[str]] = {}
    for path in args.wordings:
        for family, words in read_probe(path).items():
            mine = wordings.setdefault(family, [])
            for w in words:
                if w not in mine:
                    mine.append(w)
    samples = subsample(read_samples(args.data), args.limit)
    judge = load_judge(args.judge)
    by_family = {family: [s for s in samples if family_of(s) == family] for family in wordings}
    for family, mine in by_family.items():
        if not mine:
            raise SystemExit(f"{args.data}: no pairs of family {family}")
    per = per_wording(judge, samples, wordings)
    summary = {fam: {"wordings": len(v), "pairs": len(by_family[fam]),
                     "mean": round(float(np.mean(list(v.values()))), 3),
                     "at_least_0.95": int(sum(x >= 0.95 for x in v.values())),
                     "worst": sorted(v.items(), key=lambda kv: kv[1])[:5]} for fam, v in per.items()}
    if args.json:
        print(json.dumps({"judge": judge.identity, "summary": summary, "per_wording": per}, indent=1))
        return
    print(f"judge {judge.identity}; wordings from {', '.join(args.wordings)}")
    for fam, m in summary.items():
        print(f"{fam}: mean {m['mean']:.3f} over {m['wordings']} wordings x {m['pairs']} pairs; "
              f"{m['at_least_0.95']} wordings >= 0.95")
        for w, acc in m["worst"]:
            print(f"   {acc:.3f}  {w}")


if __name__ == "__main__":
    main()
