"""The criteria tower of the fast CRM: all-MiniLM-L6-v2 with a LoRA adapter, mean-pooled.

Why fine-tune it: frozen MiniLM embeds "I prefer an academic writing style" next to "I prefer a
business-oriented writing style" (surface form dominates), so a head on frozen embeddings learns
the training wordings and not the concepts. A low-rank adapter trained end to end on the pairs
moves wordings of one preference together while keeping most of what the encoder knew, which is
what lets unseen wordings (and, with luck, unseen styles) land in the right place. The adapter is
a few hundred KB; criteria are short, so encoding a user's criteria stays a few milliseconds.

``encode(texts) -> (n, 384)`` L2-normalised, the same pooling as sentence-transformers. This is the
module that trains; the judge runs the tower exported to ONNX (``usl.data.minilm_onnx``), without torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from usl.data.encoder import encoder_path
from usl.fast.scorer import ADAPTER_DIR  # noqa: F401  (re-exported)


class CriteriaEncoder(nn.Module):
    def __init__(self, adapter: str | Path | None = None, lora_r: int = 8, trainable: bool = False,
                 max_length: int = 64):
        super().__init__()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(encoder_path())
        base = AutoModel.from_pretrained(encoder_path())
        self.max_length = max_length
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(base, str(adapter))
            self.model = model.merge_and_unload() if not trainable else model
        elif trainable:
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.05,
                             target_modules=["query", "key", "value", "dense"])
            self.model = get_peft_model(base, cfg)
        else:
            self.model = base
        if not trainable:
            self.model.eval()
            for p in self.model.parameters():
                p.requires_grad_(False)
        self._memo: dict[str, torch.Tensor] = {}
        # called as f(texts, hidden states of every layer, attention mask) after each pass of ``encode``:
        # another reader of the same frozen encoder (the length reader) takes its states from that pass
        self.listeners: list = []

    def forward(self, texts: Sequence[str], listen: bool = False) -> torch.Tensor:
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        out = self.model(**enc, output_hidden_states=listen)
        if listen:
            for f in self.listeners:
                f(list(texts), out.hidden_states, enc["attention_mask"])
        h = out.last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        return nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-6), dim=-1)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Inference with a small in-process memo (users repeat criteria across requests)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            for t, v in zip(todo, self.forward(todo, listen=bool(self.listeners))):
                self._memo[t] = v
            if len(self._memo) > 50_000:
                self._memo.clear()
        if not texts:
            return torch.zeros((0, 384))
        return torch.stack([self._memo[t] for t in texts])

    def save_adapter(self, out_dir: str | Path) -> None:
        self.model.save_pretrained(str(Path(out_dir) / ADAPTER_DIR))
