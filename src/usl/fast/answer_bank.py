"""Criteria-independent vectors for (query, answer) pairs, computed once and kept.

``AnswerBank.rows(queries, answers)`` returns row indices into growing arrays ``r`` (static MiniLM
answer vector), ``feats`` (raw style features, then the register scores of ``register.py`` when the
model has a register scorer) and ``cos_q`` (query-answer cosine). Rows are
keyed by the (query, answer) strings, so the same answer is embedded once per process. ``preload``
also keeps them in the cache directory, keyed per answer: a folder per bank layout (features and
register scorer) of segment files, each holding the rows of the answers first computed together
with a hash of each (query, answer). A restart loads a benchmark's rows in well under a second, and a
benchmark that gains a model computes that model's answers alone (a cache keyed by the whole answer
set would recompute all 21k). Many small segments are merged into one now and then.

An answer's features (style features and register scores, three quarters of the time to read a new
answer) depend on its text alone: the default board's are shipped beside the weights
(``features-board-<layout>.npz``, written by ``scripts/ship_board_readings.py``), so a first start
computes only their vectors. A table of another layout (other features or register scorer) is
not found by its name, and the features are computed.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import zipfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from usl import atomic
from usl.fast.features import FEATURES, style_features
from usl.fast.register import RegisterScorer
from usl.fast.static_embed import StaticEmbedder
from usl.fast.style_scorer import read_table, text_key, write_table

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
BANK_VERSION = "bank-v2"
MAX_SEGMENTS = 8   # more segment files than this are merged into one
SHIPPED_FEATURES = "features-board-{layout}.npz"
MEMO_SIZE, MEMO_MIN_ROWS = 8, 1000   # rows kept for the last MEMO_SIZE sequences of at least MEMO_MIN_ROWS pairs


class AnswerBank:
    def __init__(self, static: StaticEmbedder, cache_dir: str | Path | None = None, chunk: int = 2000,
                 register: RegisterScorer | None = None, register_overrides: dict[str, np.ndarray] | None = None,
                 shipped: str | Path | None = None):
        """``register_overrides``: answer text -> register scores to use instead of the scorer's
        (training uses it for cross-fitted scores of the answers the scorer was fitted on).
        ``shipped``: the folder of the weights, where the default board's features may be."""
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
        self.shipped = Path(shipped) if shipped else None
        self._known: dict[bytes, np.ndarray] | None = None     # answer text key -> features, shipped
        self._rows_memo: dict[tuple[int, int], tuple[Sequence[str], Sequence[str], np.ndarray]] = {}
        # a server's threads share the bank (a reward slice adding answers while a board reads it): rows are
        # appended under this lock, arrays before the index, so a row the index gives is always in the arrays
        self._growing = threading.Lock()

    def __len__(self) -> int:
        return len(self._index)

    def rows(self, queries: Sequence[str], answers: Sequence[str],
             progress: Progress | None = None) -> np.ndarray:
        """Each (query, answer)'s row (read-only), reading the answers the bank lacks first.

        The rows of the last few long pairs of sequences are kept by the sequences' identity: a board hands the
        same lists (``Answers.pair_texts`` keeps them per selection) to its judge for every board and for each
        criterion of its breakdown, and finding 21k pairs in the index takes ~25 ms each time. A row never
        changes once given (the bank only grows); a caller must not change a sequence it passed in place."""
        memo_key = (id(queries), id(answers))
        hit = self._rows_memo.get(memo_key)
        if hit is not None and hit[0] is queries and hit[1] is answers and len(hit[2]) == len(queries):
            return hit[2]
        keys = list(zip(queries, answers))
        index = self._index
        new = list(dict.fromkeys(k for k in keys if k not in index))
        if new:
            self._add(new, progress)
        rows = np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))
        rows.setflags(write=False)
        if len(keys) >= MEMO_MIN_ROWS:
            memo = self._rows_memo
            if len(memo) >= MEMO_SIZE:
                memo.pop(next(iter(memo)), None)
            memo[memo_key] = (queries, answers, rows)
        return rows

    def preload(self, queries: Sequence[str], answers: Sequence[str],
                progress: Progress | None = None) -> np.ndarray:
        """Like ``rows``, but reads answers computed before from the cache directory and saves the
        ones it computes there (a benchmark's answers)."""
        keys = list(dict.fromkeys(zip(queries, answers)))
        folder = self._cache_folder()
        if folder is not None:
            self._load_cached(folder, [k for k in keys if k not in self._index])
            if not self._segments(folder):
                self._load_whole_set(keys)
        new = [k for k in keys if k not in self._index]
        rows = self.rows(queries, answers, progress)
        if folder is not None and keys and (new or not self._segments(folder)):
            self._save_segment(folder, new or keys)
        return rows

    def layout(self) -> str:
        """Names what a row holds: the bank's version, its features and the register scorer's weights."""
        h = hashlib.sha256(BANK_VERSION.encode())
        h.update(",".join(self.feature_names).encode())
        if self.register is not None:
            h.update(self.register.fingerprint.encode())
        return h.hexdigest()[:20]

    def _cache_folder(self) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"bank_{self.layout()}"

    def _load_whole_set(self, keys: list[tuple[str, str]]) -> None:
        """Rows from a cache in the ``bank-v1`` layout (one file per answer set), so that a data directory
        in that layout is not recomputed; they are saved as a segment."""
        h = hashlib.sha256(b"bank-v1")
        h.update(",".join(self.feature_names).encode())
        if self.register is not None:
            h.update(self.register.fingerprint.encode())
        for q, a in keys:
            h.update(q.encode() + b"\0" + a.encode() + b"\1")
        path = self.cache_dir / f"answers_{h.hexdigest()[:20]}.npz"
        if path.exists():
            try:
                with np.load(path, allow_pickle=False) as z:
                    self._append(keys, z["r"], z["feats"], z["cos_q"])
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
                log.warning("ignoring unreadable answer cache %s (%s)", path, e)

    @staticmethod
    def _key_hash(key: tuple[str, str]) -> str:
        h = hashlib.sha256(key[0].encode())
        h.update(b"\0")
        h.update(key[1].encode())
        return h.hexdigest()[:32]

    def _segments(self, folder: Path) -> list[Path]:
        return sorted(folder.glob("seg_*.npz")) if folder.is_dir() else []

    def _load_cached(self, folder: Path, wanted: list[tuple[str, str]]) -> None:
        """Append the rows of ``wanted`` that some segment holds."""
        by_hash = {self._key_hash(k): k for k in wanted}
        for seg in self._segments(folder):
            if not by_hash:
                return
            try:
                with np.load(seg, allow_pickle=False) as z:
                    hashes = z["key"].tolist()
                    take = [i for i, h in enumerate(hashes) if h in by_hash]
                    if take:
                        self._append([by_hash[hashes[i]] for i in take], z["r"][take], z["feats"][take],
                                     z["cos_q"][take])
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:  # a torn file: recompute
                log.warning("ignoring unreadable answer cache %s (%s)", seg, e)
                continue
            for i in take:
                by_hash.pop(hashes[i], None)

    def _save_segment(self, folder: Path, keys: list[tuple[str, str]]) -> None:
        """Save the rows of ``keys`` as a segment; past ``MAX_SEGMENTS`` files, merge them all into one."""
        idx = np.fromiter((self._index[k] for k in keys), dtype=np.int64, count=len(keys))
        arrays = {"key": np.array([self._key_hash(k) for k in keys]), "r": self.r[idx], "feats": self.feats[idx],
                  "cos_q": self.cos_q[idx]}
        segments = self._segments(folder)
        if len(segments) >= MAX_SEGMENTS:
            arrays = _merged([_read(seg) for seg in segments] + [arrays])
        name = folder / f"seg_{hashlib.sha256(''.join(arrays['key'].tolist()).encode()).hexdigest()[:20]}.npz"
        try:
            atomic.savez(name, **arrays)
        except OSError as e:  # a full disk or a read-only home costs a recomputation later, not the run
            log.warning("could not write the answer cache in %s (%s)", folder, e)
            return
        if len(segments) >= MAX_SEGMENTS:
            for seg in segments:
                if seg != name:
                    seg.unlink(missing_ok=True)

    def _add(self, keys: list[tuple[str, str]], progress: Progress | None) -> None:
        from tqdm.auto import tqdm

        rs, fs, cs = [], [], []
        bar = tqdm(total=len(keys), desc="embedding answers", unit="answer", disable=True if len(keys) < 5000 else None)
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
        """(n, len(feature_names)): the shipped row of each answer that has one, the others computed."""
        known = self._shipped_features()
        keys = [text_key(a) for a in answers] if known else []
        todo = [i for i, k in enumerate(keys) if k not in known] if known else list(range(len(answers)))
        if len(todo) == len(answers):
            return self._compute_features(answers)
        out = np.stack([known.get(k, np.zeros(len(self.feature_names), np.float32)) for k in keys])
        if todo:
            out[todo] = self._compute_features([answers[i] for i in todo])
        return out

    def _shipped_features(self) -> dict[bytes, np.ndarray]:
        if self._known is None:
            path = self.shipped / SHIPPED_FEATURES.format(layout=self.layout()) if self.shipped else None
            self._known = {}
            if path is not None and path.is_file() and not self.register_overrides:
                try:
                    self._known = read_table(path, len(self.feature_names))
                except ValueError as e:       # a damaged install: the features are computed
                    log.warning("%s", e)
        return self._known

    def save_shipped(self, answers: Sequence[str], folder: str | Path) -> Path:
        """Write the features of ``answers`` (a benchmark's, read by this bank) as the table a bank of
        this layout finds in ``folder``; tables of other layouts there are removed (they would never
        be read again)."""
        folder = Path(folder)
        path = folder / SHIPPED_FEATURES.format(layout=self.layout())
        keys = list(dict.fromkeys(answers))
        feats = self._compute_features(keys)
        table = dict(zip((text_key(a) for a in keys), feats))
        for old in folder.glob(SHIPPED_FEATURES.format(layout="*")):
            if old != path:
                old.unlink()
        write_table(path, table)
        return path

    def _compute_features(self, answers: list[str]) -> np.ndarray:
        f = style_features(answers)
        if self.register is None:
            return f
        reg = self.register.scores(answers)
        if self.register_overrides:
            for i, a in enumerate(answers):
                if a in self.register_overrides:
                    reg[i] = self.register_overrides[a]
        return np.concatenate([f, reg], 1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(r, feats, cos_q)`` of one moment, of equal length (another thread may be appending)."""
        with self._growing:
            return self.r, self.feats, self.cos_q

    def _append(self, keys, r, feats, cos_q) -> None:
        with self._growing:
            base = len(self.r)
            fresh = [i for i, k in enumerate(keys) if k not in self._index]
            self.r = np.concatenate([self.r, r[fresh]])
            self.feats = np.concatenate([self.feats, feats[fresh]])
            self.cos_q = np.concatenate([self.cos_q, cos_q[fresh]])
            for j, i in enumerate(fresh):
                self._index[keys[i]] = base + j


def _read(segment: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(segment, allow_pickle=False) as z:
            return {k: z[k] for k in ("key", "r", "feats", "cos_q")}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        log.warning("dropping unreadable answer cache %s (%s)", segment, e)
        return None


def _merged(parts: list[dict[str, np.ndarray] | None]) -> dict[str, np.ndarray]:
    """The segments' rows as one, each answer once (its first row)."""
    parts = [p for p in parts if p is not None]
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    _, first = np.unique(joined["key"], return_index=True)
    keep = np.sort(first)
    return {k: v[keep] for k, v in joined.items()}
