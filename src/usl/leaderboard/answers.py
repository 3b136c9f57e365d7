"""A benchmark held in memory: queries, answers, answer lengths and content fingerprints.

Loaded once per service instance (one SQLite read of ~20k answers) and reused by every
leaderboard, so a cached leaderboard never touches the responses table again. The per-answer
fingerprints and word counts (~0.3 s to compute for AlpacaEval) can be saved to and restored from
an ``.npz`` file named after the benchmark's content version, so a new process skips that work.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np

from usl.types import Benchmark

_MASK = (1 << 63) - 1


def fingerprint(text: str) -> int:
    """63-bit content hash of one text (blake2b), stable across processes."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") & _MASK


def pair_fingerprint(fq: int, fm: int, fb: int) -> int:
    """Order-sensitive 63-bit combination of the query, model-answer and baseline-answer hashes."""
    h = hashlib.blake2b(digest_size=8)
    h.update(fq.to_bytes(8, "little") + fm.to_bytes(8, "little") + fb.to_bytes(8, "little"))
    return int.from_bytes(h.digest(), "little") & _MASK


@dataclass
class Answers:
    benchmark: Benchmark
    responses: dict[tuple[str, str], str]            # (query_id, model) -> text
    _fp: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _qfp: dict[str, int] = field(default_factory=dict, repr=False)
    _words: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _grids: dict[tuple, "PairGrid"] = field(default_factory=dict, repr=False)
    _lengths: dict[tuple, np.ndarray] = field(default_factory=dict, repr=False)
    _texts: dict[tuple, tuple[list[str], list[str], list[str]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.query_text = {q.id: q.text for q in self.benchmark.queries}
        self.query_pos = {q.id: i for i, q in enumerate(self.benchmark.queries)}

    @property
    def name(self) -> str:
        return self.benchmark.name

    def answer(self, query_id: str, model: str) -> str | None:
        return self.responses.get((query_id, model))

    def all_answers(self) -> tuple[list[str], list[str]]:
        """(query texts, answer texts) of every stored answer, queries in order, models by name."""
        qs, ans = [], []
        for q in self.benchmark.queries:
            for m in self.benchmark.models:
                t = self.responses.get((q.id, m))
                if t is not None:
                    qs.append(q.text)
                    ans.append(t)
        return qs, ans

    def restore(self, path: Path) -> bool:
        """Load saved fingerprints and word counts; False when the file is absent or unreadable."""
        try:
            with np.load(path, allow_pickle=False) as z:
                keys = list(zip(z["q"].tolist(), z["m"].tolist()))
                self._fp.update(zip(keys, z["fp"].tolist()))
                self._words.update(zip(keys, z["words"].tolist()))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            return False
        return True

    def persist(self, path: Path) -> None:
        """Compute every answer's fingerprint and word count and save them (atomic rename)."""
        keys = list(self.responses)
        fps = [self._text_fp(q, m) for q, m in keys]
        words = [self._word_count(q, m) for q, m in keys]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
        np.savez(tmp, q=np.array([k[0] for k in keys]), m=np.array([k[1] for k in keys]),
                 fp=np.array(fps, dtype=np.int64), words=np.array(words, dtype=np.int64))
        os.replace(tmp, path)

    def _word_count(self, query_id: str, model: str) -> int:
        n = self._words.get((query_id, model))
        if n is None:
            n = self._words[(query_id, model)] = len(self.responses[(query_id, model)].split())
        return n

    def content(self, query_id: str, model: str, baseline: str) -> int:
        """Fingerprint of (query, model answer, baseline answer); both answers must exist."""
        fq = self._qfp.get(query_id)
        if fq is None:
            fq = self._qfp[query_id] = fingerprint(self.query_text[query_id])
        return pair_fingerprint(fq, self._text_fp(query_id, model), self._text_fp(query_id, baseline))

    def _text_fp(self, query_id: str, model: str) -> int:
        key = (query_id, model)
        fp = self._fp.get(key)
        if fp is None:
            fp = self._fp[key] = fingerprint(self.responses[key])
        return fp

    def grid(self, baseline: str, models: tuple[str, ...], query_ids: tuple[str, ...]) -> "PairGrid":
        """Which (model, query) pairs can be judged, and their content fingerprints; memoised."""
        key = (baseline, models, query_ids)
        g = self._grids.get(key)
        if g is None:
            content = np.full((len(models), len(query_ids)), -1, dtype=np.int64)
            for j, q in enumerate(query_ids):
                if (q, baseline) not in self.responses:
                    continue
                for i, m in enumerate(models):
                    if (q, m) in self.responses:
                        content[i, j] = self.content(q, m, baseline)
            g = self._grids[key] = PairGrid(models, query_ids, content)
        return g

    def pair_texts(self, grid: "PairGrid", baseline: str) -> tuple[list[str], list[str], list[str]]:
        """(queries, model answers, baseline answers) of the grid's answered pairs, in
        ``np.nonzero(grid.answered)`` order; memoised per grid."""
        key = (baseline, grid.models, grid.query_ids)
        if key not in self._texts:
            rows, cols = np.nonzero(grid.answered)
            qids = [grid.query_ids[j] for j in cols.tolist()]
            self._texts[key] = ([self.query_text[q] for q in qids],
                                [self.responses[(q, grid.models[i])] for q, i in zip(qids, rows.tolist())],
                                [self.responses[(q, baseline)] for q in qids])
        return self._texts[key]

    def lengths(self, models: list[str], query_ids: list[str]) -> np.ndarray:
        """(len(models), len(query_ids)) answer lengths in whitespace words; NaN when missing. Memoised."""
        key = (tuple(models), tuple(query_ids))
        if key not in self._lengths:
            self._lengths[key] = self._count_words(models, query_ids)
            self._lengths[key].setflags(write=False)
        return self._lengths[key]

    def _count_words(self, models: list[str], query_ids: list[str]) -> np.ndarray:
        out = np.full((len(models), len(query_ids)), np.nan)
        for i, m in enumerate(models):
            for j, q in enumerate(query_ids):
                if (q, m) in self.responses:
                    out[i, j] = self._word_count(q, m)
        return out


@dataclass(frozen=True)
class PairGrid:
    """The judgeable pairs of one (baseline, models, queries) selection.

    ``content[i, j]``: fingerprint of (query j, model i's answer, the baseline's answer), or -1 when
    either answer is missing (the pair is not judged and its score stays NaN).
    """

    models: tuple[str, ...]
    query_ids: tuple[str, ...]
    content: np.ndarray

    @property
    def answered(self) -> np.ndarray:
        return self.content >= 0

    def pairs(self) -> list[tuple[int, int]]:
        return [(int(i), int(j)) for i, j in zip(*np.nonzero(self.answered))]
