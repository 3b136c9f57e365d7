"""Training configuration for the customizable reward model (CRM).

One dataclass, every field with a help string (like TRL's ``RewardConfig``). It loads from YAML
and takes ``key=value`` overrides; unknown keys and values outside a field's closed set raise,
so a typo never silently trains the wrong model.

    cfg = TrainConfig.from_yaml("configs/crm_smollm2_pairwise.yaml", ["loss=pointwise", "lr=2e-5"])
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

Loss = Literal["pairwise", "pointwise"]
Direction = Literal["original", "reverse", "random"]
Noise = Literal["none", "add", "remove", "replace", "random"]
TiePolicy = Literal["exclude", "soft"]
Finetune = Literal["lora", "full"]
Precision = Literal["auto", "bf16", "fp16", "fp32"]
Keep = Literal["head_tail", "head"]
ExportDtype = Literal["float32", "float16", "bfloat16"]


def _f(default: Any, help: str, **kw) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


class YamlConfig:
    """What every recipe dataclass shares: ``from_yaml(path, ["key=value", ...])``, ``from_dict``, ``to_dict``,
    ``help``, and fields coerced to their annotated types (a closed ``Literal`` set, lists, numbers) in
    ``__post_init__``, so a typo or a value outside a field's set raises instead of training the wrong model."""

    def _coerce_fields(self) -> None:
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            setattr(self, f.name, _coerce(f.name, getattr(self, f.name), hints[f.name]))

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; known: {', '.join(sorted(known))}")
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()):
        d: dict[str, Any] = {}
        if path:
            p = Path(path)
            if not p.is_file():
                raise FileNotFoundError(f"config file not found: {p}")
            d = yaml.safe_load(p.read_text()) or {}
            if not isinstance(d, dict):
                raise ValueError(f"{p}: expected a mapping of config keys")
        d.update(parse_overrides(overrides))
        try:
            return cls.from_dict(d)
        except ValueError as e:
            raise ValueError(f"{path}: {e}" if path else str(e)) from e

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}


@dataclass
class TrainConfig(YamlConfig):
    # --- model -------------------------------------------------------------------------
    backbone: str = _f("smollm2-135m", "Hugging Face model directory, a directory holding one .gguf file, "
                       "or an alias (smollm2-135m, gemma3-270m) resolved from the installed GGUF packages.")
    loss: Loss = _f("pairwise", "pairwise: one prompt with criteria, query and both responses, 2-way "
                    "cross-entropy (L_cls). pointwise: criteria as system prompt + one response, scalar "
                    "reward, Bradley-Terry loss -logsigmoid(r_chosen - r_rejected) (L_rank).")
    finetune: Finetune = _f("lora", "lora: train LoRA adapters on every linear layer plus the full score head "
                            "(small enough to ship in git). full: train all weights.")
    lora_r: int = _f(16, "LoRA rank (adapter size grows linearly with it).")
    lora_alpha: int = _f(32, "LoRA alpha (scaling = alpha / r).")
    lora_dropout: float = _f(0.05, "Dropout on the LoRA branch.")
    lora_target_modules: list[str] = _f([], "Module names LoRA wraps; empty = every nn.Linear except the head.")
    head: Literal["span", "token"] = _f("span", "Read-out. span: mean-pool the final hidden states over each "
                                        "prompt slot (criteria, query, answers) and score products of "
                                        "criteria and answer vectors (usl.crm.span_head; the one that "
                                        "learned on 22M-135M backbones). token: the paper's "
                                        "AutoModelForSequenceClassification head on one position.")
    head_modules: list[str] = _f(["score", "classifier"], "Names of the freshly initialised classification "
                                 "head modules (those present are trained in full and saved with the adapter).")
    head_init: Literal["zero", "default"] = _f("zero", "Initial classification head. zero: logits start at 0 "
                                               "(loss ln 2); a random head reads the backbone's huge outlier "
                                               "dimensions and starts with a large constant logit gap that the "
                                               "pairwise loss spends its first epoch undoing. default: the model's.")
    precision: Precision = _f("auto", "auto = bf16 on a CUDA device that supports it, else fp32.")
    base_dtype: Literal["auto", "float32", "bfloat16"] = _f("auto", "dtype the backbone is loaded in. auto = "
                                                             "bfloat16 for the frozen base of a LoRA run in bf16 "
                                                             "(trainable weights stay fp32), else float32.")
    packing: bool = _f(False, "Pack each batch's inputs end to end into one row, each attending only to "
                       "itself (usl.crm.packing): no compute on padding. Span head on a causal decoder "
                       "without sliding windows only; fast on a GPU (compiled flex attention).")
    pack_multiple: int = _f(2048, "With packing: a packed row's length is rounded up to this many tokens, so "
                            "the compiled attention sees few distinct shapes.")
    compile_layers: bool = _f(False, "With packing: torch.compile each decoder layer (fuses the norms, RoPE and "
                              "activations; 1.5x on an H200 at the Qwen3-4B shape). On the CPU the layers are "
                              "only traced (the eager backend).")
    gradient_checkpointing: bool = _f(False, "Trade compute for memory (long prompts, big backbones).")
    export_dtype: ExportDtype = _f("float16", "dtype of the final exported adapter/head weights (checkpoints "
                                   "keep full precision).")

    # --- data --------------------------------------------------------------------------
    train_file: str = _f("artifacts/data/train.jsonl", "Training pairs, paper JSONL (usl.data.paper_jsonl).")
    dev_file: str = _f("artifacts/data/dev.jsonl", "Development pairs for periodic evaluation and early "
                       "stopping; empty string = no evaluation.")
    max_train_samples: int = _f(0, "Use at most this many training samples (0 = all): a seeded random "
                             "subset, in file order.")
    max_dev_samples: int = _f(0, "Use at most this many dev samples (0 = all): a seeded random subset, "
                           "in file order (files are often grouped by source).")
    data_direction: Direction = _f("original", "original: winner's criteria, winner chosen. reverse: the "
                                   "loser's criteria ('loser_criteria' in the sample), loser chosen. random: "
                                   "one of the two per sample and epoch.")
    data_noise: Noise = _f("none", "none | add (append ~half as many criteria of other pairs) | remove (keep "
                           "a random half, at least one) | replace (overwrite at most half with the loser's "
                           "criteria, label unchanged) | random (one of the four per sample and epoch).")
    tie_policy: TiePolicy = _f("soft", "Tied pairs: soft = train towards 0.5/0.5 (pairwise) or "
                               "P(chosen>rejected)=0.5 (pointwise); exclude = drop them (the paper).")
    pairwise_order: Literal["both", "random"] = _f("both", "Pairwise: 'both' scores every pair in both orders "
                                                  "in the same step and trains the order-averaged logit "
                                                  "(f(A,B) + flip(f(B,A))) / 2, which is antisymmetric: "
                                                  "position carries no signal, swap consistency is 1, and a "
                                                  "zero-initialised head still gets a gradient. 'random': one "
                                                  "order per sample (the reference code's single pass).")
    swap_positions: bool = _f(True, "Pairwise: put the responses in random order (p=0.5 per sample and "
                              "epoch) so that position carries no signal. Dev pairs are scored in both orders (with "
                              "pairwise_order both, once: the model averages the orders itself).")
    max_length: int = _f(1024, "Token budget of one model input; longer inputs have their answers truncated "
                         "(never dropped).")
    query_max_tokens: int = _f(256, "When an input is over budget, the query keeps at most this many tokens.")
    min_response_tokens: int = _f(64, "When over budget, each response keeps at least this many tokens (the "
                                  "query is cut further first).")
    truncation_keep: Keep = _f("head_tail", "How a truncated text is cut: head_tail keeps its beginning and "
                               "end with a '[...]' marker between; head keeps the beginning.")
    use_chat_template: bool = _f(True, "Wrap the prompt in the tokenizer's chat template when it has one.")

    # --- optimisation ------------------------------------------------------------------
    output_dir: str = _f("artifacts/crm/run", "Run directory: config.yaml, metrics.jsonl, checkpoints, "
                         "truncation.json and the final model under final/.")
    learning_rate: float = _f(1e-4, "Peak learning rate (paper: 1e-5 full fine-tuning; ~1e-4 for LoRA).")
    num_train_epochs: float = _f(2.0, "Epochs over the training set.")
    max_steps: int = _f(-1, "Stop after this many optimiser steps (-1 = run all epochs).")
    effective_batch_size: int = _f(32, "Pairs per optimiser step over all devices; gradient accumulation is "
                                   "derived from it.")
    per_device_train_batch_size: int = _f(8, "Pairs per forward pass per device.")
    per_device_eval_batch_size: int = _f(16, "Model inputs per forward pass at evaluation.")
    group_by_length: bool = _f(False, "Draw batches of similar length (megabatches of 50 batches, sorted): "
                               "less padding, ~1.3x faster on GPU; order stays random across megabatches.")
    lr_scheduler_type: str = _f("cosine", "transformers scheduler name.")
    warmup_ratio: float = _f(0.03, "Fraction of steps for linear warm-up.")
    head_lr: float = _f(1e-3, "Peak learning rate of the freshly initialised head (head_modules, or the span "
                        "head); 0 = learning_rate. A new head at a backbone's 1e-5 to 5e-5 barely moves: our "
                        "MiniLM runs ended with head weights of norm 0.006 after 3,000 steps.")
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient clipping.")
    eval_steps: int = _f(50, "Evaluate on dev (and checkpoint) every N optimiser steps.")
    logging_steps: int = _f(10, "Log the training curve every N optimiser steps.")
    early_stopping_patience: int = _f(3, "Stop after N evaluations without a lower dev loss (0 = never).")
    save_total_limit: int = _f(2, "Checkpoints kept on disk (the best one is always kept).")
    max_train_minutes: float = _f(0.0, "Stop training after this many minutes of wall clock (evaluating and "
                                  "checkpointing first), e.g. to fit a rented GPU slot; 0 = no limit.")
    seed: int = _f(42, "Seed of model init, data order, noise, direction and position draws.")
    resume: bool = _f(False, "Resume from the last checkpoint in output_dir.")

    # ------------------------------------------------------------------------------------
    def __post_init__(self) -> None:
        self._coerce_fields()
        if self.max_length < 64:
            raise ValueError(f"max_length={self.max_length} is too small (need >= 64)")
        if self.effective_batch_size < 1 or self.per_device_train_batch_size < 1:
            raise ValueError("batch sizes must be >= 1")
        if self.head_lr < 0:
            raise ValueError(f"head_lr={self.head_lr}: must be >= 0 (0 = learning_rate)")


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["lr=1e-4", "lora_target_modules=[q_proj, v_proj]"]`` -> typed values via YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r} is not key=value")
        out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return out


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(name: str, value: Any, hint: Any) -> Any:
    origin = get_origin(hint)
    if origin is Literal:
        if value not in get_args(hint):
            raise ValueError(f"config {name}={value!r}: expected one of {list(get_args(hint))}")
        return value
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"config {name}={value!r}: expected a list")
        item = (get_args(hint) or (str,))[0]
        return [_coerce(name, v, item) if item is not str else str(v) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"config {name}={value!r}: expected a mapping")
        return dict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"config {name}={value!r}: expected true/false")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ValueError(f"config {name}={value!r}: expected an integer")
        return int(value)
    if hint is float:
        if isinstance(value, str):
            try:
                value = float(value)  # YAML reads "1e-4" (no dot) as a string
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config {name}={value!r}: expected a number")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"config {name}={value!r}: expected a string")
        return str(value)
    return value
