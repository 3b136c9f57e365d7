"""The criteria lexicon (usl.fast.criteria_lexicon) knocked out of the shipped length reader, a part at a
time: how much of the reader's length reading rests on each part of the keyword features?

    python scripts/lexicon_ablation.py

The shipped length reader (weights/fast-crm/length_reader, which length control, the contradiction check and
the judge's length prior read) sees MiniLM token states and the 17 keyword features. Here each part's
columns are set to zero at reading time (a knock-out: the heads are not retrained without them) and the
length wishes of the blind set, the blind length sets g-j and the length-intent test file are read as
usl.fast.length_intent reads them (P(neither) < 0.5, the side turned by split_sign's sign).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from usl.fast.criteria_lexicon import LEXICON_AXES
from usl.fast.criteria_reading import blind_set, wordings_set
from usl.fast.criterion_reader import CriterionReader
from usl.fast.criteria_lexicon import split_sign
from usl.weights import shipped

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"length (short, long)": ("short", "long"), "negation": ("negation",),
         "registers (academic, business, literary, fun, plain)": ("academic", "business", "literary", "fun", "plain"),
         "layout (structure, prose)": ("structure", "prose"),
         "content (examples, code, question, ai)": ("examples", "code", "question", "ai"),
         "quality (safe, helpful, warm)": ("safe", "helpful", "warm"), "all 17": tuple(LEXICON_AXES)}


def main() -> None:
    sets = {"blind": blind_set()} | {s: wordings_set(ROOT / f"configs/length_wordings/probe_independent_{s}.json")
                                     for s in "ghij"}
    sets["length_intent_heldout"] = wordings_set(ROOT / "tests/data/length_intent_heldout.json")
    reader = CriterionReader.load(shipped("fast-crm"), "length")
    table = {}
    for name, items in sets.items():
        items = [x for x in items if x.direction in ("shorter", "longer")]
        rests, signs = zip(*(split_sign(x.text) for x in items))
        h, m, lex = reader.states(list(rests))
        for part, axes in {"none": (), **PARTS}.items():
            cols = [LEXICON_AXES.index(a) for a in axes]
            lx = lex.copy()
            lx[:, cols] = 0.0
            p = reader._heads(h, m, lx)
            side = np.where(p[:, 0] >= 0.5, "", np.where((p[:, 1] - p[:, 2]) * np.asarray(signs) > 0, "shorter", "longer"))
            table.setdefault(part, {})[name] = round(float(np.mean(side == np.array([x.direction for x in items]))), 3)
    print(json.dumps(table, indent=1))
    names = list(sets)
    print("| knocked out | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for part, r in table.items():
        print(f"| {part} | " + " | ".join(f"{r[n]:.3f}" for n in names) + " |")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
