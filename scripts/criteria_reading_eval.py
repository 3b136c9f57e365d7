"""How the product reads criteria, measured on labelled wordings: kind, length direction and sign.

    python scripts/criteria_reading_eval.py --reader today          # the readers before the criteria reader
    python scripts/criteria_reading_eval.py --reader shipped        # the criteria reader that ships
    python scripts/criteria_reading_eval.py --reader DIR            # a criteria reader trained elsewhere

Sets: the blind set (tests/data/criteria_reading_blind.json), the criteria library's held-out wordings
(kind; length direction for the two length families), the blind length wordings files and the test file of
length intent, and the held-out length wishes said through a negation or indirectly
(configs/length_wordings/heldout_negated_indirect.json). "today" reads kind with criterion_kinds.json, direction with usl.fast.length_intent and
sign with split_sign.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from usl.fast.criteria_reading import Labelled, blind_set, evaluate, library_held_out_set, wordings_set

ROOT = Path(__file__).resolve().parents[1]
NEGATED = ROOT / "configs/length_wordings/heldout_negated_indirect.json"  # length wishes negated or indirect
LENGTH_BLIND = [ROOT / "configs/length_wordings" / f"probe_independent_{s}.json" for s in "ghij"]


def today_reader():
    import numpy as np

    from usl.fast.criteria_encoder import CriteriaEncoder
    from usl.fast.criterion_kinds import KindModel
    from usl.fast.length_intent import read_wishes
    from usl.fast.criteria_lexicon import split_sign
    from usl.weights import shipped

    kinds = KindModel.load(shipped("fast-crm"))
    enc = CriteriaEncoder()

    def read(texts: list[str]) -> list[tuple[str, str | None, int]]:
        rests, signs = zip(*(split_sign(t) for t in texts))
        p = kinds.probabilities(enc.encode(list(rests)).numpy().astype(np.float64))
        wishes = read_wishes(texts)
        return [(kinds.kinds[int(k)], w.side if w else None, int(s))
                for k, w, s in zip(p.argmax(1), wishes, signs)]

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reader", default="shipped", help="today, shipped, or a criteria reader's folder")
    args = ap.parse_args()
    if args.reader == "today":
        read = today_reader()
    else:
        from usl.fast.criteria_reading import CriteriaReader, reading_of

        reader = CriteriaReader.load(None if args.reader == "shipped" else args.reader)
        read = reading_of(reader)
    sets: dict[str, list[Labelled]] = {"blind": blind_set(), "library held out": library_held_out_set()}
    for f in LENGTH_BLIND:
        sets[f"length blind {f.stem}"] = wordings_set(f)
    sets["length_intent_heldout"] = wordings_set(ROOT / "tests/data/length_intent_heldout.json")
    sets["heldout_negated_indirect"] = wordings_set(NEGATED)
    got = {name: evaluate(read, items) for name, items in sets.items()}
    print(json.dumps(got, indent=1))
    print("\nset: kind / length wishes the right way / no-length read as length")
    for name, r in got.items():
        print(f"{name}: {r.get('kind', '-')} / {r.get('length_direction', '-')} / {r.get('false_length_wish', '-')}")


if __name__ == "__main__":
    main()
