"""Pack what a GPU box needs for the MiniLM CRM grid into one folder that fits a 64 MiB carry.

    python scripts/make_gpu_carry.py --data artifacts/data-full --out artifacts/gpu_m

Writes ``minilm/`` (all-MiniLM-L6-v2 from the installed package, floats as fp16: 45 MB; loaded as
fp32 there), ``train.jsonl.xz`` (xz: a third of gzip's size; the grid unpacks it) and
``dev.jsonl.gz`` (answers longer than ~1,250 characters keep their head and tail around ``[...]``:
at ``max_length: 512`` each answer of a pair gets at most ~200 tokens, so nothing the model would
have seen is lost; dev subsampled to ``--dev-n``), and ``eval/*.jsonl.gz`` unless ``--no-eval``
(room for a board export to score, ``scripts/crm_fidelity.py``). The grid itself is
``scripts/gpu_crm_grid.sh``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import random
import shutil
from pathlib import Path


def trim(text: str, head: int, tail: int) -> str:
    return text if len(text) <= head + tail + 100 else text[:head] + " [...] " + text[-tail:]


def pack_jsonl(src: Path, dst: Path, head: int, tail: int, limit: int = 0, seed: int = 0) -> int:
    lines = src.read_text().splitlines()
    if limit:
        random.Random(seed).shuffle(lines)
        lines = lines[:limit]
    opener = lzma.open if dst.suffix == ".xz" else gzip.open
    with opener(dst, "wt") as fo:
        for line in lines:
            d = json.loads(line)
            for side in ("model_a", "model_b"):
                for m in d[side]:
                    if m["role"] == "assistant":
                        m["content"] = trim(m["content"], head, tail)
            fo.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="artifacts/data-full", help="a `usl data build-train` output folder")
    ap.add_argument("--out", default="artifacts/gpu_m")
    ap.add_argument("--head", type=int, default=800)
    ap.add_argument("--tail", type=int, default=350)
    ap.add_argument("--dev-n", type=int, default=700)
    ap.add_argument("--no-eval", action="store_true", help="leave the eval files out")
    args = ap.parse_args()
    from safetensors.torch import load_file, save_file

    from usl.data.embed import encoder_path

    src, out, data = Path(encoder_path()), Path(args.out), Path(args.data)
    (out / "minilm").mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / f, out / "minilm" / f)
    sd = load_file(str(src / "model.safetensors"))
    save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in sd.items()},
              str(out / "minilm" / "model.safetensors"))
    n_tr = pack_jsonl(data / "train.jsonl", out / "train.jsonl.xz", args.head, args.tail)
    n_dev = pack_jsonl(data / "dev.jsonl", out / "dev.jsonl.gz", args.head, args.tail, args.dev_n)
    for f in [] if args.no_eval else sorted((data / "eval").glob("*.jsonl")):
        (out / "eval").mkdir(exist_ok=True)
        pack_jsonl(f, out / "eval" / (f.name + ".gz"), 10**9, 0)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: train {n_tr} lines, dev {n_dev}, {size / 2**20:.1f} MiB (the carry limit is 64 MiB with the tree)")


if __name__ == "__main__":
    main()
