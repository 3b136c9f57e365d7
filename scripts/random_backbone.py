"""A randomly initialised backbone of a published shape, for sizing a training run offline.

The paper trains Qwen3 0.6B to 8B. Where those weights cannot be fetched (the GPU box here has no
network), a model of the same shape with random weights costs the same memory and time per step,
so `usl train` can be sized and checked on it; what it learns means nothing. The tokenizer is
borrowed from any local model directory (its ids must fit the shape's vocabulary)::

    python scripts/random_backbone.py --shape qwen3-4b --tokenizer DIR --out /root/qwen3-4b-random
    PYTHONPATH=src torchrun --nproc_per_node 2 -m usl.crm train --config configs/crm_smollm2_pairwise.yaml \\
        --set backbone=/root/qwen3-4b-random --set max_steps=24

Weights are drawn on the GPU when there is one (seconds for 4B parameters) and saved in bf16.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

# the published Qwen3 configurations (hidden size, layers, attention heads, key/value heads, MLP width)
QWEN3 = {"head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1e6,
         "rms_norm_eps": 1e-6, "hidden_act": "silu"}
SHAPES = {
    "qwen3-0.6b": dict(QWEN3, hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, intermediate_size=3072, tie_word_embeddings=True),
    "qwen3-1.7b": dict(QWEN3, hidden_size=2048, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, intermediate_size=6144, tie_word_embeddings=True),
    "qwen3-4b": dict(QWEN3, hidden_size=2560, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, intermediate_size=9728, tie_word_embeddings=True),
    "qwen3-8b": dict(QWEN3, hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, intermediate_size=12288, tie_word_embeddings=False),
}

def build(shape: str, tokenizer_dir: Path, out: Path, seed: int = 0) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

    if shape not in SHAPES:
        raise SystemExit(f"--shape {shape!r}: one of {', '.join(SHAPES)}")
    if not (tokenizer_dir / "tokenizer.json").is_file() and not (tokenizer_dir / "vocab.txt").is_file():
        raise SystemExit(f"--tokenizer {tokenizer_dir}: no tokenizer.json or vocab.txt there")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    cfg = Qwen3Config(**SHAPES[shape], bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    if len(tok) > cfg.vocab_size:
        raise SystemExit(f"--tokenizer {tokenizer_dir}: {len(tok)} tokens do not fit {shape}'s {cfg.vocab_size}")
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    info = {"shape": shape, "parameters": n, "random_weights": True, "seed": seed, "tokenizer_from": str(tokenizer_dir),
            "seconds": round(time.perf_counter() - t0, 1)}
    (tmp / "usl_source.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", required=True, help=", ".join(SHAPES))
    ap.add_argument("--tokenizer", required=True, type=Path, help="a model directory whose tokenizer to copy")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(json.dumps(build(a.shape, a.tokenizer, a.out, a.seed)))


if __name__ == "__main__":
    main()
