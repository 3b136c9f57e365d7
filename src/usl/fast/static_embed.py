"""Static token embeddings distilled from all-MiniLM-L6-v2, for embedding long answers fast.

Why: the interactive leaderboard needs a criteria-independent vector for each of ~21,000 answers,
computed once per benchmark on a 2-core CPU. The full MiniLM encoder manages about 20-40 answers a
second there (10+ minutes). Instead we run MiniLM once over every vocabulary token on its own
(``[CLS] tok [SEP]``, mean-pooled exactly as sentence-transformers pools a sentence), keep that
table, and embed an answer as the IDF-weighted mean of its tokens' vectors (the Model2Vec recipe).
That runs at thousands of answers a second and lands in (roughly) the same space as MiniLM's
sentence embeddings, so a criterion embedded by the real encoder can be compared with it.

The table (30,522 x 384) ships with the default judge's weights (``fast-crm/static_table.npz``: int8 with a
scale a row, 10 MB; an answer's vector moves by cosine 0.99999 at worst from the float16 table's), so a new
data directory starts without building it. Weights without one build it on first use (about 12 s on 2
cores, ONNX Runtime) and cache it as ``.npy`` in the cache directory, keyed by the encoder's identity.
``python -m usl.fast.static_embed OUT.npz`` writes the shipped file.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from usl.data.encoder import DIM, encoder_path
from usl.data.minilm_onnx import frozen

log = logging.getLogger(__name__)
TABLE_VERSION = "static-minilm-v1"
STATIC_TABLE = "static_table.npz"      # the shipped table's name in a weights folder


def _table_path(cache_dir: Path) -> Path:
    tag = hashlib.sha256(f"{TABLE_VERSION}\0{encoder_path()}".encode()).hexdigest()[:12]
    return cache_dir / f"static_minilm_{tag}.npy"


def build_table(batch_size: int = 1024, show_progress: bool = True, cache: str | Path | None = None) -> np.ndarray:
    """Run MiniLM over each vocabulary token alone; return (vocab, 384) float16, L2-normalised. MiniLM runs on
    ONNX Runtime (``usl.data.minilm_onnx``, exported into ``cache`` if it lacks it), so building the table
    imports no torch."""
    from tqdm.auto import tqdm

    encoder = frozen(cache)
    vocab = encoder.tokenizer.get_vocab_size(with_added_tokens=False)
    out = np.zeros((vocab, DIM), np.float32)
    for start in tqdm(range(0, vocab, batch_size), desc="distilling static embeddings",
                      disable=not show_progress, unit="batch"):
        ids = np.arange(start, min(start + batch_size, vocab), dtype=np.int64)
        x = np.stack([np.full_like(ids, encoder.cls), ids, np.full_like(ids, encoder.sep)], 1)
        h = encoder.run_ids(x, np.ones_like(x))[-1].mean(1)
        out[start:start + len(ids)] = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float16)


def save_shipped(table: np.ndarray, path: str | Path) -> None:
    """The table as int8 with a float32 scale a row (symmetric, the row's largest magnitude at 127)."""
    t = np.asarray(table, np.float32)
    scale = np.maximum(np.abs(t).max(1), 1e-12) / 127.0
    q = np.clip(np.round(t / scale[:, None]), -127, 127).astype(np.int8)
    np.savez_compressed(path, q=q, scale=scale.astype(np.float32), version=np.array(TABLE_VERSION))


def load_shipped(path: str | Path) -> np.ndarray:
    """A :func:`save_shipped` file as the float16 table; a file that is not one is named."""
    try:
        with np.load(path) as d:
            if str(d["version"]) != TABLE_VERSION:
                raise ValueError(f"version {d['version']}, not {TABLE_VERSION}")
            table = d["q"].astype(np.float32) * d["scale"][:, None]
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(f"{path}: not a static embedding table ({e})") from None
    if table.ndim != 2 or table.shape[1] != DIM:
        raise ValueError(f"{path}: not a static embedding table (shape {table.shape})")
    return table.astype(np.float16)


class StaticEmbedder:
    """``encode(texts) -> (n, 384) float32`` L2-normalised; ``idf`` weights tokens (ones if None); ``shipped``:
    a :func:`save_shipped` table to use instead of building one."""

    def __init__(self, cache_dir: str | Path, idf: np.ndarray | None = None, max_tokens: int = 2048,
                 shipped: str | Path | None = None):
        self.cache_dir = Path(cache_dir)
        self.shipped = Path(shipped) if shipped else None
        self.max_tokens = max_tokens
        self._table: np.ndarray | None = None
        self._tok = None
        self.idf = idf

    @property
    def tokenizer(self):
        """MiniLM's word pieces, read by ``tokenizers`` from the packaged ``tokenizer.json`` (the ids
        transformers' tokenizer gives; no torch)."""
        if self._tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(Path(encoder_path()) / "tokenizer.json"))
            tok.no_truncation()
            tok.no_padding()
            self._tok = tok
        return self._tok

    @property
    def table(self) -> np.ndarray:
        if self._table is None:
            path = _table_path(self.cache_dir)
            if self.shipped is not None and self.shipped.is_file():
                self._table = load_shipped(self.shipped)
            elif path.exists():
                self._table = np.load(path)
            else:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                table = build_table(cache=self.cache_dir.parent)
                tmp = path.with_name(path.stem + ".tmp.npy")
                np.save(tmp, table)
                tmp.replace(path)
                self._table = table
        return self._table

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's word pieces, without [CLS] and [SEP], the first ``max_tokens`` of them."""
        return [e.ids[:self.max_tokens] for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Weighted mean of token vectors as one sparse-dense product."""
        from scipy import sparse

        table = self.table
        rows = np.repeat(np.arange(len(ids)), [len(x) for x in ids])
        cols = np.fromiter((t for x in ids for t in x), dtype=np.int64, count=len(rows))
        w = self.idf[cols] if self.idf is not None else np.ones(len(cols), np.float32)
        m = sparse.csr_matrix((w.astype(np.float32), (rows, cols)), shape=(len(ids), table.shape[0]))
        out = np.asarray(m @ table.astype(np.float32))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-8)).astype(np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_ids(self.token_ids(texts))


def fit_idf(ids: list[list[int]], vocab_size: int) -> np.ndarray:
    """Smoothed IDF over documents (token-id lists): log((1 + N) / (1 + df)) + 1."""
    df = np.zeros(vocab_size, np.float64)
    for x in ids:
        df[np.unique(np.asarray(x, dtype=np.int64))] += 1
    return (np.log((1 + len(ids)) / (1 + df)) + 1).astype(np.float32)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m usl.fast.static_embed OUT.npz  (builds the table and writes it as shipped)")
    save_shipped(build_table(), sys.argv[1])
    print(sys.argv[1])
