"""Speed of the substance reader on answers it has never read, on this machine's CPU, and what reading in
bfloat16 moves.

    python scripts/bench_substance_reader.py --data artifacts/data/eval/length_flip.jsonl --answers 64

Prints the reader's load time, answers/s in float32 and, where the CPU has bf16 matrix units (which the
judge then uses), in bfloat16, with the correlation and largest difference of the two readings. The
default judge reads every answer it has no stored reading for this way (a model added with
``usl data add-model``, ``usl eval`` on new pairs, the reward endpoint).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="paper-format JSONL of pairs (both answers are read)")
    ap.add_argument("--answers", type=int, default=64)
    ap.add_argument("--weights", default="", help="fast CRM weights (default: the shipped ones)")
    args = ap.parse_args()
    from pathlib import Path

    from usl.data.paper_jsonl import read_samples
    from usl.fast import substance
    from usl.weights import shipped

    samples = read_samples(args.data)
    q = [s.prompt for s in samples for _ in (0, 1)][: args.answers]
    a = [x for s in samples for x in (s.model_a[-1].content, s.model_b[-1].content)][: args.answers]
    folder = (Path(args.weights) if args.weights else shipped("fast-crm")) / substance.FOLDER
    base = json.loads((folder / "card.json").read_text())["recipe"].get("base")
    start = time.perf_counter()
    model = substance.SubstanceModel(folder, base=None if base == substance.DEFAULT_BASE else base)
    report = {"base": base, "load_s": round(time.perf_counter() - start, 2), "answers": len(a)}
    model.logits(q[:4], a[:4])                                              # warm up
    bf16 = model.bf16
    readings = {}
    for name, enabled in (("float32", False), ("bfloat16", True)) if bf16 else (("float32", False),):
        model.bf16 = enabled
        start = time.perf_counter()
        readings[name] = model.logits(q, a)
        report[f"{name}_answers_per_s"] = round(len(a) / (time.perf_counter() - start), 2)
    if bf16:
        r32, r16 = readings["float32"], readings["bfloat16"]
        report["bf16_vs_fp32"] = {"r": round(float(np.corrcoef(r32, r16)[0, 1]), 5),
                                  "max_abs_diff": round(float(np.abs(r32 - r16).max()), 3),
                                  "sign_agreement": round(float(np.mean((r32 > 0) == (r16 > 0))), 4)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
