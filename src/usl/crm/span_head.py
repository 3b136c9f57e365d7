"""The span head: one joint pass over the whole prompt, then a criteria x answer interaction.

Why: a classification head on one pooled position (the last token of a decoder, ``[CLS]`` of an
encoder) did not learn on our 22M-135M backbones: loss stayed at ln 2 for 3,000+ steps on every
pairwise variant we ran (zero, random, LoRA, full, one order, both orders). Nearly every training
pair also appears under the opposite criteria, so what decides the label is an *interaction*
(criteria x which answer has the property), and a linear head over one pretrained position starts
with no linear signal to follow; the backbone gets no useful gradient and nothing moves.

This head keeps the paper's input (criteria, query and both answers in ONE prompt, so every answer
token attends to the criteria and to the other answer) and changes only the read-out: the final
hidden states are mean-pooled over each slot of the prompt (criteria ``c``, query ``q``, answers
``a`` and ``b``) and the score is an MLP over products::

    pairwise:   d = a - b;   s = MLP([c * d, q * d, d, c * dl]);   logits = (s / 2, -s / 2)
    pointwise:               r = MLP([c * x, q * x, x, c * l])      (x: the one answer)

``l`` is the answer's log token count before truncation (``dl`` = l_a - l_b). Mean pooling hides
length, and truncation (long answers are cut to equal budgets) hides it again, yet it is what
length criteria are about; the product with ``c`` makes "this criterion wants the longer answer"
linear from the first step. Heads saved without it (``length_features: false``) still load.

The products make criteria-dependent features linear from the first step, and ``a - b`` makes the
score antisymmetric in the pooled answers. Slot spans come from ``PromptFormatter`` (exact token
ranges, since the prompt is assembled from separately tokenized pieces).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

SLOTS = {"pairwise": ("criteria", "query", "response_a", "response_b"),
         "pointwise": ("criteria", "query", "response")}
HEAD_FILE = "span_head.safetensors"
HEAD_CONFIG = "span_head.json"


def pool_spans(hidden: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """hidden [N, L, d], spans [N, S, 2+] (start, end, ...) -> [N, S, d] means (zeros for empty spans)."""
    pos = torch.arange(hidden.shape[1], device=hidden.device)
    m = (pos[None, None, :] >= spans[..., 0:1]) & (pos[None, None, :] < spans[..., 1:2])   # [N, S, L]
    m = m.to(hidden.dtype)
    return (m @ hidden) / m.sum(-1, keepdim=True).clamp(min=1.0)


class SpanHeadModel(nn.Module):
    """``backbone`` (an ``AutoModel``, maybe LoRA-wrapped) + the span head. ``forward`` returns
    an object with ``.logits``: ``[N, 2]`` pairwise, ``[N, 1]`` pointwise."""

    def __init__(self, backbone: nn.Module, loss: str, hidden: int = 256, dropout: float = 0.1,
                 length_features: bool = True):
        super().__init__()
        if loss not in SLOTS:
            raise ValueError(f"loss={loss!r}: expected pairwise or pointwise")
        self.backbone, self.loss, self.length_features = backbone, loss, length_features
        d = backbone.config.hidden_size
        self.head_config = {"loss": loss, "hidden": hidden, "dropout": dropout, "dim": d,
                            "length_features": length_features}
        width = (4 if length_features else 3) * d
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, 1))
        self.config = backbone.config              # what the Trainer and peft look for

    def slots(self, input_ids, attention_mask=None, spans=None, position_ids=None,
              documents=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Each slot's mean-pooled final hidden state [N, S, d] and its log token count before
        truncation [N, S]. Padded inputs: ``input_ids`` [N, L] with ``attention_mask``. Packed
        inputs (``usl.crm.packing.pack``): one row [1, T] with ``position_ids`` and ``documents``,
        and ``spans`` [N, S, 3] in that row's coordinates."""
        if documents is None:
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask)
            pooled = pool_spans(out.last_hidden_state.float(), spans)
        else:
            from usl.crm.packing import document_mask

            # use_cache=False: a key/value cache is of no use to one pass, and its per-layer state
            # would make each compiled layer a graph of its own
            out = self.backbone(input_ids=input_ids, position_ids=position_ids, use_cache=False,
                                block_mask=document_mask(documents))
            n, s = spans.shape[:2]
            pooled = pool_spans(out.last_hidden_state.float(), spans.reshape(1, n * s, -1)).reshape(n, s, -1)
        n = (spans[..., 2] if spans.shape[-1] > 2 else spans[..., 1] - spans[..., 0]).float()
        return pooled, torch.log1p(n)

    def score(self, c: torch.Tensor, q: torch.Tensor, x: torch.Tensor, dl: torch.Tensor) -> torch.Tensor:
        """The head on slot vectors: ``x`` is a - b (pairwise) or the answer, ``dl`` its log-length
        (difference), [N]. Returns [N, 1]."""
        feats = [c * x, q * x, x] + ([c * dl[:, None]] if self.length_features else [])
        return self.head(torch.cat(feats, -1))

    def forward(self, input_ids, attention_mask=None, spans=None, position_ids=None, documents=None, **_):
        pooled, ln = self.slots(input_ids, attention_mask, spans, position_ids, documents)
        pairwise = self.loss == "pairwise"
        x = pooled[:, 2] - pooled[:, 3] if pairwise else pooled[:, 2]
        s = self.score(pooled[:, 0], pooled[:, 1], x, ln[:, 2] - ln[:, 3] if pairwise else ln[:, 2])
        # a ModelOutput, not a plain namespace: DDP finds the tensors in it to trace the graph
        # (with find_unused_parameters it would otherwise mark every parameter ready before backward)
        return SequenceClassifierOutput(logits=torch.cat([s / 2, -s / 2], -1) if pairwise else s)

    # -- activation checkpointing: the Trainer asks the model, the backbone's layers do it ----------
    def activation_checkpointing_enable(self, **kwargs) -> None:
        self.backbone.activation_checkpointing_enable(**kwargs)

    def gradient_checkpointing_enable(self, **kwargs) -> None:      # transformers before 5.2x calls this
        self.backbone.gradient_checkpointing_enable(**kwargs)

    # -- persistence: the backbone (or its adapter) as transformers/peft save it, plus the head ----
    def save_pretrained(self, out_dir: str | Path, **kwargs) -> None:
        from safetensors.torch import save_file

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(str(out), **kwargs)
        save_file({k: v.detach().contiguous() for k, v in self.head.state_dict().items()}, str(out / HEAD_FILE))
        (out / HEAD_CONFIG).write_text(json.dumps(self.head_config, indent=2))

    def load_head(self, model_dir: str | Path) -> None:
        from safetensors.torch import load_file

        sd = load_file(str(Path(model_dir) / HEAD_FILE))
        self.head.load_state_dict({k: v.float() for k, v in sd.items()})


def load_backbone(model_dir: str | Path, dtype=None) -> nn.Module:
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(model_dir), dtype=dtype or torch.float32)


def head_config(model_dir: str | Path) -> dict:
    f = Path(model_dir) / HEAD_CONFIG
    if not f.is_file() or not (Path(model_dir) / HEAD_FILE).is_file():
        raise FileNotFoundError(f"{model_dir}: crm.json names the span head but {HEAD_CONFIG} or {HEAD_FILE} "
                                "is missing (an incomplete copy of the model?)")
    return json.loads(f.read_text())
