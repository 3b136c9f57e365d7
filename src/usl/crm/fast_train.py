"""Train the fast CRM on paper-format preference pairs (CPU, minutes).

Criteria noise is redrawn every epoch from a generator seeded by (seed, epoch): irrelevant criteria
are added (``add_prob``), and extra criteria dropped while at least one remains. Ties are not
trained on. Early stopping watches dev accuracy; the best epoch's weights are kept. Optional
``distill`` pairs (paper JSONL whose ``preference`` may carry a soft target in meta ``p_a``) let
the fast model imitate the full pairwise CRM.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.crm.answer_bank import AnswerBank
from usl.crm.fast_model import FastCRM, FastCRMConfig, as_tensor, split_sign
from usl.crm.static_embed import StaticEmbedder, fit_idf
from usl.data.embed import Embedder
from usl.data.paper_jsonl import read_samples
from usl.types import PreferenceSample

log = logging.getLogger(__name__)


@dataclass
class FastTrainConfig:
    train: list[str] = field(default_factory=list, metadata={"help": "Training JSONL files (paper format)."})
    dev: list[str] = field(default_factory=list, metadata={"help": "Dev JSONL files for early stopping."})
    out: str = field(default="artifacts/fast-crm", metadata={"help": "Output directory for weights + card."})
    epochs: int = field(default=12, metadata={"help": "Maximum epochs."})
    batch_size: int = field(default=64, metadata={"help": "Pairs per step."})
    lr: float = field(default=2e-3, metadata={"help": "AdamW learning rate."})
    weight_decay: float = field(default=1e-4, metadata={"help": "AdamW weight decay."})
    hidden: int = field(default=128, metadata={"help": "Hidden width of the scorer."})
    add_prob: float = field(default=0.3, metadata={"help": "Per-sample probability of adding irrelevant criteria."})
    drop_prob: float = field(default=0.2, metadata={"help": "Per-sample probability of dropping extra criteria."})
    patience: int = field(default=3, metadata={"help": "Epochs without dev improvement before stopping."})
    seed: int = field(default=0, metadata={"help": "Seed for init, shuffling and noise."})


@dataclass
class _Encoded:
    a: np.ndarray            # (n,) answer rows
    b: np.ndarray
    y: np.ndarray            # (n,) 1.0 if A preferred, 0.0 if B, 0.5 tie
    crit: list[list[int]]    # criterion ids per sample
    sign: list[list[float]]
    source: list[str]


def _encode(samples: list[PreferenceSample], bank: AnswerBank, crit_index: dict[str, int]) -> _Encoded:
    a = bank.rows([s.prompt for s in samples], [s.response_a for s in samples])
    b = bank.rows([s.prompt for s in samples], [s.response_b for s in samples])
    y = np.array([{"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[s.preference] for s in samples], np.float32)
    crit, sign = [], []
    for s in samples:
        parts = [split_sign(c) for c in s.criteria]
        crit.append([crit_index[t] for t, _ in parts])
        sign.append([g for _, g in parts])
    return _Encoded(a, b, y, crit, sign, [s.source for s in samples])


def _batch_logits(model: FastCRM, bank: AnswerBank, E: torch.Tensor, enc: _Encoded, idx: np.ndarray,
                  crit: list[list[int]], sign: list[list[float]]) -> torch.Tensor:
    rows, inv = np.unique(np.concatenate([enc.a[idx], enc.b[idx]]), return_inverse=True)
    A = model.answer_repr(as_tensor(bank.r[rows]), as_tensor(bank.feats[rows]), as_tensor(bank.cos_q[rows]))
    n = len(idx)
    flat = [c for cs in crit for c in cs]
    ucrit, cinv = np.unique(np.asarray(flat, dtype=np.int64), return_inverse=True)
    C = model.criteria_repr(E[torch.from_numpy(ucrit)])
    pair = np.repeat(np.arange(n), [len(cs) for cs in crit])
    return model.pair_logits(C, A, torch.from_numpy(inv[:n]), torch.from_numpy(inv[n:]),
                             torch.from_numpy(cinv), torch.tensor([g for gs in sign for g in gs]),
                             torch.from_numpy(pair), n)


def _foreign_pools(enc: _Encoded, n_crit: int) -> dict[str, np.ndarray]:
    """Per source, the criteria never used by that source: "unrelated" criteria for noise."""
    used: dict[str, set[int]] = {}
    for cs, src in zip(enc.crit, enc.source):
        used.setdefault(src, set()).update(cs)
    return {src: np.setdiff1d(np.arange(n_crit), np.fromiter(u, dtype=np.int64)) for src, u in used.items()}


def _noisy(enc: _Encoded, idx: np.ndarray, rng: np.random.Generator, pools: dict[str, np.ndarray],
           cfg: FastTrainConfig):
    crit, sign = [], []
    for i in idx:
        cs, gs = list(enc.crit[i]), list(enc.sign[i])
        if len(cs) > 1 and rng.random() < cfg.drop_prob:
            keep = sorted(rng.choice(len(cs), size=int(rng.integers(1, len(cs))), replace=False))
            cs, gs = [cs[k] for k in keep], [gs[k] for k in keep]
        pool = pools.get(enc.source[i])
        if pool is not None and len(pool) and rng.random() < cfg.add_prob:
            extra = int(rng.integers(1, max(2, len(cs) // 2 + 1) + 1))
            cs += [int(c) for c in rng.choice(pool, size=extra)]
            gs += [1.0] * extra
        crit.append(cs)
        sign.append(gs)
    return crit, sign


def evaluate(model: FastCRM, bank: AnswerBank, E: torch.Tensor, enc: _Encoded) -> dict:
    model.eval()
    with torch.inference_mode():
        idx = np.arange(len(enc.y))
        logits = torch.cat([_batch_logits(model, bank, E, enc, idx[i:i + 2048], enc.crit[i:i + 2048],
                                          enc.sign[i:i + 2048]) for i in range(0, len(idx), 2048)])
    p = logits.numpy()
    mask = enc.y != 0.5
    correct = ((p > 0) == (enc.y > 0.5))[mask]
    by_src: dict[str, list[bool]] = {}
    for s, c in zip(np.asarray(enc.source)[mask], correct):
        by_src.setdefault(s, []).append(bool(c))
    return {"accuracy": float(correct.mean()) if mask.any() else float("nan"),
            "n": int(mask.sum()), "by_source": {k: float(np.mean(v)) for k, v in sorted(by_src.items())}}


def train_fast(cfg: FastTrainConfig, cache_dir: Path) -> dict:
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    train = [s for f in cfg.train for s in read_samples(f)]
    dev = [s for f in cfg.dev for s in read_samples(f)]
    log.info("fast CRM: %d train, %d dev samples", len(train), len(dev))
    t0 = time.time()

    static = StaticEmbedder(cache_dir / "static")
    answers = list(dict.fromkeys(s.response_a for s in train) | dict.fromkeys(s.response_b for s in train))
    static.idf = fit_idf(static.token_ids(answers), static.table.shape[0])
    bank = AnswerBank(static)
    crit_texts = sorted({split_sign(c)[0] for s in train + dev for c in s.criteria})
    crit_index = {t: i for i, t in enumerate(crit_texts)}
    E = torch.from_numpy(Embedder(cache_dir / "embeddings").encode(crit_texts, show_progress=True))
    tr, dv = _encode(train, bank, crit_index), _encode(dev, bank, crit_index)
    log.info("encoded %d answers, %d criteria in %.0f s", len(bank), len(crit_texts), time.time() - t0)

    model = FastCRM(FastCRMConfig(hidden=cfg.hidden), vocab_size=len(static.idf))
    model.idf.copy_(torch.from_numpy(static.idf))
    model.feat_mean.copy_(torch.from_numpy(bank.feats.mean(0)))
    model.feat_std.copy_(torch.from_numpy(bank.feats.std(0) + 1e-4))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    train_idx = np.flatnonzero(tr.y != 0.5)
    pools = _foreign_pools(tr, len(crit_texts))
    steps = cfg.epochs * ((len(train_idx) + cfg.batch_size - 1) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=max(steps, 1), pct_start=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    curve, best, best_state, bad = [], -1.0, None, 0
    for epoch in range(cfg.epochs):
        model.train()
        erng = np.random.default_rng([cfg.seed, epoch])
        order = erng.permutation(train_idx)
        losses = []
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            crit, sign = _noisy(tr, idx, erng, pools, cfg)
            logits = _batch_logits(model, bank, E, tr, idx, crit, sign)
            loss = loss_fn(logits, torch.from_numpy(tr.y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        ev = evaluate(model, bank, E, dv) if len(dv.y) else {"accuracy": float("nan")}
        curve.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)), "dev_accuracy": ev["accuracy"],
                      "dev_by_source": ev.get("by_source", {})})
        log.info("epoch %d: loss %.4f dev acc %.4f %s", epoch + 1, curve[-1]["train_loss"], ev["accuracy"],
                 ev.get("by_source", {}))
        if ev["accuracy"] > best:
            best, bad = ev["accuracy"], 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= cfg.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    report = {"config": asdict(cfg), "curve": curve, "best_dev_accuracy": best, "n_train": len(train),
              "n_dev": len(dev), "seconds": round(time.time() - t0, 1)}
    model.save(cfg.out, extra=report)
    (Path(cfg.out) / "training.json").write_text(json.dumps(report, indent=2))
    return report
