"""Seconds per pair of a pairwise CRM forward pass on this machine's CPU at a given token budget.

    python scripts/crm_cpu_speed.py --backbone smollm2-135m --max-length 1024 --pairs 8 --batch 1 4
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from usl.data.backbone import load_classifier, load_tokenizer, resolve_backbone
from usl.crm.formatting import PromptFormatter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="smollm2-135m")
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    a = ap.parse_args()
    t = time.perf_counter()
    d = resolve_backbone(a.backbone)
    tok = load_tokenizer(d)
    model = load_classifier(d, 2, tok).eval()
    load_s = time.perf_counter() - t
    fmt = PromptFormatter(tok, max_length=a.max_length)
    words = "The answer explains each step with a worked example and a short summary at the end.".split()
    long = " ".join(words[i % len(words)] for i in range(2000))
    rows = [fmt.pairwise(["Prefers concise answers", "Likes code examples"], f"Question {i}?", long, long[::-1])
            for i in range(a.pairs)]
    out = {"backbone": a.backbone, "load_s": round(load_s, 2), "tokens": len(rows[0].input_ids),
           "threads": torch.get_num_threads()}
    with torch.inference_mode():
        model(input_ids=torch.tensor([rows[0].input_ids]))           # warm-up
        for b in a.batch:
            t = time.perf_counter()
            for k in range(0, len(rows), b):
                ids = torch.tensor([r.input_ids for r in rows[k:k + b]])
                model(input_ids=ids)
            out[f"s_per_pair_batch{b}"] = round((time.perf_counter() - t) / len(rows), 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
