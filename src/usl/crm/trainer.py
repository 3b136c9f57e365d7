"""Train a customizable reward model with the Hugging Face ``Trainer`` (accelerate underneath).

The Trainer gives us multi-GPU (``accelerate launch``), checkpoints, resume, periodic evaluation
and early stopping; we add the two losses, the per-epoch data views and the run directory::

    <output_dir>/config.yaml        the TrainConfig that made the run
    <output_dir>/metrics.jsonl      the training curve (loss, lr, dev loss/accuracy, pairs/s, tokens/s)
    <output_dir>/truncation.json    how many inputs were cut and where (train and dev)
    <output_dir>/summary.json       final dev metrics, throughput, timing, versions, git commit
    <output_dir>/checkpoints/       Trainer checkpoints (resume with resume=true)
    <output_dir>/final/             adapter + head (LoRA) or full model, tokenizer, crm.json

Losses (``logits`` in fp32):

* pairwise: ``-(t * log_softmax(logits)).sum(-1)`` with ``t`` = [1,0], [0,1] or [.5,.5] (tie);
* pointwise: ``-(t*logsigmoid(r_c - r_r) + (1-t)*logsigmoid(r_r - r_c))``, ``t`` = 1 or .5 (tie):
  the Bradley-Terry loss ``-logsigmoid(r_chosen - r_rejected)`` when ``t = 1``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from usl.crm.config import TrainConfig
from usl.crm.dataset import CRMDataset, PackedPairwiseCollator, PairwiseCollator, PointwiseCollator
from usl.crm.formatting import PromptFormatter
from usl.data.backbone import load_classifier, load_tokenizer, resolve_backbone, weights_sha256
from usl.data.paper_jsonl import read_samples

log = logging.getLogger(__name__)

CRM_FORMAT = "usl-crm/1"
# what a batch hands the model: padded (input_ids, attention_mask[, spans]) or packed
# (input_ids, position_ids, documents, spans; usl.crm.packing)
MODEL_INPUTS = ("input_ids", "attention_mask", "spans", "position_ids", "documents")


# ---------------------------------------------------------------------------------------------
def pairwise_loss(logits, targets):
    import torch.nn.functional as F

    return -(targets * F.log_softmax(logits.float(), dim=-1)).sum(-1).mean()


def order_averaged(logits):
    """``[2B, 2]`` logits (rows B.. show the pair swapped) -> ``[B, 2]`` for the A-first order.

    Swapping the pair swaps the classes, so the swapped row's logits are flipped before averaging;
    the result is antisymmetric: the same pair shown the other way round gets the mirrored logits.
    """
    b = logits.shape[0] // 2
    return (logits[:b] + logits[b:].flip(-1)) / 2


def pointwise_loss(r_chosen, r_rejected, targets):
    import torch.nn.functional as F

    d = (r_chosen - r_rejected).float()
    return -(targets * F.logsigmoid(d) + (1 - targets) * F.logsigmoid(-d)).mean()


def _make_trainer_class():
    from transformers import Trainer

    class CRMTrainer(Trainer):
        """``Trainer`` with the CRM losses. ``loss_kind`` is "pairwise" or "pointwise"."""

        def __init__(self, *args, loss_kind: str, group_by_length: bool = False, head_lr: float = 0.0,
                     head_names: tuple[str, ...] = (), **kwargs):
            super().__init__(*args, **kwargs)
            self.head_lr, self.head_names = head_lr, set(head_names)
            self.loss_kind = loss_kind
            self.group_by_length = group_by_length
            self.tokens_seen = 0
            # our loss is a per-batch mean: let the Trainer divide by the accumulation steps
            self.model_accepts_loss_kwargs = False

        def create_optimizer(self, model=None):
            """The Trainer's optimizer, with the head's parameters at ``head_lr`` when it is set."""
            if self.head_lr > 0 and self.optimizer is None:
                opt_model = self.model if model is None else model
                decay = set(self.get_decay_parameter_names(opt_model))
                groups: dict[tuple[bool, bool], list] = {}
                for n, p in opt_model.named_parameters():
                    if p.requires_grad:
                        groups.setdefault((bool(self.head_names & set(n.split("."))), n in decay), []).append(p)
                cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, opt_model)
                self.optimizer = cls([{"params": ps, "weight_decay": self.args.weight_decay if d else 0.0,
                                       **({"lr": self.head_lr} if h else {})} for (h, d), ps in groups.items()],
                                     **kwargs)
            return super().create_optimizer(model)

        def _save(self, output_dir=None, state_dict=None):
            """A checkpoint of a model the Trainer cannot ``save_pretrained`` (the span head) holds only
            what trains when the backbone is frozen (LoRA): resuming reads the backbone from its
            directory again. At 4B parameters that is 8 GB less a checkpoint."""
            from transformers import PreTrainedModel

            model = self.accelerator.unwrap_model(self.model)
            if state_dict is None and not isinstance(model, PreTrainedModel) and not hasattr(model, "peft_config"):
                trains = {n for n, p in model.named_parameters() if p.requires_grad}
                full = model.state_dict()
                if len(trains) < len(full):
                    state_dict = {k: v for k, v in full.items() if k in trains}
            super()._save(output_dir, state_dict)

        def _issue_warnings_after_load(self, load_result):
            """Frozen weights are not in such a checkpoint by design: only other missing keys are news."""
            frozen = {n for n, p in self.model.named_parameters() if not p.requires_grad}
            load_result.missing_keys[:] = [k for k in load_result.missing_keys if k not in frozen]
            super()._issue_warnings_after_load(load_result)

        def _get_train_sampler(self, train_dataset=None):
            if not self.group_by_length:
                return super()._get_train_sampler(train_dataset) if train_dataset is not None \
                    else super()._get_train_sampler()
            from transformers.trainer_pt_utils import LengthGroupedSampler

            ds = train_dataset if train_dataset is not None else self.train_dataset
            return LengthGroupedSampler(self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                        lengths=ds.lengths())

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            targets = inputs["labels"]
            if model.training:
                self.tokens_seen += int(inputs["tokens"] if "tokens" in inputs else inputs["attention_mask"].sum())
            logits = model(**{k: inputs[k] for k in MODEL_INPUTS if k in inputs}).logits
            if self.loss_kind == "pairwise":
                if logits.shape[0] == 2 * targets.shape[0]:       # both orders: average them
                    logits = order_averaged(logits)
                loss = pairwise_loss(logits, targets)
                out = logits.float()
            else:
                r = logits.squeeze(-1).float()
                b = targets.shape[0]
                loss = pointwise_loss(r[:b], r[b:], targets)
                out = r.view(2, b).t()                  # [B, 2]: (r_chosen, r_rejected)
            return (loss, {"logits": out}) if return_outputs else loss

    return CRMTrainer


def dev_metrics(eval_pred) -> dict:
    """Accuracy on non-tie dev inputs. Pairwise: argmax vs target; pointwise: r_chosen > r_rejected."""
    import numpy as np

    logits, labels = eval_pred.predictions, eval_pred.label_ids
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    if labels.ndim == 2:                                 # pairwise targets [N, 2]
        keep = labels[:, 0] != 0.5
        correct = logits[keep].argmax(-1) == labels[keep].argmax(-1)
    else:                                                # pointwise targets [N]
        keep = labels != 0.5
        correct = logits[keep, 0] > logits[keep, 1]
    return {"accuracy": float(correct.mean()) if correct.size else float("nan"), "n_non_tie": int(keep.sum())}


def _callbacks(run_dir: Path, train_ds, cfg: TrainConfig, trainer_ref: dict):
    from transformers import TrainerCallback

    class EpochViews(TrainerCallback):
        """Tell the dataset which epoch it is, so noise/direction/positions are redrawn per epoch."""

        def on_epoch_begin(self, args, state, control, **kw):
            train_ds.set_epoch(math.floor((state.epoch or 0.0) + 1e-6))

    class MetricsFile(TrainerCallback):
        """Append every log record to metrics.jsonl, with training throughput since the last one."""

        def __init__(self):
            self.t = self.step = self.tokens = None

        def on_train_begin(self, args, state, control, **kw):
            self.t, self.step, self.tokens = time.perf_counter(), state.global_step, 0

        def on_log(self, args, state, control, logs=None, **kw):
            rec = {"step": state.global_step, "epoch": round(state.epoch or 0.0, 4), **(logs or {})}
            tr = trainer_ref.get("trainer")
            if "loss" in rec and self.t is not None and tr is not None:
                dt = time.perf_counter() - self.t
                dsteps = state.global_step - self.step
                if dt > 0 and dsteps > 0:
                    pairs = dsteps * args.per_device_train_batch_size * args.gradient_accumulation_steps \
                        * args.world_size
                    rec["pairs_per_s"] = round(pairs / dt, 3)
                    rec["tokens_per_s"] = round((tr.tokens_seen - self.tokens) * args.world_size / dt, 1)
                self.t, self.step, self.tokens = time.perf_counter(), state.global_step, tr.tokens_seen
                log.info("step %d loss %.4f %.2f pairs/s %.0f tok/s", state.global_step, rec["loss"],
                         rec.get("pairs_per_s", 0.0), rec.get("tokens_per_s", 0.0))
            if state.is_world_process_zero:
                with open(run_dir / "metrics.jsonl", "a") as f:
                    f.write(json.dumps(rec) + "\n")

    class TimeLimit(TrainerCallback):
        """Stop after ``max_train_minutes``, evaluating and saving first so the best model is kept."""

        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if cfg.max_train_minutes <= 0:
                return
            over = time.perf_counter() - self.t0 > 60 * cfg.max_train_minutes
            if args.world_size > 1:             # every process stops at the same step, or the rest hang
                over = _any_process(over, args.device)
            if over:
                log.warning("time limit of %.1f min reached at step %d: stopping", cfg.max_train_minutes,
                            state.global_step)
                control.should_training_stop = True
                control.should_evaluate = args.eval_strategy != "no"
                control.should_save = True

    return [EpochViews(), MetricsFile(), TimeLimit()]


# ---------------------------------------------------------------------------------------------
def lora_targets(model, head_modules: list[str]) -> list[str]:
    """Leaf names of every ``nn.Linear`` outside the head, e.g. ``["down_proj", "k_proj", ...]``."""
    import torch.nn as nn

    names = set()
    for full, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and full.split(".")[0] not in head_modules:
            names.add(full.split(".")[-1])
    return sorted(names)


def build_model(cfg: TrainConfig, model_dir: Path, tokenizer):
    """The classifier (num_labels 2 pairwise, 1 pointwise), wrapped in LoRA when asked."""
    import torch

    dtype = cfg.base_dtype
    if dtype == "auto":
        dtype = "bfloat16" if cfg.finetune == "lora" and _precision(cfg) == "bf16" else "float32"
    if cfg.finetune == "full" and dtype != "float32":
        raise ValueError("full fine-tuning keeps fp32 master weights: use base_dtype float32 or auto")
    if cfg.head == "span":
        return _build_span_model(cfg, model_dir, getattr(torch, dtype))
    model = load_classifier(model_dir, 2 if cfg.loss == "pairwise" else 1, tokenizer, dtype=getattr(torch, dtype))
    if cfg.head_init == "zero":
        with torch.no_grad():
            for h in cfg.head_modules:
                for p in getattr(model, h).parameters() if hasattr(model, h) else ():
                    p.zero_()
    if cfg.finetune == "full":
        return model
    from peft import LoraConfig, TaskType, get_peft_model

    heads = [h for h in cfg.head_modules if hasattr(model, h)]
    if not heads:
        raise ValueError(f"none of head_modules={cfg.head_modules} exists on {type(model).__name__}")
    targets = cfg.lora_target_modules or lora_targets(model, heads)
    lcfg = LoraConfig(task_type=TaskType.SEQ_CLS, r=cfg.lora_r, lora_alpha=cfg.lora_alpha,
                      lora_dropout=cfg.lora_dropout, target_modules=list(targets), modules_to_save=list(heads))
    model = get_peft_model(model, lcfg)
    n_train, n_all = _trainable_in_fp32(model)
    log.info("LoRA r=%d on %s + heads %s: %d / %d parameters trainable", cfg.lora_r, targets, heads,
             n_train, n_all)
    return model


def _trainable_in_fp32(model) -> tuple[int, int]:
    """Adapters and heads train in fp32 even over a bf16 base; returns (trainable, all) counts."""
    import torch

    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return sum(p.numel() for p in model.parameters() if p.requires_grad), sum(p.numel() for p in model.parameters())


def _build_span_model(cfg: TrainConfig, model_dir: Path, dtype):
    from usl.crm.span_head import SpanHeadModel, load_backbone

    backbone = load_backbone(model_dir, dtype=dtype)
    if cfg.finetune == "lora":
        from peft import LoraConfig, TaskType, get_peft_model

        targets = cfg.lora_target_modules or lora_targets(backbone, [])
        backbone = get_peft_model(backbone, LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=cfg.lora_r,
                                                       lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                                       target_modules=list(targets)))
    model = SpanHeadModel(backbone, cfg.loss)
    n_train, n_all = _trainable_in_fp32(model)
    log.info("span head over %s (%s): %d / %d parameters trainable", model_dir, cfg.finetune, n_train, n_all)
    return model


def _precision(cfg: TrainConfig) -> str:
    import torch

    if cfg.precision != "auto":
        return cfg.precision
    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"


def training_args(cfg: TrainConfig, run_dir: Path, has_dev: bool, world_size: int):
    from transformers import TrainingArguments

    per_step = cfg.per_device_train_batch_size * world_size
    accum = max(1, round(cfg.effective_batch_size / per_step))
    if accum * per_step != cfg.effective_batch_size:
        log.warning("effective batch %d is not a multiple of %d pairs per step; using %d",
                    cfg.effective_batch_size, per_step, accum * per_step)
    prec = _precision(cfg)
    # transformers 5.x takes a warmup *ratio* as a float warmup_steps; older 5.x still has warmup_ratio
    import inspect

    warmup = {"warmup_ratio": cfg.warmup_ratio} if "warmup_ratio" in inspect.signature(TrainingArguments).parameters \
        else {"warmup_steps": cfg.warmup_ratio}
    return TrainingArguments(
        output_dir=str(run_dir / "checkpoints"),
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        per_device_eval_batch_size=cfg.per_device_eval_batch_size,
        gradient_accumulation_steps=accum,
        learning_rate=cfg.learning_rate, num_train_epochs=cfg.num_train_epochs, max_steps=cfg.max_steps,
        lr_scheduler_type=cfg.lr_scheduler_type, **warmup,
        weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm,
        bf16=prec == "bf16", fp16=prec == "fp16",
        eval_strategy="steps" if has_dev else "no", eval_steps=cfg.eval_steps,
        save_strategy="steps", save_steps=cfg.eval_steps, save_total_limit=cfg.save_total_limit,
        load_best_model_at_end=has_dev, metric_for_best_model="eval_loss" if has_dev else None,
        greater_is_better=False,
        logging_steps=cfg.logging_steps, logging_first_step=True, report_to="none",
        remove_unused_columns=False, label_names=["labels"], seed=cfg.seed, data_seed=cfg.seed,
        dataloader_num_workers=0,            # items are drawn per epoch in this process
        gradient_checkpointing=cfg.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if cfg.gradient_checkpointing else None,
        disable_tqdm=True,
    )


def _load_split(path: str, limit: int, seed: int):
    import numpy as np

    samples = read_samples(path)
    if not limit or limit >= len(samples):
        return samples
    keep = np.sort(np.random.default_rng(seed).choice(len(samples), size=limit, replace=False))
    return [samples[i] for i in keep]


@dataclass
class Built:
    """Everything ``train`` runs, exposed for tests and notebooks."""

    trainer: object
    train_ds: object
    dev_ds: object
    tokenizer: object
    model_dir: Path
    run_dir: Path
    world_size: int


def build_trainer(cfg: TrainConfig, home: str | None = None) -> Built:
    """Resolve the backbone, read the data, wrap the model, configure the ``Trainer``."""
    from transformers import EarlyStoppingCallback, set_seed

    run_dir = Path(cfg.output_dir)
    if (run_dir / "final").exists() and not cfg.resume:
        raise ValueError(f"{run_dir} already holds a finished run; choose another output_dir or resume")
    run_dir.mkdir(parents=True, exist_ok=True)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if int(os.environ.get("RANK", "0")) == 0:
        (run_dir / "config.yaml").write_text(cfg.to_yaml())
    else:                                   # one log of the run, from the first process
        logging.getLogger("usl").setLevel(logging.WARNING)

    model_dir = resolve_backbone(cfg.backbone, home)
    tok = load_tokenizer(model_dir)
    fmt = PromptFormatter(tok, max_length=cfg.max_length, query_max_tokens=cfg.query_max_tokens,
                          min_response_tokens=cfg.min_response_tokens, keep=cfg.truncation_keep,
                          use_chat_template=cfg.use_chat_template)
    common = dict(loss=cfg.loss, tie_policy=cfg.tie_policy, seed=cfg.seed, swap_positions=cfg.swap_positions,
                  both_orders=cfg.pairwise_order == "both", with_spans=cfg.head == "span")
    train_ds = CRMDataset(_load_split(cfg.train_file, cfg.max_train_samples, cfg.seed), fmt, train=True,
                          direction=cfg.data_direction, noise=cfg.data_noise, **common)
    dev_ds = CRMDataset(_load_split(cfg.dev_file, cfg.max_dev_samples, cfg.seed), fmt, train=False, **common) \
        if cfg.dev_file else None
    if len(train_ds) == 0:
        raise ValueError(f"{cfg.train_file}: no training pairs left (tie_policy={cfg.tie_policy})")
    log.info("train: %d pairs (%d ties excluded); dev: %s inputs", len(train_ds), train_ds.excluded_ties,
             len(dev_ds) if dev_ds else "none")

    if cfg.packing and (cfg.loss, cfg.head) != ("pairwise", "span"):
        raise ValueError(f"packing: true needs loss: pairwise and head: span (got {cfg.loss}, {cfg.head})")
    set_seed(cfg.seed)
    model = build_model(cfg, model_dir, tok)
    args = training_args(cfg, run_dir, dev_ds is not None, world_size)
    if cfg.packing:
        from usl.crm.packing import use_packed_attention

        use_packed_attention(model.backbone)
        if cfg.compile_layers:
            import torch

            from usl.crm.packing import compile_layers

            compile_layers(model.backbone, backend="inductor" if torch.cuda.is_available() else "eager")
        collator = PackedPairwiseCollator(tok.pad_token_id, multiple=cfg.pack_multiple)
    else:
        collator = (PairwiseCollator if cfg.loss == "pairwise" else PointwiseCollator)(tok.pad_token_id)
    ref: dict = {}
    callbacks = _callbacks(run_dir, train_ds, cfg, ref)
    if dev_ds is not None and cfg.early_stopping_patience > 0:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.early_stopping_patience))
    trainer = _make_trainer_class()(
        model=model, args=args, train_dataset=train_ds, eval_dataset=dev_ds, data_collator=collator,
        compute_metrics=dev_metrics, callbacks=callbacks, loss_kind=cfg.loss,
        group_by_length=cfg.group_by_length, head_lr=cfg.head_lr, head_names=(*cfg.head_modules, "head"))
    ref["trainer"] = trainer
    return Built(trainer, train_ds, dev_ds, tok, model_dir, run_dir, world_size)


def train(cfg: TrainConfig, home: str | None = None, built: Built | None = None) -> Path:
    """Run one training job end to end; returns the directory of the final model."""
    import torch

    b = built or build_trainer(cfg, home)
    trainer, train_ds, dev_ds, run_dir = b.trainer, b.train_ds, b.dev_ds, b.run_dir
    t0 = time.perf_counter()
    resume = bool(cfg.resume) and any((run_dir / "checkpoints").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    train_s = time.perf_counter() - t0
    final_metrics = trainer.evaluate() if dev_ds is not None else {}
    # each process saw a shard of the data: the reports and token counts are summed over them
    train_rep, dev_rep, tokens = _summed_over_processes(
        train_ds.report, dev_ds.report if dev_ds is not None else None, trainer.tokens_seen)

    final = run_dir / "final"
    if trainer.is_world_process_zero():
        save_final(trainer.model, b.tokenizer, final, cfg, backbone_sha=weights_sha256(b.model_dir))
        report = {"train": train_rep.to_dict(), "dev": dev_rep.to_dict() if dev_rep else None,
                  "max_length": cfg.max_length, "policy": {"query_max_tokens": cfg.query_max_tokens,
                                                           "min_response_tokens": cfg.min_response_tokens,
                                                           "keep": cfg.truncation_keep}}
        (run_dir / "truncation.json").write_text(json.dumps(report, indent=2))
        summary = {"train_seconds": round(train_s, 1), "train_metrics": result.metrics,
                   "dev_metrics": final_metrics, "global_step": trainer.state.global_step,
                   "best_checkpoint": trainer.state.best_model_checkpoint,
                   "pairs_per_s": round(result.metrics.get("train_samples_per_second", 0.0), 3),
                   "tokens_per_s": round(tokens / max(train_s, 1e-9), 1),
                   "world_size": b.world_size, "precision": _precision(cfg),
                   "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                   **({"peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
                      if torch.cuda.is_available() else {}),
                   "truncated_train_inputs": train_rep.truncated, **provenance()}
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        log.info("done in %.0fs: dev %s; final model in %s; truncated %d/%d train inputs", train_s,
                 {k: v for k, v in final_metrics.items() if k in ("eval_loss", "eval_accuracy")}, final,
                 train_rep.truncated, train_rep.inputs)
    trainer.accelerator.wait_for_everyone()     # no process leaves while the first still saves
    return final


def _any_process(flag: bool, device) -> bool:
    """True on every process when it is True on one (an all-reduce of one number)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def _summed_over_processes(train_rep, dev_rep, tokens: int):
    """``(train report, dev report, tokens seen)`` summed over the processes of a distributed run
    (each saw a shard of the data); as they are in a single process."""
    import functools

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return train_rep, dev_rep, tokens
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, (train_rep, dev_rep, tokens))
    trains, devs, counts = zip(*parts)
    return (functools.reduce(type(train_rep).merge, trains),
            functools.reduce(type(dev_rep).merge, devs) if dev_rep is not None else None, sum(counts))


def save_final(model, tokenizer, final: Path, cfg: TrainConfig, backbone_sha: str) -> None:
    """Adapter + head (LoRA) or the whole model, in ``cfg.export_dtype``, plus tokenizer and crm.json."""
    import torch
    from safetensors.torch import load_file, save_file

    final.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(final))
    (final / "README.md").unlink(missing_ok=True)      # peft's empty template; MODEL_CARD.md is ours
    dtype = getattr(torch, cfg.export_dtype)
    for f in final.glob("*.safetensors"):
        sd = load_file(str(f))
        save_file({k: v.to(dtype) if v.is_floating_point() else v for k, v in sd.items()}, str(f),
                  metadata={"format": "pt"})
    tokenizer.save_pretrained(str(final))
    meta = {"format": CRM_FORMAT, "loss": cfg.loss, "finetune": cfg.finetune,
            "num_labels": 2 if cfg.loss == "pairwise" else 1, "label_0": "response A is better",
            "order_average": cfg.loss == "pairwise" and cfg.pairwise_order == "both", "head": cfg.head,
            "backbone": cfg.backbone, "backbone_sha256": backbone_sha,
            "formatter": {"max_length": cfg.max_length, "query_max_tokens": cfg.query_max_tokens,
                          "min_response_tokens": cfg.min_response_tokens, "keep": cfg.truncation_keep,
                          "use_chat_template": cfg.use_chat_template},
            "train_config": asdict(cfg), **provenance()}
    (final / "crm.json").write_text(json.dumps(meta, indent=2))


def provenance() -> dict:
    import torch
    import transformers

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        commit = ""                                    # not a git checkout (a copied tree)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    try:
        import peft

        versions["peft"] = peft.__version__
    except ImportError:
        pass
    return {"git_commit": commit, "versions": versions}
