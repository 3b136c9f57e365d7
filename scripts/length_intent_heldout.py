"""How well the product's one reading of length intent (``usl.fast.length_intent``) reads criteria its
length reader never trained on.

Each wordings file (``configs/length_wordings``, ``configs/domain_wordings``) labels its criteria by
side: a length side (concise / detailed) is a length wish, every other side (neutral, a domain style,
another register) is not. ``--library-held-out`` adds the criteria library's held-out wordings of
``--library-seed`` (the split `usl data build-train` words the evaluation pairs with; no reader trains on
them). Per file and in all: how many length wishes are read as length wishes (what turns length control
off), how many of them point the right way, and how many non-length wishes are taken for length wishes
(what would turn it off wrongly). Only files the reader did not train on say anything: the shipped
reader's training files are in the fast CRM's model card (section "A learned length reader").

    python scripts/length_intent_heldout.py --library-held-out \\
        configs/length_wordings/probe_independent_{g,h,i,j}.json configs/length_wordings/extra_{p,q,r}.json \\
        configs/domain_wordings/*.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from usl.fast.criterion_reader import LENGTH, read_wordings
from usl.fast.length_intent import LengthReading, read_wishes, shipped_length_reading

SIDE = {1: "shorter", 2: "longer"}


def library_held_out(seed: int) -> list[tuple[str, int]]:
    from usl.data.criteria import load_library

    lib = load_library()
    return [(w, LENGTH.sides.get(name, 0)) for name in lib.families for w in lib.split(name, seed=seed).held_out]


def measure(examples: list[tuple[str, int]], reader) -> dict:
    wishes = read_wishes([t for t, _ in examples], reader)
    length = [(w, label) for w, (_, label) in zip(wishes, examples) if label]
    other = [(w, t) for w, (t, label) in zip(wishes, examples) if not label]
    read = [(w, label) for w, label in length if w is not None]
    return {"length_wordings": len(length), "read_as_length": len(read),
            "right_way": sum(w.side == SIDE[label] for w, label in read),
            "other_wordings": len(other), "other_read_as_length": sum(w is not None for w, _ in other),
            "misread_other": [t for w, t in other if w is not None][:10],
            "missed_length": [t for (w, _), (t, label) in zip(zip(wishes, examples), examples)
                              if label and (w is None or w.side != SIDE[label])][:10]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wordings", nargs="*", help="wordings files the reader did not train on")
    ap.add_argument("--library-held-out", action="store_true", help="add the library's held-out wordings")
    ap.add_argument("--library-seed", type=int, default=0)
    ap.add_argument("--reader", default="", help="a fast CRM's weights folder (its length_reader/ and, where it has "
                    "one, criteria_reader/; default: the shipped one)")
    args = ap.parse_args()
    reader = LengthReading.load(args.reader) if args.reader else shipped_length_reading()
    sets = {f: read_wordings(f, "length") for f in args.wordings}
    if args.library_held_out:
        sets[f"library held-out (seed {args.library_seed})"] = library_held_out(args.library_seed)
    total = {"length_wordings": 0, "read_as_length": 0, "right_way": 0, "other_wordings": 0, "other_read_as_length": 0}
    for name, examples in sets.items():
        m = measure(examples, reader)
        print(json.dumps({"set": Path(name).name if Path(name).exists() else name} | m))
        for k in total:
            total[k] += m[k]
    n, o = max(total["length_wordings"], 1), max(total["other_wordings"], 1)
    print(json.dumps({"set": "all"} | total | {
        "length_read": round(total["read_as_length"] / n, 3), "length_right_way": round(total["right_way"] / n, 3),
        "other_taken_for_length": round(total["other_read_as_length"] / o, 3)}))


if __name__ == "__main__":
    main()
