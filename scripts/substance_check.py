"""Does a judge put substance first? Real concise answers against answers that say nothing, under wishes.

For board queries (never trained on), each pair is a real answer of a concise style model against a
non-answer made from the baseline's answer (``usl.data.substance``: cut to a few characters or words,
gibberish, random keys, a fixed string, word salad, lorem ipsum, punctuation, a refusal, the query itself,
another query's answer); every pair is judged under each of the twenty blind wishes of
``configs/blind_wishes.json``. Prints the share of judgments the real answer wins, by wish and by kind.

    python scripts/substance_check.py --judge default --per-kind 30 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from usl import paths
from usl.data import substance
from usl.data.pairs.alpaca import load_outputs
from usl.judges.registry import load_judge
from usl.types import Criteria

KINDS = ("cut_chars", "cut_words", "gibberish", "keyboard", "fixed", "word_salad", "lorem", "punctuation", "refusal",
         "copy", "other_answer")
WISHES = Path(__file__).resolve().parents[1] / "configs" / "blind_wishes.json"


def criteria(wish: str) -> Criteria:
    return Criteria(avoid=(wish.removeprefix("Avoid: "),)) if wish.startswith("Avoid: ") else Criteria(likes=(wish,))


def check(judge_spec: str, per_kind: int, seed: int = 7, home: str | None = None) -> dict:
    out = load_outputs(paths.shared_data() / "alpaca_eval")
    wishes = json.loads(WISHES.read_text())
    concise = sorted(m for m in out.answers if m.endswith("_concise"))
    pairs = substance.pairs(out.answers, list(out.board), np.random.default_rng(seed), source=out.baseline,
                            kinds=KINDS, models=concise, per_kind=per_kind)
    judge = load_judge(judge_spec, home=home)
    qs, real, non, kind = (list(x) for x in zip(*pairs))
    kind = np.array(kind)
    t = time.time()
    by_wish, wins = {}, []
    for group in ("brevity", "style"):
        for wish in wishes[group]:
            p = judge.judge_matrix(criteria(wish), qs, real, non)        # P(real answer beats the non-answer)
            by_wish[wish] = round(float(np.mean(p > 0.5)), 4)
            wins.append(p > 0.5)
    won = np.concatenate(wins)
    kinds = np.tile(kind, len(wins))
    return {"judge": judge.identity, "pairs": len(pairs), "judgments": int(won.size), "real_wins": round(float(won.mean()), 4),
            "by_kind": {k: round(float(won[kinds == k].mean()), 4) for k in KINDS},
            "by_wish": by_wish, "seconds": round(time.time() - t, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge", default="default")
    ap.add_argument("--per-kind", type=int, default=30)
    ap.add_argument("--home", default=None, help="Data directory (caches).")
    ap.add_argument("--json", default="", help="Also write the report here.")
    args = ap.parse_args()
    report = check(args.judge, args.per_kind, home=args.home)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
