"""Packed prompts: many inputs in one row, each attending only to itself, so no compute goes to padding.

A padded batch of prompts of 300 to 2,048 tokens spends much of its attention and all of its
per-token work on pad tokens. Here the prompts of a batch are laid end to end in one row of ``T``
tokens; each token gets the position it has in its own prompt (RoPE sees what it would alone),
and attention is causal *within* a prompt only. That mask is a flex-attention ``BlockMask``: the
kernel skips the 128x128 blocks where two prompts never meet, so a row of 16 prompts costs the
attention of 16 prompts, not of one prompt of length ``T``::

    rows  [a a a] [b b] [c c c c]          ->  input_ids    [a a a b b c c c c .]   (. filler)
                                               position_ids [0 1 2 0 1 0 1 2 3 0]
                                               documents    [0 0 0 1 1 2 2 2 2 3]

The backbone runs under the attention function registered here as ``usl_packed`` (transformers'
``AttentionInterface``), which reads the ``block_mask`` passed down through the model's forward
keyword arguments. Only causal backbones whose every layer attends to the whole prompt (no sliding
window) can be packed: ``can_pack`` says which.
"""

from __future__ import annotations

from typing import Sequence

import torch

ATTENTION = "usl_packed"
_FLEX: dict = {}


def plan(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into rows of at most ``max_tokens`` tokens, longest first
    (first-fit decreasing: rows end nearly full). ``plan([5, 3, 4, 2], 8) == [[0, 1], [2, 3]]``."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n = lengths[i]
        if n > max_tokens:
            raise ValueError(f"an input of {n} tokens does not fit a packed row of {max_tokens}")
        for r, left in enumerate(room):
            if n <= left:
                rows[r].append(i)
                room[r] -= n
                break
        else:
            rows.append([i])
            room.append(max_tokens - n)
    return rows


def pack(rows: Sequence[Sequence[int]], spans: Sequence[Sequence[Sequence[int]]] | None, pad_id: int, *,
         size: int | None = None, multiple: int = 1) -> dict:
    """One packed row of ``rows`` (token ids). Returns ``input_ids``, ``position_ids`` and
    ``documents`` (``[1, T]``; filler tokens, if any, form one last document of their own) and,
    with ``spans`` (each input's ``[start, end, n]`` rows), the spans shifted to the packed row,
    ``[len(rows), S, 3]``. ``T`` is ``size`` if given, else the total rounded up to ``multiple``
    (fixed sizes let a compiled kernel keep one shape)."""
    total = sum(len(r) for r in rows)
    width = size if size is not None else -(-total // multiple) * multiple
    if total > width:
        raise ValueError(f"{total} tokens do not fit a packed row of {width}")
    ids = torch.full((width,), pad_id, dtype=torch.long)
    pos = torch.zeros(width, dtype=torch.long)
    doc = torch.full((width,), len(rows), dtype=torch.int32)
    at = 0
    shifted = []
    for d, r in enumerate(rows):
        n = len(r)
        ids[at:at + n] = torch.as_tensor(list(r), dtype=torch.long)
        pos[at:at + n] = torch.arange(n)
        doc[at:at + n] = d
        if spans is not None:
            shifted.append([[s + at, e + at, *rest] for s, e, *rest in spans[d]])
        at += n
    pos[at:] = torch.arange(width - at)
    out = {"input_ids": ids[None], "position_ids": pos[None], "documents": doc[None]}
    if spans is not None:
        out["spans"] = torch.tensor(shifted, dtype=torch.long)
    return out


def packed_logits(model, rows: Sequence[Sequence[int]], spans: Sequence, pad_id: int, max_tokens: int,
                  device: str | torch.device) -> list[torch.Tensor]:
    """A span-head model's logits for each input (token ids, span rows), run as packed rows of
    ``max_tokens`` tokens (``plan``). On a GPU every row is padded to exactly ``max_tokens``, so the
    compiled kernels see one shape; elsewhere a row is as long as its inputs. CPU tensors, in order."""
    device = torch.device(device)
    size = max_tokens if device.type == "cuda" else None
    out: list = [None] * len(rows)
    with torch.inference_mode():
        for group in plan([len(r) for r in rows], max_tokens):
            batch = pack([rows[i] for i in group], [spans[i] for i in group], pad_id, size=size)
            logits = model(**{k: v.to(device, non_blocking=True) for k, v in batch.items()}).logits.float().cpu()
            for j, i in enumerate(group):
                out[i] = logits[j]
    return out


def document_mask(documents: torch.Tensor):
    """The flex-attention ``BlockMask`` of ``documents`` ``[1, T]``: causal within a document."""
    from torch.nn.attention.flex_attention import create_block_mask

    doc = documents[0]

    def same_document_causal(b, h, q, kv):
        return (doc[q] == doc[kv]) & (q >= kv)

    t = doc.shape[0]
    return create_block_mask(same_document_causal, None, None, t, t, device=doc.device,
                             _compile=doc.is_cuda)


def _flex_attention(device: torch.device):
    """flex_attention, compiled on a GPU (its fused kernel); eager elsewhere (a reference
    implementation, for tests on the CPU) and inside a graph that is being compiled already."""
    from torch.nn.attention.flex_attention import flex_attention

    if device.type != "cuda" or torch.compiler.is_compiling():
        return flex_attention
    if "cuda" not in _FLEX:
        # dynamic=None: a second row length compiles one kernel for every length, not one for each
        _FLEX["cuda"] = torch.compile(flex_attention)
    return _FLEX["cuda"]


def packed_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                     block_mask=None, **_):
    """transformers' attention-function signature: ``query [B, H, T, D]``, ``key``/``value``
    ``[B, Hkv, T, D]`` -> ``([B, T, H, D], None)``. With no ``block_mask`` (a right-padded batch
    of a causal model, whose real tokens never see the pads after them) it is plain causal SDPA."""
    gqa = key.shape[1] != query.shape[1]
    if block_mask is None:
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling,
                                                                enable_gqa=gqa)
    elif query.device.type != "cuda" and query.requires_grad:
        # flex attention has no backward on the CPU: the same mask, dense, through SDPA (tests' sizes)
        i = torch.arange(query.shape[2], device=query.device)
        dense = block_mask.mask_mod(0, 0, i[:, None], i[None, :])
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=dense, scale=scaling,
                                                                enable_gqa=gqa)
    else:
        out = _flex_attention(query.device)(query, key, value, block_mask=block_mask, scale=scaling,
                                            enable_gqa=gqa)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, packed_attention)


def can_pack(backbone) -> bool:
    """Whether ``backbone`` (maybe LoRA-wrapped) can run packed: its attention goes through
    transformers' attention interface, every attention layer is causal, none has a sliding window."""
    base = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone
    cfg = base.config
    attn = [m for m in base.modules() if hasattr(m, "is_causal") and hasattr(m, "scaling")]
    full = all(t == "full_attention" for t in (getattr(cfg, "layer_types", None) or ["full_attention"]))
    return bool(getattr(base, "_supports_attention_backend", False) and attn
                and all(m.is_causal for m in attn) and full
                and not getattr(cfg, "use_sliding_window", False))


def use_packed_attention(backbone) -> None:
    """Switch ``backbone``'s attention to ``usl_packed`` (raises if it cannot pack)."""
    if not can_pack(backbone):
        raise ValueError(f"{type(backbone).__name__}: this backbone cannot run packed inputs "
                         "(not causal, a sliding window, or no attention interface)")
    _register()
    base = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone
    base.set_attn_implementation(ATTENTION)


def compile_layers(backbone, backend: str = "inductor") -> None:
    """``torch.compile`` each decoder layer in place (one graph serves them all: the layers share
    their code; their weights are its inputs). Fuses the norms, RoPE and activations between the
    matrix products."""
    base = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone
    layers = getattr(base, "layers", None) or getattr(getattr(base, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(base).__name__}: no .layers to compile")
    # room for the row lengths a training run meets before dynamo turns to one dynamic-shape graph
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 32)
    for layer in layers:
        layer.compile(backend=backend)
