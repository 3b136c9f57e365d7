"""GPU speed of the pairwise span-head CRM at a published shape: scoring and training, with MFU.

Speed does not depend on weight values, so the backbone is a randomly initialised model of the
shape (``random_backbone.SHAPES``) and the inputs are random token ids with the real token lengths
and slot spans of a board and of training pairs (``scripts/board_lengths.py``)::

    python scripts/bench_gpu.py --board board_lengths.json.gz --train train_lengths.json.gz --out bench.json

Scoring, each over its own random subset of the board's passes:
  plain   eager attention, padded batches of 8 in board order (a plain classifier forward)
  sorted  SDPA, batches of 32 sorted by length (``CRMScorer``'s padded path)
  packed  ``usl.crm.packing.packed_logits`` (what ``CRMScorer`` runs on a GPU): rows of
          ``--pack-tokens`` tokens, flex attention within each prompt; ``+compile`` also compiles
          the decoder layers
Training (pairwise loss, both orders, order-averaged, 32 pairs an optimiser step, fused AdamW):
  padded  ``PairwiseCollator`` batches, SDPA, activation checkpointing (the earlier recipe)
  packed  ``PackedPairwiseCollator`` rows (``usl train --set packing=true``), full and LoRA

MFU counts the work the answer needs, over 989 TFLOP/s (H200 dense bf16): 2 FLOPs per weight of
every linear layer per token for a forward pass (the embedding table is a lookup, not counted),
plus causal attention within each prompt, 2 * layers * heads * head_dim * n * (n + 1) for a
prompt of n tokens. Training counts 3x that (full: forward, input and weight gradients) or 2x
linear + 3x attention (LoRA: the frozen weights need no gradient); recomputation is not counted.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import random
import sys
import time
from pathlib import Path

import torch

from random_backbone import QWEN3, SHAPES

PEAK_FLOPS = 989e12
TINY = dict(QWEN3, vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, intermediate_size=128, tie_word_embeddings=True)


def backbone(shape: str, dtype, device: str, attn: str):
    from transformers import AutoModel, Qwen3Config

    cfg = Qwen3Config(**(TINY if shape == "tiny" else SHAPES[shape]))
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModel.from_config(cfg, dtype=dtype, attn_implementation=attn)


class Counter:
    """Useful FLOPs of a shape (module docstring)."""

    def __init__(self, model):
        c = model.config
        self.linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
        self.attn = 2 * c.num_hidden_layers * c.num_attention_heads * c.head_dim

    def forward(self, lengths) -> float:
        return sum(2.0 * self.linear * n + self.attn * n * (n + 1) for n in lengths)

    def train(self, lengths, lora: bool) -> float:
        return sum((4.0 if lora else 6.0) * self.linear * n + 3.0 * self.attn * n * (n + 1) for n in lengths)


def sig(x: float) -> float:
    return float(f"{x:.4g}")


def load_passes(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def rows_of(passes: list, vocab: int, rng: random.Random) -> tuple[list, list]:
    ids = [[rng.randrange(16, vocab) for _ in range(p[0][0])] for p in passes]
    return ids, [p[1:] for p in passes]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_gib(device: str) -> float:
    return round(torch.cuda.max_memory_allocated() / 2**30, 1) if device.startswith("cuda") else 0.0


def reset_peak(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def padded_scoring(model, rows, spans, batch: int, device: str, sort: bool) -> list:
    from usl.crm.dataset import _pad

    order = sorted(range(len(rows)), key=lambda i: -len(rows[i])) if sort else list(range(len(rows)))
    out = [None] * len(rows)
    with torch.inference_mode():
        for k in range(0, len(order), batch):
            idx = order[k:k + batch]
            ids, mask = _pad([rows[i] for i in idx], 0)
            sp = torch.tensor([spans[i] for i in idx], dtype=torch.long, device=device)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), spans=sp).logits.float().cpu()
            for j, i in enumerate(idx):
                out[i] = logits[j]
    return out


def timed(fn, device: str):
    sync(device)
    t = time.perf_counter()
    got = fn()
    sync(device)
    return got, time.perf_counter() - t


def score_row(name: str, rows: list, seconds: float, counter: Counter, device: str, **extra) -> dict:
    n = [len(r) for r in rows]
    return {"name": name, "passes": len(rows), "mean_tokens": round(sum(n) / len(n), 1),
            "seconds": round(seconds, 2), "passes_per_s": round(len(rows) / seconds, 2),
            "tokens_per_s": round(sum(n) / seconds), "mfu": sig(counter.forward(n) / seconds / PEAK_FLOPS),
            "peak_gib": peak_gib(device), **extra}


def bench_scoring(a, report) -> None:
    from usl.crm import packing
    from usl.crm.span_head import SpanHeadModel

    data = load_passes(a.board)
    rng = random.Random(0)
    picks = list(range(len(data["spans"])))
    rng.shuffle(picks)
    sets = {"plain": picks[:a.plain_passes], "sorted": picks[a.plain_passes:a.plain_passes + a.sorted_passes],
            "packed": picks[-a.packed_passes:]}
    model = SpanHeadModel(backbone(a.shape, torch.bfloat16, a.device, "eager"), "pairwise").to(a.device).eval()
    counter = Counter(model.backbone)
    vocab = model.backbone.config.vocab_size
    report["shape"] = {"name": a.shape, "parameters": sum(p.numel() for p in model.backbone.parameters()),
                       "linear_parameters": counter.linear, "board_mean_tokens": data["mean_tokens"],
                       "board_passes": data["passes"], "lengths_tokenizer": data["tokenizer"]}
    rows = {k: rows_of([data["spans"][i] for i in v], vocab, rng) for k, v in sets.items()}

    # the same 16 inputs through the padded and the packed paths: the logits must agree
    check_rows, check_spans = rows["packed"][0][:16], rows["packed"][1][:16]
    model.backbone.set_attn_implementation("sdpa")
    ref = torch.stack(padded_scoring(model, check_rows, check_spans, 16, a.device, True))
    packing.use_packed_attention(model.backbone)
    got = torch.stack(packing.packed_logits(model, check_rows, check_spans, 0, a.pack_tokens, a.device))
    report["packed_vs_padded_max_abs_logit_diff"] = float((ref - got).abs().max())

    for name, attn, batch, sort in (("plain", "eager", 8, False), ("sorted", "sdpa", 32, True)):
        if name not in a.scoring:
            continue
        r, s = rows[name]
        model.backbone.set_attn_implementation(attn)
        padded_scoring(model, r[:batch], s[:batch], batch, a.device, sort)        # warm-up
        reset_peak(a.device)
        _, sec = timed(lambda: padded_scoring(model, r, s, batch, a.device, sort), a.device)
        emit(report, "scoring", score_row(name, r, sec, counter, a.device, batch=batch, attention=attn))

    r, s = rows["packed"]
    packing.use_packed_attention(model.backbone)
    for name in [x for x in ("packed", "packed+compile") if x in a.scoring]:
        if name.endswith("compile"):
            packing.compile_layers(model.backbone, backend=a.compile_backend)
        t0 = time.perf_counter()
        packing.packed_logits(model, r[:64], s[:64], 0, a.pack_tokens, a.device)    # compiles
        warm = time.perf_counter() - t0
        reset_peak(a.device)
        _, sec = timed(lambda: packing.packed_logits(model, r, s, 0, a.pack_tokens, a.device), a.device)
        emit(report, "scoring", score_row(name, r, sec, counter, a.device, pack_tokens=a.pack_tokens,
                                          warmup_s=round(warm, 1)))
    model = None  # frees the GPU memory (the closure above keeps the name, not the model)
    reset_peak(a.device)


def train_items(data: dict, vocab: int, rng: random.Random) -> list[dict]:
    """Training items as ``CRMDataset`` gives them (both orders): passes 2i and 2i+1 are one pair."""
    sp = data["spans"]
    items = []
    for k in range(0, len(sp) - 1, 2):
        (ids, ids2), (s1, s2) = rows_of(sp[k:k + 2], vocab, rng)
        items.append({"input_ids": ids, "swapped_input_ids": ids2, "spans": s1, "swapped_spans": s2,
                      "labels": [1.0, 0.0] if rng.random() < 0.5 else [0.0, 1.0]})
    return items


def train_model(shape: str, finetune: str, device: str, attn: str):
    from peft import LoraConfig, TaskType, get_peft_model

    from usl.crm.span_head import SpanHeadModel
    from usl.crm.trainer import lora_targets

    bb = backbone(shape, torch.float32 if finetune == "full" else torch.bfloat16, device, attn)
    counter = Counter(bb)
    if finetune == "lora":
        bb = get_peft_model(bb, LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=16, lora_alpha=32,
                                           lora_dropout=0.05, target_modules=lora_targets(bb, [])))
    model = SpanHeadModel(bb, "pairwise").to(device)
    for p in model.parameters():            # as usl train: what trains is fp32
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model, counter


def bench_training(a, report, name: str, finetune: str, packed: bool, micro: int, checkpointing: bool,
                   compile_layers: bool = False) -> None:
    from usl.crm import packing
    from usl.crm.dataset import PackedPairwiseCollator, PairwiseCollator
    from usl.crm.trainer import MODEL_INPUTS, order_averaged, pairwise_loss

    data = load_passes(a.train)
    model, counter = train_model(a.shape, finetune, a.device, "sdpa")
    if packed:
        packing.use_packed_attention(model.backbone)
        if compile_layers:
            packing.compile_layers(model.backbone, backend=a.compile_backend)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    rng = random.Random(1)
    items = train_items(data, model.backbone.config.vocab_size, rng)
    rng.shuffle(items)
    collate = PackedPairwiseCollator(0, multiple=a.pack_multiple) if packed else PairwiseCollator(0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                            lr=2e-5 if finetune == "full" else 1e-4, fused=a.device.startswith("cuda"))
    micro = min(micro, a.pairs_per_step)
    accum = max(1, a.pairs_per_step // micro)
    cuda = a.device.startswith("cuda")

    def step(k: int) -> tuple[list[int], float]:
        lengths, total = [], 0.0
        for m in range(accum):
            batch = collate(items[(k * accum + m) * micro:(k * accum + m + 1) * micro])
            lengths += [len(it[key]) for it in items[(k * accum + m) * micro:(k * accum + m + 1) * micro]
                        for key in ("input_ids", "swapped_input_ids")]
            batch = {key: v.to(a.device, non_blocking=True) for key, v in batch.items()}
            with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cuda):
                logits = model(**{key: batch[key] for key in MODEL_INPUTS if key in batch}).logits
                loss = pairwise_loss(order_averaged(logits), batch["labels"]) / accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return lengths, total

    t0 = time.perf_counter()
    try:
        for k in range(a.warmup_steps):
            step(k)
        sync(a.device)
        warm = time.perf_counter() - t0
        reset_peak(a.device)
        lengths, losses = [], []
        sync(a.device)
        t = time.perf_counter()
        for k in range(a.warmup_steps, a.warmup_steps + a.steps):
            n, loss = step(k)
            lengths += n
            losses.append(loss)
        sync(a.device)
        sec = time.perf_counter() - t
        row = {"name": name, "finetune": finetune, "packed": packed, "micro_batch_pairs": micro,
               "pairs_per_step": a.pairs_per_step, "activation_checkpointing": checkpointing,
               "compiled_layers": compile_layers, "steps": a.steps, "seconds": round(sec, 2),
               "tokens_per_s": round(sum(lengths) / sec), "mean_tokens": round(sum(lengths) / len(lengths), 1),
               "mfu": sig(counter.train(lengths, finetune == "lora") / sec / PEAK_FLOPS),
               "peak_gib": peak_gib(a.device), "warmup_s": round(warm, 1),
               "loss_first_last": [round(losses[0], 4), round(losses[-1], 4)]}
    except Exception as e:            # one run's failure (out of memory, a compile error) ends that run only
        row = {"name": name, "finetune": finetune, "error": f"{type(e).__name__}: {str(e)[:300]}",
               "micro_batch_pairs": micro}
    emit(report, "training", row)
    model = opt = None  # frees the GPU memory
    reset_peak(a.device)


def emit(report: dict, section: str, row: dict) -> None:
    report.setdefault(section, []).append(row)
    print(json.dumps({section: row}), flush=True)
    if report.get("_out"):
        Path(report["_out"]).write_text(json.dumps({k: v for k, v in report.items() if k != "_out"}, indent=2))


TRAIN_RUNS = {  # name: (finetune, packed, micro-batch pairs, activation checkpointing, compiled layers)
    "padded-full-ckpt": ("full", False, 8, True, False),
    "packed-full": ("full", True, 4, False, False),
    "packed-full-ckpt": ("full", True, 8, True, False),
    "packed-lora": ("lora", True, 8, False, False),
    "padded-lora": ("lora", False, 8, False, False),
    "packed-full+compile": ("full", True, 4, False, True),
    "packed-lora+compile": ("lora", True, 8, False, True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen3-4b", help=f"tiny or one of {', '.join(SHAPES)}")
    ap.add_argument("--board", type=Path, help="scripts/board_lengths.py output for the board (scoring)")
    ap.add_argument("--train", type=Path, help="scripts/board_lengths.py --train-file output (training)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--plain-passes", type=int, default=160)
    ap.add_argument("--sorted-passes", type=int, default=640)
    ap.add_argument("--packed-passes", type=int, default=4000)
    ap.add_argument("--pack-tokens", type=int, default=16384)
    ap.add_argument("--pack-multiple", type=int, default=1024)
    ap.add_argument("--pairs-per-step", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--scoring", default="plain,sorted,packed,packed+compile",
                    help="scoring runs, comma-separated: plain, sorted, packed, packed+compile")
    ap.add_argument("--runs", default="padded-full-ckpt,packed-full,packed-lora",
                    help=f"training runs, comma-separated: {', '.join(TRAIN_RUNS)}")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the +compile runs "
                    "(eager: trace only, for tests on the CPU)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    a.scoring = a.scoring.split(",")
    report: dict = {"_out": str(a.out) if a.out else None, "device": torch.cuda.get_device_name(0)
                    if a.device.startswith("cuda") else "cpu", "torch": torch.__version__,
                    "peak_tflops": PEAK_FLOPS / 1e12, "argv": sys.argv[1:]}
    if a.board:
        bench_scoring(a, report)
    for name in [r for r in a.runs.split(",") if r] if a.train else []:
        bench_training(a, report, name, *TRAIN_RUNS[name])


if __name__ == "__main__":
    main()
