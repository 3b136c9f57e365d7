"""Packed prompts (usl.crm.packing) on the CPU: the row layout by hand, packed logits and gradients
equal to the padded ones, the backbones that cannot pack refused, `usl train --set packing=true`
trains and its model scores the same packed or padded, and scripts/bench_gpu.py runs end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crm_fixtures import tiny_backbone, tiny_data
from usl.crm import packing
from usl.crm.dataset import PackedPairwiseCollator, PairwiseCollator, _pad
from usl.crm.span_head import SpanHeadModel, load_backbone

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("packing")
    for arch in ("qwen3", "llama", "gemma3", "bert"):
        tiny_backbone(d / arch, arch=arch)
    tiny_data(d / "train.jsonl", 8)
    return d


def inputs(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(3, 300, (n,), generator=g).tolist() for n in lengths]
    spans = [[[1, 4, 3], [4, 7, 3], [7, 7 + (n - 8) // 2, 50], [7 + (n - 8) // 2, n - 1, 9]] for n in lengths]
    return rows, spans


def test_plan_fills_rows_longest_first():
    assert packing.plan([5, 3, 4, 2], 8) == [[0, 1], [2, 3]]
    assert packing.plan([8, 1, 8], 8) == [[0], [2], [1]]
    with pytest.raises(ValueError, match="9 tokens does not fit a packed row of 8"):
        packing.plan([3, 9], 8)


def test_pack_lays_rows_end_to_end():
    b = packing.pack([[11, 12, 13], [21, 22], [31, 32, 33, 34]], [[[0, 1, 3]], [[1, 2, 2]], [[0, 4, 7]]],
                     pad_id=0, multiple=5)
    assert b["input_ids"].tolist() == [[11, 12, 13, 21, 22, 31, 32, 33, 34, 0]]
    assert b["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3, 0]]
    assert b["documents"].tolist() == [[0, 0, 0, 1, 1, 2, 2, 2, 2, 3]]
    assert b["spans"].tolist() == [[[0, 1, 3]], [[4, 5, 2]], [[5, 9, 7]]]
    assert packing.pack([[1, 2]], None, 0, size=4)["input_ids"].tolist() == [[1, 2, 0, 0]]
    with pytest.raises(ValueError, match="3 tokens do not fit a packed row of 2"):
        packing.pack([[1, 2, 3]], None, 0, size=2)


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_packed_logits_equal_padded_logits(env, arch):
    torch.manual_seed(0)
    m = SpanHeadModel(load_backbone(env / arch), "pairwise").eval()
    rows, spans = inputs([37, 20, 51, 9, 44])
    ids, mask = _pad(rows, 0)
    with torch.no_grad():
        padded = m(input_ids=ids, attention_mask=mask, spans=torch.tensor(spans)).logits
    packing.use_packed_attention(m.backbone)
    packed = torch.stack(packing.packed_logits(m, rows, spans, 0, max_tokens=64, device="cpu"))
    assert len(packing.plan([len(r) for r in rows], 64)) == 3            # several rows, several inputs a row
    assert padded.abs().max() > 1e-3
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-4)
    # a document's tokens must not see the one before it: the same input alone gives the same logit
    alone = packing.packed_logits(m, rows[1:2], spans[1:2], 0, max_tokens=64, device="cpu")[0]
    torch.testing.assert_close(alone, padded[1], atol=1e-5, rtol=1e-4)


def test_packed_gradients_equal_padded_gradients(env):
    """Training reads the same loss and gradients from a packed row as from a padded batch."""
    from usl.crm.trainer import MODEL_INPUTS, order_averaged, pairwise_loss

    rows, spans = inputs([30, 41, 25, 33], seed=1)
    items = [{"input_ids": rows[k], "swapped_input_ids": rows[k + 2], "spans": spans[k],
              "swapped_spans": spans[k + 2], "labels": [1.0, 0.0] if k else [0.0, 1.0]} for k in range(2)]
    grads = []
    for collate, packed in ((PairwiseCollator(0), False), (PackedPairwiseCollator(0, multiple=16), True)):
        torch.manual_seed(0)
        m = SpanHeadModel(load_backbone(env / "qwen3"), "pairwise", dropout=0.0)
        if packed:
            packing.use_packed_attention(m.backbone)
        batch = collate(items)
        loss = pairwise_loss(order_averaged(m(**{k: batch[k] for k in MODEL_INPUTS if k in batch}).logits),
                             batch["labels"])
        loss.backward()
        grads.append((loss.detach(), m.backbone.layers[0].self_attn.q_proj.weight.grad.clone()))
    assert int(PackedPairwiseCollator(0, multiple=16)(items)["tokens"]) == 129
    torch.testing.assert_close(grads[1][0], grads[0][0], atol=1e-6, rtol=1e-5)
    assert grads[0][1].abs().max() > 0
    torch.testing.assert_close(grads[1][1], grads[0][1], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("arch,why", [("bert", "cannot run packed"), ("gemma3", "cannot run packed")])
def test_backbones_that_cannot_pack_are_refused(env, arch, why):
    bb = load_backbone(env / arch)
    assert not packing.can_pack(bb)
    with pytest.raises(ValueError, match=why):
        packing.use_packed_attention(bb)
    assert packing.can_pack(load_backbone(env / "qwen3"))


def test_compiled_layers_give_the_same_logits(env):
    torch.manual_seed(0)
    m = SpanHeadModel(load_backbone(env / "qwen3"), "pairwise").eval()
    packing.use_packed_attention(m.backbone)
    rows, spans = inputs([20, 31])
    before = torch.stack(packing.packed_logits(m, rows, spans, 0, 64, "cpu"))
    packing.compile_layers(m.backbone, backend="eager")         # traced by dynamo; inductor is a GPU's
    after = torch.stack(packing.packed_logits(m, rows, spans, 0, 64, "cpu"))
    torch.testing.assert_close(after, before)


def test_usl_train_packs_and_its_model_scores_the_same_packed_or_padded(env):
    from usl.crm.config import TrainConfig
    from usl.crm.inference import CRMScorer
    from usl.crm.trainer import build_trainer, train

    cfg = TrainConfig(backbone=str(env / "qwen3"), train_file=str(env / "train.jsonl"), dev_file="",
                      output_dir=str(env / "run"), max_steps=3, logging_steps=1, eval_steps=3,
                      effective_batch_size=4, per_device_train_batch_size=2, max_length=512,
                      learning_rate=5e-3, warmup_ratio=0.0, packing=True, pack_multiple=64,
                      compile_layers=True)
    b = build_trainer(cfg, home=str(env / "home"))
    before = {n: p.detach().clone() for n, p in b.trainer.model.named_parameters() if p.requires_grad}
    final = train(cfg, built=b)
    moved = [n for n, p in b.trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert len(moved) > 0.9 * len(before)
    summary = json.loads((env / "run" / "summary.json").read_text())
    assert summary["tokens_per_s"] > 0 and summary["global_step"] == 3
    items = [(["concise"], "explain python list", "a short answer", "a long detailed verbose answer " * 5),
             (["detailed"], "explain", "a long detailed verbose answer " * 3, "short")]
    packed = CRMScorer(final, device="cpu", home=str(env / "home"), packed=True, pack_tokens=256)
    plain = CRMScorer(final, device="cpu", home=str(env / "home"), packed=False)
    assert packed.packed and not plain.packed
    torch.testing.assert_close(torch.tensor(packed.p_a(items)), torch.tensor(plain.p_a(items)), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="packing: true needs loss: pairwise and head: span"):
        build_trainer(TrainConfig(**{**cfg.__dict__, "head": "token", "output_dir": str(env / "tok")}),
                      home=str(env / "home"))


def test_bench_script_measures_every_path_on_a_tiny_shape(tmp_path):
    import gzip
    import random

    r = random.Random(0)
    passes = []
    for _ in range(12):
        lens = [r.randint(3, 8), r.randint(4, 12), r.randint(5, 30), r.randint(5, 30)]
        for order in (lens, lens[:2] + lens[:1:-1]):
            at, rows = 6, []
            for n in order:
                rows.append([at, at + n, n])
                at += n + 3
            passes.append([[at + 2]] + rows)
    data = tmp_path / "lengths.json.gz"
    with gzip.open(data, "wt") as f:
        json.dump({"tokenizer": "test", "passes": len(passes), "mean_tokens": 0.0, "spans": passes}, f)
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "scripts/bench_gpu.py", "--shape", "tiny", "--board", str(data), "--train", str(data),
           "--plain-passes", "8", "--sorted-passes", "8", "--packed-passes", "12", "--pack-tokens", "256",
           "--pack-multiple", "64", "--pairs-per-step", "4", "--steps", "1", "--warmup-steps", "1",
           "--scoring", "plain,sorted,packed", "--runs", "padded-full-ckpt,packed-full,packed-lora", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'scripts'}",
                               "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert rep["packed_vs_padded_max_abs_logit_diff"] < 1e-2             # bf16 weights
    assert [s["name"] for s in rep["scoring"]] == ["plain", "sorted", "packed"]
    assert all(s["passes_per_s"] > 0 and 0 < s["mfu"] < 1 for s in rep["scoring"])
    runs = {t["name"]: t for t in rep["training"]}
    assert set(runs) == {"padded-full-ckpt", "packed-full", "packed-lora"}
    assert all("error" not in t and t["tokens_per_s"] > 0 and t["mfu"] > 0 for t in runs.values()), runs
