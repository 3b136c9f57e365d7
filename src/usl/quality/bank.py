"""Stored quality readings: one number per (query, answer, baseline) pair, read once.

A board compares every model's answer with the baseline's, and the quality reading of such a pair
does not depend on the user's criteria; so it is read once per pair, by whatever judge supplies it
(the shipped quality reader, a ``crm:PATH`` trained on a GPU, an ``llm:...`` judge), and stored
here. A bank is a cache of one reader, named by that reader's identity: readings of another reader
never mix in.

Values are logits ``Q(A, B)`` (``log P(A better) - log P(B better)``), antisymmetric: a pair
stored as (answer, baseline) is looked up in either orientation, the other one negated.

Files: ``<weights>/bank-<name>.npz`` shipped beside a reader, and ``<home>/cache/quality/
<identity digest>.npz`` for everything read on this machine, saved every ``save_every`` pairs
(atomically), so a killed fill resumes where it stopped.

GPU path (no server stack there)::

    python3 -m usl.judges.quality --judge quality:RUN --board board.json.xz --out bank-board.npz
"""

from __future__ import annotations

import hashlib
import logging
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from usl import atomic
from usl.crm.factored import pair_key

log = logging.getLogger(__name__)
BANK_FORMAT = "usl-quality-bank/1"
Reader = Callable[[Sequence[str], Sequence[str], Sequence[str]], np.ndarray]
Progress = Callable[[int, int], None]


class QualityBank:
    """``keys`` [n, 16] uint8 (:func:`~usl.crm.factored.pair_key` of (query, answer, baseline)),
    ``values`` [n] float32 logits, ``reader``: the identity of the judge that read them."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, reader: str):
        if keys.shape != (len(values), 16):
            raise ValueError(f"keys {keys.shape} do not match {len(values)} values")
        self.keys, self.values, self.reader = keys, values.astype(np.float32), reader
        self._index = {bytes(k): i for i, k in enumerate(keys)}

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def empty(cls, reader: str) -> QualityBank:
        return cls(np.zeros((0, 16), np.uint8), np.zeros(0, np.float32), reader)

    def add(self, keys: Sequence[bytes], values: np.ndarray) -> None:
        new = [(k, float(v)) for k, v in zip(keys, values) if k not in self._index]
        if not new:
            return
        start = len(self.values)
        self.keys = np.concatenate([self.keys, np.frombuffer(b"".join(k for k, _ in new), np.uint8).reshape(-1, 16)])
        self.values = np.concatenate([self.values, np.array([v for _, v in new], np.float32)])
        self._index.update({k: start + i for i, (k, _) in enumerate(new)})

    def absorb(self, other: QualityBank) -> int:
        """Add the readings of ``other`` this bank lacks, in place; returns how many were new."""
        if other.reader != self.reader:
            raise ValueError(f"cannot merge readings of {other.reader} into a bank of {self.reader}")
        before = len(self)
        self.add([bytes(k) for k in other.keys], other.values)
        return len(self) - before

    def merged(self, other: QualityBank) -> QualityBank:
        out = QualityBank(self.keys.copy(), self.values.copy(), self.reader)
        out.absorb(other)
        return out

    def lookup(self, queries: Sequence[str], answers: Sequence[str], baselines: Sequence[str]) -> np.ndarray:
        """``Q(answer, baseline)`` of each pair, NaN where neither orientation is stored."""
        out = np.full(len(queries), np.nan, np.float32)
        for i, (q, a, b) in enumerate(zip(queries, answers, baselines)):
            j = self._index.get(pair_key(q, a, b))
            if j is not None:
                out[i] = self.values[j]
            else:
                j = self._index.get(pair_key(q, b, a))
                if j is not None:
                    out[i] = -self.values[j]
        return out

    def save(self, path: Path) -> None:
        """Atomically: a killed save leaves the old file."""
        atomic.savez(path, compress=True, format=np.array(BANK_FORMAT), reader=np.array(self.reader),
                     keys=self.keys, values=self.values)

    @classmethod
    def load(cls, path: Path) -> QualityBank:
        try:
            z = np.load(path)
            if str(z["format"]) != BANK_FORMAT:
                raise ValueError(f"format {str(z['format'])!r}, expected {BANK_FORMAT}")
            return cls(z["keys"], z["values"], str(z["reader"]))
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise ValueError(f"{path}: not a quality bank ({e})") from None


def home_path(cache_dir: Path, reader: str) -> Path:
    """Where this machine keeps ``reader``'s readings."""
    return cache_dir / "quality" / f"{hashlib.sha256(reader.encode()).hexdigest()[:16]}.npz"


def fill(bank: QualityBank, read: Reader, queries: Sequence[str], answers: Sequence[str],
         baselines: Sequence[str], *, path: Path | None = None, batch: int = 64, save_every: int = 512,
         progress: Progress | None = None) -> np.ndarray:
    """Read the pairs ``bank`` lacks with ``read`` (a batch at a time), store them, and return
    every pair's reading. ``progress(done, total)`` before the first batch and after each; raising
    from it stops the fill. With ``path`` the bank is saved every ``save_every`` new pairs and at
    the end, stopped or not, so a killed fill loses at most that many."""
    have = bank.lookup(queries, answers, baselines)
    todo = [i for i in np.flatnonzero(np.isnan(have))]
    seen: dict[bytes, int] = {}
    todo = [i for i in todo if seen.setdefault(pair_key(queries[i], answers[i], baselines[i]), i) == i]
    if progress and todo:
        progress(0, len(todo))      # a caller that stops by raising from it stops before the first batch
    unsaved = 0
    try:
        for k in range(0, len(todo), batch):
            idx = todo[k:k + batch]
            vals = read([queries[i] for i in idx], [answers[i] for i in idx], [baselines[i] for i in idx])
            bank.add([pair_key(queries[i], answers[i], baselines[i]) for i in idx], np.asarray(vals))
            unsaved += len(idx)
            if progress:
                progress(min(k + batch, len(todo)), len(todo))
            if path is not None and unsaved >= save_every:
                _save_shared(bank, path)
                unsaved = 0
    finally:        # stopped (a request that left, Ctrl-C) or done: what was read is kept
        if path is not None and unsaved:
            _save_shared(bank, path)
    return bank.lookup(queries, answers, baselines)


def _save_shared(bank: QualityBank, path: Path) -> None:
    """Save ``bank`` to a file other processes of the same data directory also write: the readings
    they stored since are merged in first, so none is lost."""
    stored = stored_bank(path, bank.reader)
    if stored is not None:
        bank.absorb(stored)
    bank.save(path)


def stored_bank(path: Path, reader: str) -> QualityBank | None:
    """``reader``'s bank saved at ``path``; None when there is none, or a torn or foreign file (named)."""
    if not path.is_file():
        return None
    try:
        stored = QualityBank.load(path)
        if stored.reader != reader:
            raise ValueError(f"{path}: readings of {stored.reader}, not {reader}")
        return stored
    except ValueError as e:
        log.warning("%s; reading its pairs again", e)
        return None
