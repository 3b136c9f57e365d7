"""Criteria-independent vectors for (query, answer) pairs, computed once and kept.

``AnswerBank.rows(queries, answers)`` returns row indices into growing arrays ``r`` (static MiniLM
answer vector), ``feats`` (raw style features, then the register scores of ``register.py`` when the
model has a register scorer) and ``cos_q`` (query-answer cosine). Rows are
keyed by the (query, answer) strings, so the same answer is embedded once per process; a whole
benchmark's arrays are also saved to the cache directory as one ``.npz`` keyed by a content hash,
so a restart loads them in well under a second instead of recomputing.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from usl import atomic
from usl.crm.features import FEATURES, style_features
from usl.crm.register import RegisterScorer
from usl.crm.static_embed import StaticEmbedder

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
BANK_VERSION = "bank-v1"


class AnswerBank:
    def __init__(self, static: StaticEmbedder, cache_dir: str | Path | None = None, chunk: int = 2000,
                 register: RegisterScorer | None = None, register_overrides: dict[str, np.ndarray] | None = None):
        """``register_overrides``: answer text -> register scores to use instead of the scorer's
        (training uses it for cross-fitted scores of the answers the scorer was fitted on)."""
        self.static = static
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.chunk = chunk
        self.register = register
        self.register_overrides = register_overrides or {}
        self.feature_names = FEATURES + (register.names if register else ())
        self._index: dict[tuple[str, str], int] = {}
        self.r = np.zeros((0, 384), np.float32)
        self.feats = np.zeros((0, len(self.feature_names)), np.float32)
        self.cos_q = np.zeros((0,), np.float32)

    def __len__(self) -> int:
        return len(self._index)

    def rows(self, queries: Sequence[str], answers: Sequence[str],
             progress: Progress | None = None) -> np.ndarray:
        keys = list(zip(queries, answers))
        index = self._index
        new = list(dict.fromkeys(k for k in keys if k not in index))
        if new:
            self._add(new, progress)
        return np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))

    def preload(self, queries: Sequence[str], answers: Sequence[str],
                progress: Progress | None = None) -> np.ndarray:
        """Like ``rows`` but loads/saves the whole set as one cached file (a benchmark's answers)."""
        keys = list(dict.fromkeys(zip(queries, answers)))
        path = self._cache_path(keys)
        if path is not None and path.exists() and not all(k in self._index for k in keys):
            try:
                z = np.load(path)
                self._append(keys, z["r"], z["feats"], z["cos_q"])
            except (OSError, ValueError, KeyError) as e:  # a torn file: recompute
                log.warning("ignoring unreadable answer cache %s (%s)", path, e)
        rows = self.rows(queries, answers, progress)
        if path is not None and not path.exists():
            idx = np.fromiter((self._index[k] for k in keys), dtype=np.int64, count=len(keys))
            atomic.savez(path, r=self.r[idx], feats=self.feats[idx], cos_q=self.cos_q[idx])
        return rows

    def _cache_path(self, keys: list[tuple[str, str]]) -> Path | None:
        if self.cache_dir is None:
            return None
        h = hashlib.sha256(BANK_VERSION.encode())
        h.update(",".join(self.feature_names).encode())
        if self.register is not None:
            h.update(self.register.fingerprint.encode())
        for q, a in keys:
            h.update(q.encode())
            h.update(b"\0")
            h.update(a.encode())
            h.update(b"\1")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return self.cache_dir / f"answers_{h.hexdigest()[:20]}.npz"

    def _add(self, keys: list[tuple[str, str]], progress: Progress | None) -> None:
        from tqdm.auto import tqdm

        rs, fs, cs = [], [], []
        bar = tqdm(total=len(keys), desc="embedding answers", unit="answer", disable=len(keys) < 5000)
        for start in range(0, len(keys), self.chunk):
            part = keys[start:start + self.chunk]
            qs = [q for q, _ in part]
            ans = [a for _, a in part]
            r = self.static.encode(ans)
            uq = list(dict.fromkeys(qs))
            qv = dict(zip(uq, self.static.encode(uq)))
            cs.append(np.einsum("nd,nd->n", r, np.stack([qv[q] for q in qs])).astype(np.float32))
            rs.append(r)
            fs.append(self._features(ans))
            bar.update(len(part))
            if progress:
                progress(min(start + self.chunk, len(keys)), len(keys))
        bar.close()
        self._append(keys, np.concatenate(rs), np.concatenate(fs), np.concatenate(cs))

    def _features(self, answers: list[str]) -> np.ndarray:
        f = style_features(answers)
        if self.register is None:
            return f
        reg = self.register.scores(answers)
        if self.register_overrides:
            for i, a in enumerate(answers):
                if a in self.register_overrides:
                    reg[i] = self.register_overrides[a]
        return np.concatenate([f, reg], 1)

    def _append(self, keys, r, feats, cos_q) -> None:
        base = len(self.r)
        fresh = [i for i, k in enumerate(keys) if k not in self._index]
        for j, i in enumerate(fresh):
            self._index[keys[i]] = base + j
        self.r = np.concatenate([self.r, r[fresh]])
        self.feats = np.concatenate([self.feats, feats[fresh]])
        self.cos_q = np.concatenate([self.cos_q, cos_q[fresh]])
