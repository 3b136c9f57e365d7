"""Speed of the quality reader on pairs it has never read (both orders), on this machine's CPU.

    python scripts/bench_quality_reader.py --data artifacts/data/eval/quality.jsonl --pairs 48

Prints pairs/s, the answers' mean word count, and the batch size used. The default judge reads every
pair it has no stored reading for this way (``usl eval --judge default`` on new pairs, a new benchmark).
``--call-pairs N`` reads N pairs a call, as a board inside a request does (between two calls it may be
stopped: ``QualityReading``'s ``FINE_BATCH``), and prints the longest call.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="paper-format JSONL of pairs")
    ap.add_argument("--pairs", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--judge", default="quality")
    ap.add_argument("--call-pairs", type=int, default=0, help="pairs a call (default: all in one call)")
    args = ap.parse_args()
    from usl.data.paper_jsonl import read_samples
    from usl.judges.registry import load_judge

    samples = read_samples(args.data)[: args.pairs]
    q = [s.prompt for s in samples]
    a = [s.model_a[-1].content for s in samples]
    b = [s.model_b[-1].content for s in samples]
    judge = load_judge(args.judge, batch_size=args.batch_size)
    judge.readings(q[:2], a[:2], b[:2])                      # load and warm up
    step = args.call_pairs or len(q)
    calls = []
    for k in range(0, len(q), step):
        t = time.perf_counter()
        judge.readings(q[k:k + step], a[k:k + step], b[k:k + step])
        calls.append(time.perf_counter() - t)
    dt = sum(calls)
    words = np.mean([len(x.split()) for x in a + b])
    print(json.dumps({"pairs": len(q), "seconds": round(dt, 2), "pairs_per_s": round(len(q) / dt, 2),
                      "mean_answer_words": round(float(words), 1), "batch_size": args.batch_size,
                      "call_pairs": step, "longest_call_s": round(max(calls), 2),
                      "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
