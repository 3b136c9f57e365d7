"""Load a trained CRM (run dir, its ``final/``, or shipped weights) and score requests.

A model directory holds ``crm.json`` (what head, which backbone, the prompt budget), the
tokenizer (a LoRA CRM may leave it to its backbone), and either a LoRA adapter + head
(``adapter_config.json``) or a full model. A LoRA adapter is merged into the backbone after
loading, so inference costs what the plain model costs. Identical model inputs within a call are
run once (judging a pair in both orders, as evaluation does, asks for the same passes twice).

``CRMScorer.p_a`` returns P(A better) for the order given. A pairwise CRM trained on order-averaged
logits (``crm.json`` ``order_average``) is scored the same way: both orders, logits averaged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from pathlib import Path
from typing import Sequence

from usl.crm.trainer import CRM_FORMAT, order_averaged
from usl.crm.dataset import _pad
from usl.crm.formatting import PromptFormatter
from usl.data.backbone import ensure_pad_token, load_classifier, resolve_backbone, weights_sha256

log = logging.getLogger(__name__)


def model_dir_of(path: str | Path) -> Path:
    p = Path(path).expanduser()
    for d in (p, p / "final"):
        if (d / "crm.json").is_file():
            return d
    raise FileNotFoundError(f"{p}: no crm.json here or in final/ (not a trained CRM)")


def weights_version(model_dir: Path, *, portable: bool = False) -> str:
    """sha256 over crm.json and the weight files: changes whenever decisions could change.
    ``portable``: crm.json less its ``backbone`` path (which differs by machine; ``backbone_sha256``
    stays in) and its training record, so copies of one model on two machines agree."""
    h = hashlib.sha256()
    meta = (model_dir / "crm.json").read_bytes()
    if portable:
        d = json.loads(meta)
        d.pop("backbone", None)
        d.pop("train_config", None)
        meta = json.dumps(d, sort_keys=True).encode()
    h.update(b"crm.json")
    h.update(meta)
    for f in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


class CRMScorer:
    def __init__(self, path: str | Path, *, device: str | None = None, home: str | Path | None = None,
                 batch_size: int | None = None, backbone: str | None = None, dtype: str | None = None,
                 packed: bool | None = None, pack_tokens: int = 16384, compile: bool | None = None):
        """``dtype``: the weights' (default bfloat16 on a GPU, float32 on the CPU). ``packed``: run a
        span-head CRM on a causal decoder as packed rows of ``pack_tokens`` tokens
        (``usl.crm.packing``; default on a GPU where the backbone allows it). ``compile``:
        ``torch.compile`` the decoder layers (default: when packed on a GPU; 1.5x there)."""
        import torch

        self.dir = model_dir_of(path)
        self.meta = json.loads((self.dir / "crm.json").read_text())
        if self.meta.get("format") != CRM_FORMAT:
            raise ValueError(f"{self.dir}/crm.json: format {self.meta.get('format')!r}, expected {CRM_FORMAT}")
        self.loss = self.meta["loss"]
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size or (32 if self.device.startswith("cuda") else 4)
        self.dtype = getattr(torch, dtype or ("bfloat16" if self.device.startswith("cuda") else "float32"))
        self.pack_tokens = max(pack_tokens, self.meta["formatter"]["max_length"])    # any input fits a row
        from transformers import AutoTokenizer

        self.base_dir = resolve_backbone(backbone or self.meta["backbone"], home) \
            if (self.dir / "adapter_config.json").is_file() else None
        own_tokenizer = (self.dir / "tokenizer_config.json").is_file() or self.base_dir is None
        self.tok = AutoTokenizer.from_pretrained(str(self.dir if own_tokenizer else self.base_dir))
        ensure_pad_token(self.tok)
        f = self.meta["formatter"]
        self.fmt = PromptFormatter(self.tok, max_length=f["max_length"], query_max_tokens=f["query_max_tokens"],
                                   min_response_tokens=f["min_response_tokens"], keep=f["keep"],
                                   use_chat_template=f["use_chat_template"])
        if self.meta.get("head") == "span":
            from usl.crm.span_head import SpanHeadModel, head_config, load_backbone

            hc = head_config(self.dir)
            model = SpanHeadModel(self._weights(lambda d: load_backbone(d, dtype=self.dtype)), self.loss,
                                  hidden=hc["hidden"], dropout=hc["dropout"],
                                  length_features=hc.get("length_features", False))
            model.load_head(self.dir)
        else:
            model = self._weights(lambda d: load_classifier(d, self.meta["num_labels"], self.tok, dtype=self.dtype))
        self.model = model.to(self.device).eval()
        self.packed = self._setup_packing(packed, compile)
        self.truncated = 0

    def _setup_packing(self, packed: bool | None, compile: bool) -> bool:
        from usl.crm import packing

        if self.meta.get("head") != "span":
            if packed:
                raise ValueError("packed scoring needs a span-head CRM")
            return False
        able = packing.can_pack(self.model.backbone)
        if packed is None:
            packed = able and self.device.startswith("cuda")
        if packed:
            packing.use_packed_attention(self.model.backbone)
            if compile if compile is not None else self.device.startswith("cuda"):
                packing.compile_layers(self.model.backbone)
        return bool(packed)

    def _weights(self, load):
        """``load(dir)`` on this CRM's directory, or, for a LoRA adapter, on its backbone with the
        adapter merged in (warning when the backbone is not the one it was trained on). Quietly: a board's
        output is not the place for transformers' loading bar or the deprecation notices peft triggers."""
        from transformers.utils import logging as hf_logging

        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers(\.|$)")
                if self.base_dir is None:
                    return load(self.dir)
                from peft import PeftModel

                sha = weights_sha256(self.base_dir)
                if self.meta.get("backbone_sha256") and sha != self.meta["backbone_sha256"]:
                    log.warning("backbone %s differs from the one this CRM was trained on (sha %s != %s)",
                                self.base_dir, sha[:12], self.meta["backbone_sha256"][:12])
                return PeftModel.from_pretrained(load(self.base_dir), str(self.dir)).merge_and_unload()
        finally:
            if bar:
                hf_logging.enable_progress_bar()

    def _encode(self, kind: str, enc) -> tuple:
        return (enc.input_ids, self.fmt.span_rows(enc, kind)) if self.meta.get("head") == "span" \
            else (enc.input_ids, None)

    def _forward(self, rows: list[tuple], run=None):
        """Logits for (token ids, spans or None) rows, batched, longest first (less padding);
        a row that repeats an earlier one is not run again. ``run(input_ids, attention_mask,
        [spans])`` replaces the model's forward: a tensor or a tuple of tensors, batch first (each
        row then gets its slice of each)."""
        import torch

        keys = [(tuple(ids), None if spans is None else tuple(map(tuple, spans))) for ids, spans in rows]
        first = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        if self.packed and run is None:
            return self._forward_packed(rows, keys, first)
        order = sorted(set(first.values()), key=lambda i: -len(rows[i][0]))
        out: list = [None] * len(rows)
        with torch.inference_mode():
            for k in range(0, len(order), self.batch_size):
                idx = order[k:k + self.batch_size]
                ids, mask = _pad([list(rows[i][0]) for i in idx], self.tok.pad_token_id)
                extra = {} if rows[idx[0]][1] is None else \
                    {"spans": torch.tensor([rows[i][1] for i in idx], dtype=torch.long, device=self.device)}
                got = (run or (lambda **kw: self.model(**kw).logits))(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **extra)
                for j, i in enumerate(idx):
                    out[i] = tuple(t[j].float().cpu() for t in got) if isinstance(got, tuple) \
                        else got[j].float().cpu()
        return [out[first[k]] for k in keys]

    def _forward_packed(self, rows: list[tuple], keys: list, first: dict) -> list:
        """``_forward`` over packed rows of ``pack_tokens`` tokens (every row that size on a GPU, so
        the compiled kernels keep one shape; as long as needed on the CPU)."""
        from usl.crm.packing import packed_logits

        unique = sorted(set(first.values()))
        got = packed_logits(self.model, [rows[i][0] for i in unique], [rows[i][1] for i in unique],
                            self.tok.pad_token_id, self.pack_tokens, self.device)
        out = dict(zip(unique, got))
        return [out[first[k]] for k in keys]

    def p_a(self, items: Sequence[tuple[Sequence[str], str, str, str]]) -> list[float]:
        """``items``: (criteria, query, response_a, response_b). Returns P(A better) each."""
        import torch

        if not items:
            return []
        if self.loss == "pairwise":
            encs = [self.fmt.pairwise(c, q, a, b) for c, q, a, b in items]
            self.truncated += sum(e.truncated for e in encs)
            if self.meta.get("order_average"):
                encs += [self.fmt.pairwise(c, q, b, a) for c, q, a, b in items]
            logits = torch.stack(self._forward([self._encode("pairwise", e) for e in encs]))
            if self.meta.get("order_average"):
                logits = order_averaged(logits)
            return torch.softmax(logits, -1)[:, 0].tolist()
        encs = [self.fmt.pointwise(c, q, r) for c, q, a, b in items for r in (a, b)]
        self.truncated += sum(e.truncated for e in encs)
        r = self._forward([self._encode("pointwise", e) for e in encs])
        return [float(torch.sigmoid(r[2 * i][0] - r[2 * i + 1][0])) for i in range(len(items))]
