"""A few training steps on a tiny random Qwen3 (2 layers, hidden 64; Llama, Gemma-3 and BERT too):
parameters move, losses are finite, runs resume, the run directory is complete, two processes train
one model, and the trained model loads as a `crm:` judge."""

import json
import math

import pytest

from crm_fixtures import sample_dict, tiny_backbone, tiny_data, write_jsonl
from usl.crm.config import TrainConfig
from usl.crm.trainer import build_trainer, train


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("crm")
    tiny_backbone(d / "bb")
    tiny_data(d / "train.jsonl", 8)
    tiny_data(d / "dev.jsonl", 4)
    return d


def cfg(env, name, **kw):
    base = dict(backbone=str(env / "bb"), train_file=str(env / "train.jsonl"), dev_file="",
                output_dir=str(env / name), max_steps=2, logging_steps=1, eval_steps=2,
                effective_batch_size=4, per_device_train_batch_size=2, max_length=512,
                learning_rate=5e-3, warmup_ratio=0.0, data_noise="random", data_direction="random")
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("head", ["span", "token"])
@pytest.mark.parametrize("loss,finetune", [("pairwise", "lora"), ("pointwise", "lora"),
                                           ("pairwise", "full"), ("pointwise", "full")])
def test_steps_move_parameters(env, loss, finetune, head):
    # 3 steps: with a zero-initialised head and LoRA B = 0, lora_A first gets a gradient at step 3
    b = build_trainer(cfg(env, f"{loss}-{finetune}-{head}", loss=loss, finetune=finetune, max_steps=3, head=head,
                          group_by_length=finetune == "full"), home=str(env / "home"))
    model = b.trainer.model
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    b.trainer.train()
    after = dict(model.named_parameters())
    trainable = [n for n, p in after.items() if p.requires_grad]
    changed = [n for n in trainable if not (after[n].detach() == before[n]).all()]
    assert len(trainable) > 0 and len(changed) > 0.9 * len(trainable), sorted(set(trainable) - set(changed))
    if finetune == "lora":
        head_name = "score" if head == "token" else "head."
        assert any("lora_B" in n for n in changed) and any(head_name in n for n in changed)
        frozen = [n for n, p in after.items() if not p.requires_grad]
        assert frozen and all((after[n].detach() == before[n]).all() for n in frozen)
    losses = [h["loss"] for h in b.trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert b.trainer.state.global_step == 3


@pytest.fixture(scope="module")
def backbones(tmp_path_factory):
    d = tmp_path_factory.mktemp("archs")
    return {a: tiny_backbone(d / a, arch=a) for a in ("llama", "gemma3", "bert")}


@pytest.mark.parametrize("head", ["span", "token"])
@pytest.mark.parametrize("arch", ["llama", "gemma3", "bert"])
def test_other_backbone_families_train_and_judge(env, backbones, arch, head):
    """Any Hugging Face backbone by path: SmolLM2's Llama, Gemma-3's text model and a BERT-style
    encoder (all-MiniLM-L6-v2's family) train with either head under LoRA, and the run loads as a
    judge whose mirrored request gets the mirrored probability."""
    c = cfg(env, f"arch-{arch}-{head}", backbone=str(backbones[arch]), head=head, max_steps=3,
            dev_file=str(env / "dev.jsonl"))
    final = train(c, home=str(env / "home"))
    losses = [json.loads(x)["loss"] for x in (final.parent / "metrics.jsonl").read_text().splitlines()
              if '"loss"' in x]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    from usl.judges.base import JudgeRequest
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    j = load_judge(f"crm:{final.parent}", home=str(env / "home"), device="cpu")
    req = JudgeRequest(Criteria(("concise",)), "q", "short", "a long answer " * 30)
    (v,) = j.judge([req])
    (m,) = j.judge([JudgeRequest(req.criteria, req.query, req.response_b, req.response_a)])
    assert 0.0 < v.p_a < 1.0 and abs(v.p_a + m.p_a - 1.0) < 1e-5


def test_run_dir_truncation_and_judge(env):
    long_rows = [sample_dict(i, pref="model_a" if i % 2 == 0 else "model_b", long=60) for i in range(8)]
    write_jsonl(env / "long.jsonl", long_rows)
    c = cfg(env, "full_run", train_file=str(env / "long.jsonl"), dev_file=str(env / "dev.jsonl"),
            max_length=400, min_response_tokens=32, max_steps=4)
    final = train(c, home=str(env / "home"))
    run = final.parent
    assert {"config.yaml", "metrics.jsonl", "truncation.json", "summary.json"} <= {p.name for p in run.iterdir()}
    assert {"crm.json", "adapter_model.safetensors", "adapter_config.json"} <= {p.name for p in final.iterdir()}
    trunc = json.loads((run / "truncation.json").read_text())
    # 16 pairs, each shown in both orders (pairwise_order: both): every input kept, all cut
    assert trunc["train"]["inputs"] == 32 and trunc["train"]["truncated"] == 32
    cut = trunc["train"]["parts_cut"]       # only the long answer is cut, wherever it was placed
    assert cut["response_a"] + cut["response_b"] == 32 and trunc["dev"]["truncated"] == 0
    curve = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("pairs_per_s" in r for r in curve) and any("eval_loss" in r for r in curve)

    from usl.judges.base import JudgeRequest
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    j = load_judge(f"crm:{run}", home=str(env / "home"), device="cpu")
    reqs = [JudgeRequest(Criteria(("concise",)), "q", "short", "a long answer " * 200),
            JudgeRequest(Criteria(("verbose",)), "q", "a long answer", "short")]
    v = j.judge(reqs)
    assert len(v) == 2 and all(0.0 <= x.p_a <= 1.0 and x.p_tie == 0.0 for x in v)
    # order-averaged pairwise head: the mirrored request gets exactly the mirrored probability
    mirrored = j.judge([JudgeRequest(r.criteria, r.query, r.response_b, r.response_a) for r in reqs])
    assert all(abs(x.p_a + y.p_a - 1.0) < 1e-5 for x, y in zip(v, mirrored))
    assert j.identity == load_judge(f"crm:{final}", home=str(env / "home")).identity
    assert len(j.version) == 16 and j.cacheable
    with pytest.raises(FileNotFoundError, match="no crm.json"):
        load_judge(f"crm:{env}")
    # an incomplete copy of a span-head model names what is missing
    import shutil

    broken = env / "broken_copy"
    shutil.copytree(final, broken)
    (broken / "span_head.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="span_head"):
        load_judge(f"crm:{broken}", home=str(env / "home"), device="cpu").judge(reqs)


def test_resume_continues_where_it_stopped(env):
    from transformers import TrainerCallback

    class StopAt2(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 2:
                control.should_training_stop = True

    def run(name, resume=False, stop=False):
        c = cfg(env, name, max_steps=4, eval_steps=2, resume=resume, learning_rate=1e-2)
        b = build_trainer(c, home=str(env / "home"))
        if stop:
            b.trainer.add_callback(StopAt2())
        b.trainer.train(resume_from_checkpoint=True if resume else None)
        return [round(h["loss"], 5) for h in b.trainer.state.log_history if "loss" in h], b

    full, _ = run("uninterrupted")
    first, _ = run("interrupted", stop=True)
    assert (env / "interrupted" / "checkpoints" / "checkpoint-2").is_dir()
    rest, b = run("interrupted", resume=True)
    assert b.trainer.state.global_step == 4
    assert len(full) == 4 and first == full[:2]
    assert rest[-2:] == full[2:]            # same data order, same per-epoch noise, same weights
    # the span head's checkpoint holds what trains (adapter and head), not the frozen backbone
    from safetensors import safe_open

    with safe_open(str(env / "interrupted" / "checkpoints" / "checkpoint-2" / "model.safetensors"), "pt") as f:
        saved = set(f.keys())
    named = dict(b.trainer.model.named_parameters())
    assert saved == {n for n, p in named.items() if p.requires_grad} and len(saved) < len(named)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_span_head_trains_with_activation_checkpointing(env, finetune):
    """`gradient_checkpointing: true` (what a 4B backbone needs for full fine-tuning) reaches the
    backbone's layers through the span head, and recomputing activations changes no loss."""
    def losses(name, gc):
        b = build_trainer(cfg(env, name, finetune=finetune, gradient_checkpointing=gc, max_steps=2),
                          home=str(env / "home"))
        b.trainer.train()
        bb = b.trainer.model.backbone
        on = getattr(bb, "is_activation_checkpointing", None)
        on = bb.is_gradient_checkpointing if on is None else on
        return [h["loss"] for h in b.trainer.state.log_history if "loss" in h], on

    plain, off = losses(f"nogc-{finetune}", False)
    recomputed, on = losses(f"gc-{finetune}", True)
    assert on and not off
    assert len(plain) == 2 and recomputed == pytest.approx(plain, abs=1e-5)


def test_ties_soft_or_excluded(env):
    rows = [sample_dict(i, pref=p) for i, p in enumerate(["model_a", "tie", "model_b", "tie"])]
    write_jsonl(env / "ties.jsonl", rows)
    soft = build_trainer(cfg(env, "ties_soft", train_file=str(env / "ties.jsonl")), home=str(env / "home"))
    assert len(soft.train_ds) == 4
    labels = sorted(tuple(soft.train_ds[i]["labels"]) for i in range(4))
    assert labels.count((0.5, 0.5)) == 2
    excl = build_trainer(cfg(env, "ties_excl", train_file=str(env / "ties.jsonl"), tie_policy="exclude",
                             loss="pointwise"), home=str(env / "home"))
    assert len(excl.train_ds) == 2 and excl.train_ds.excluded_ties == 2


def test_positions_are_balanced_per_epoch(env):
    b = build_trainer(cfg(env, "positions", data_noise="none", data_direction="original"), home=str(env / "home"))
    ds = b.train_ds
    firsts = []
    for epoch in range(4):
        ds.set_epoch(epoch)
        firsts.append([ds[i]["labels"][0] for i in range(len(ds))])
    # sample i's winner is A or B depending on the draw, and the draws change between epochs
    flat = [x for row in firsts for x in row]
    assert 0.25 < sum(flat) / len(flat) < 0.75 and firsts[0] != firsts[1]


def test_finished_run_is_not_overwritten(env):
    with pytest.raises(ValueError, match="already holds a finished run"):
        build_trainer(cfg(env, "full_run"), home=str(env / "home"))


def test_order_averaged_logits_are_antisymmetric_and_unstick_a_zero_head():
    import torch

    from usl.crm.trainer import order_averaged, pairwise_loss

    ab, ba = torch.randn(3, 2), torch.randn(3, 2)
    z = order_averaged(torch.cat([ab, ba]))
    z_mirror = order_averaged(torch.cat([ba, ab]))
    assert torch.allclose(z, z_mirror.flip(-1))
    # A zero head over order-dependent features: the single-order loss gives the head a gradient
    # only through label/feature correlation; the order-averaged one through h(A,B) - h(B,A).
    h_ab, h_ba = torch.randn(4, 8), torch.randn(4, 8)
    w = torch.zeros(2, 8, requires_grad=True)
    y = torch.tensor([[1.0, 0.0]] * 4)
    pairwise_loss(order_averaged(torch.cat([h_ab, h_ba]) @ w.T), y).backward()
    expected = -0.25 * (h_ab - h_ba).mean(0)         # dL/dz = (p - y) = -/+0.5, z = (w h_ab + flip(w h_ba)) / 2
    assert torch.allclose(w.grad[0], expected, atol=1e-6) and torch.allclose(w.grad[1], -expected, atol=1e-6)


@pytest.mark.parametrize("head", ["span", "token"])
def test_head_lr_puts_the_head_in_its_own_param_group(env, head):
    b = build_trainer(cfg(env, f"headlr-{head}", loss="pairwise", finetune="full", head=head, learning_rate=1e-5,
                          head_lr=1e-3), home=str(env / "home"))
    opt = b.trainer.create_optimizer()
    by_lr: dict[float, set] = {}
    ids = {id(p): n for n, p in b.trainer.model.named_parameters()}
    for g in opt.param_groups:
        by_lr.setdefault(g["lr"], set()).update(ids[id(p)] for p in g["params"])
    assert set(by_lr) == {1e-5, 1e-3}
    head_name = "score." if head == "token" else "head."
    assert by_lr[1e-3] and all(n.startswith(head_name) for n in by_lr[1e-3])
    assert not any(n.startswith(head_name) for n in by_lr[1e-5])


def test_span_head_reads_untruncated_answer_lengths():
    """Two answers cut to the same tokens but of different original length get different scores,
    and the length term enters as a product with the criteria vector (zero criteria: no effect)."""
    from types import SimpleNamespace

    import torch

    from usl.crm.span_head import SpanHeadModel

    class Backbone(torch.nn.Module):
        config = SimpleNamespace(hidden_size=4)

        def forward(self, input_ids, attention_mask):
            return SimpleNamespace(last_hidden_state=torch.ones(input_ids.shape[0], input_ids.shape[1], 4))

    torch.manual_seed(0)
    m = SpanHeadModel(Backbone(), "pairwise", hidden=8, dropout=0.0).eval()
    ids = torch.zeros(2, 12, dtype=torch.long)
    spans = torch.tensor([[[0, 2, 2], [2, 4, 2], [4, 8, 4], [8, 12, 4]],
                          [[0, 2, 2], [2, 4, 2], [4, 8, 400], [8, 12, 4]]])   # A was 400 tokens before the cut
    s = m(ids, torch.ones_like(ids), spans).logits
    assert not torch.allclose(s[0], s[1])
    assert torch.allclose(m(ids, torch.ones_like(ids), spans[:, :, :2]).logits[0], s[0])   # 2 columns: no cut
    old = SpanHeadModel(Backbone(), "pairwise", hidden=8, length_features=False)
    assert old.head[1].in_features == 12 and m.head[1].in_features == 16


def _two_processes(env, run, *sets):
    """`usl.crm train` on the tiny model in two processes over gloo, as torchrun starts it on two GPUs."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "usl.crm", "--home", str(env / "home"), "train", "--config", "configs/crm_tiny_test.yaml",
           "--set", f"backbone={env / 'bb'}", "--set", f"train_file={env / 'train.jsonl'}",
           "--set", f"dev_file={env / 'dev.jsonl'}", "--set", f"output_dir={run}"]
    for kv in sets:
        cmd += ["--set", kv]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("head", ["span", "token"])
def test_two_processes_train_one_model_as_on_two_gpus(env, head):
    """`torchrun --nproc_per_node 2` is how a run spreads over two GPUs (DDP through the Trainer's
    accelerate); here the two processes share the CPU over gloo (ACCELERATE_USE_CPU). They split the
    effective batch (an epoch of the 8 pairs in 2 steps of 4, not 4), the run directory is written once,
    and the reports count the inputs of both processes. The span head once failed here: its output
    held no tensor DDP could find, so every parameter was marked ready before the backward pass."""
    run = env / f"ddp-{head}"
    proc = _two_processes(env, run, "max_steps=4", f"head={head}")
    assert proc.stdout.splitlines().count(str(run / "final")) == 1     # printed by the first process only
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == 4
    curve = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in curve if "loss" in r]
    assert steps == [1, 2, 3, 4] and [r["epoch"] for r in curve if "loss" in r] == [0.5, 1.0, 1.5, 2.0]
    trunc = json.loads((run / "truncation.json").read_text())
    assert trunc["train"]["inputs"] == 32          # 8 pairs in both orders over 2 epochs, from both processes
    assert proc.stderr.count("done in") == 1                   # one log of the run
    from usl.judges.base import JudgeRequest
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    v = load_judge(f"crm:{run}", home=str(env / "home"), device="cpu").judge(
        [JudgeRequest(Criteria(("concise",)), "q", "short", "a long answer " * 20)])
    assert len(v) == 1 and 0.0 < v[0].p_a < 1.0


def test_two_processes_stop_together_at_the_time_limit(env):
    """`max_train_minutes` is decided for all processes at once (one that stopped alone would leave
    the other waiting in its next all-reduce): the run ends early, evaluated and saved. The test runs
    that agreement; it cannot force the two clocks to disagree."""
    run = env / "ddp-timelimit"
    _two_processes(env, run, "max_steps=200", "max_train_minutes=0.001")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and 1 <= summary["global_step"] < 200
    assert (run / "final" / "crm.json").is_file()


def test_two_processes_train_packed_rows(env):
    """`usl train --set packing=true` under torchrun: each process packs its shard's pairs into one
    row a step (usl.crm.packing), DDP averages the gradients, the run is counted and saved once."""
    run = env / "ddp-packed"
    proc = _two_processes(env, run, "max_steps=2", "packing=true", "pack_multiple=64")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == 2 and summary["tokens_per_s"] > 0
    curve = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in curve if "loss" in r] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in curve if "loss" in r)
    assert json.loads((run / "final" / "crm.json").read_text())["train_config"]["packing"] is True
    assert proc.stderr.count("done in") == 1
