"""Token lengths and slot spans of every pairwise pass of a board, for sizing the GPU engine.

A board run with a pairwise CRM reads, for each board model and query, the model's answer against
the baseline's in both orders under one criteria set: 43 x 483 x 2 = 41,538 passes on the default
AlpacaEval board. Speed depends on these lengths, not on the token values, so a GPU benchmark can
replay them with random ids over a random-weight backbone (``scripts/bench_gpu.py``)::

    python scripts/board_lengths.py --tokenizer DIR --out board_lengths.json.gz

Each pass is stored as its span rows (``formatting.PromptFormatter.span_rows``): criteria, query,
answer A, answer B, each ``[start, end, tokens before any cut]``, plus the pass's length.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def board_passes(data: Path, tokenizer: str, max_length: int, criteria: list[str]) -> list[list[list[int]]]:
    """Span rows of every pass: each board model's answer against the baseline's, both orders."""
    from usl.data.backbone import load_tokenizer
    from usl.crm.formatting import PromptFormatter
    from usl.data.alpaca_eval import find_model_files, read_outputs, read_split

    root = data / "alpaca_eval"
    split = read_split(root / "split.json")
    files = find_model_files(root / "outputs")
    base = read_outputs(files[split.baseline])
    fmt = PromptFormatter(load_tokenizer(tokenizer), max_length=max_length, query_max_tokens=256,
                          min_response_tokens=64, keep="head_tail")
    passes = []
    for model in split.board_models:
        answers = {" ".join(x.instruction.split()): x.output for x in read_outputs(files[model])}
        for i in split.board:
            q, b = base[i].instruction, base[i].output or ""
            a = answers.get(" ".join(q.split())) or ""
            for x, y in ((a, b), (b, a)):
                enc = fmt.pairwise(criteria, q, x, y)
                passes.append([[len(enc.input_ids)]] + fmt.span_rows(enc, "pairwise"))
    return passes


def train_passes(train_file: str, tokenizer: str, max_length: int, limit: int, seed: int = 0) -> list:
    """Span rows of ``limit`` training pairs in both orders, as ``usl train`` builds them (criteria
    noise and direction drawn as in its first epoch)."""
    from usl.data.backbone import load_tokenizer
    from usl.crm.dataset import CRMDataset
    from usl.crm.formatting import PromptFormatter
    from usl.crm.trainer import _load_split

    fmt = PromptFormatter(load_tokenizer(tokenizer), max_length=max_length, query_max_tokens=256,
                          min_response_tokens=64, keep="head_tail")
    ds = CRMDataset(_load_split(train_file, limit, seed), fmt, loss="pairwise", train=True, direction="random",
                    noise="random", both_orders=True, with_spans=True, seed=seed)
    passes = []
    for i in range(len(ds)):
        it = ds[i]
        passes.append([[len(it["input_ids"])]] + it["spans"])
        passes.append([[len(it["swapped_input_ids"])]] + it["swapped_spans"])
    return passes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--tokenizer", required=True, help="a model directory whose tokenizer counts the tokens")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--criteria", default="The answer is helpful, accurate and well written.")
    ap.add_argument("--train-file", help="instead of the board: training pairs of this paper-JSONL file")
    ap.add_argument("--limit", type=int, default=4000, help="with --train-file: how many pairs")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    passes = train_passes(a.train_file, a.tokenizer, a.max_length, a.limit) if a.train_file \
        else board_passes(a.data, a.tokenizer, a.max_length, [a.criteria])
    n = [p[0][0] for p in passes]
    info = {"tokenizer": Path(a.tokenizer).name, "max_length": a.max_length,
            "source": a.train_file or "board", "criteria": [a.criteria] if not a.train_file else "training pairs' own",
            "passes": len(passes), "mean_tokens": round(sum(n) / len(n), 1), "max_tokens": max(n),
            "cut": sum(p[3][2] > p[3][1] - p[3][0] or p[4][2] > p[4][1] - p[4][0] for p in passes)}
    with gzip.open(a.out, "wt") as f:
        json.dump({**info, "spans": passes}, f, separators=(",", ":"))
    print(json.dumps(info))


if __name__ == "__main__":
    main()
