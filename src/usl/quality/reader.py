"""The quality term of a judge: its gate, the reader the gate weighs, and that reader's stored readings.

The reader is passed in, already chosen (``usl.judges.fast`` builds it from the judge spec): whatever reads
``Q(A, B)`` of a pair (:class:`PairReader`), whether a CRM on this machine or an LLM over the network.
Nothing here knows a judge by its name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from usl import paths
from usl.quality.bank import Progress, QualityBank, fill, home_path, stored_bank
from usl.quality.gate import QualityGate

log = logging.getLogger(__name__)
# pairs a reading that its requester may stop reads between two progress calls: the shipped reader's
# longest call of 2 pairs took 1.3-1.9 s on 2 shared cores (of 4: 2.6 s; of 16: 5.3-5.8 s), at 1.2-1.6
# pairs/s against 2.8-3.0 in calls of 16 (scripts/bench_quality_reader.py --pairs 32 --call-pairs N)
FINE_BATCH = 2


@runtime_checkable
class PairReader(Protocol):
    """What the quality term asks of its reader: ``Q(A, B)`` of each pair, shape (n,), as an order-averaged
    logit, and an identity that names its readings (the bank's key)."""

    @property
    def identity(self) -> str:
        ...

    def readings(self, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
        ...


class QualityReading:
    """The quality term of a judge: its gate (``usl.quality.gate``), the reader it was fitted for, and
    that reader's stored readings (every shipped bank beside the reader's weights, then this machine's).
    Pairs not stored are read on demand by the reader itself and stored: the bank is a cache of the
    reader, never another model."""

    def __init__(self, gate: QualityGate, home: str | Path | None, load_reader: Callable[..., PairReader], *,
                 local: bool, shipped: Sequence[Path] = ()):
        """``load_reader(**options)``: the reader whose identity is ``gate.reader_identity``, loaded on the
        first pair to read (a local one with ``batch_size``); ``local``: it spends this machine's CPU (a CRM),
        not requests over the network (an LLM); ``shipped``: banks of its readings that came with its weights."""
        self.gate = gate
        self.home = home
        self.local = local
        self._load_reader = load_reader
        self._shipped = list(shipped)
        self._reader: PairReader | None = None
        self._bank: QualityBank | None = None
        # a board asks for the same pairs at every request: their readings by the pair lists' hash (the
        # strings' hashes are cached by Python, so this costs milliseconds where a lookup costs 0.1 s)
        self._memo: dict[tuple[int, int, int, int], np.ndarray] = {}
        self._path = home_path(paths.cache_dir(home), gate.reader_identity)
        self._stamp: int | None = None   # the home file's mtime when last merged
        # one reading at a time: two boards of the same new pairs (a board and its default, in one request)
        # read them once, the second waiting for the first; and the bank grows from one thread
        self._reading = threading.Lock()

    @property
    def reader(self) -> PairReader:
        if self._reader is None:
            # 16 pairs a forward: 1.6 pairs/s on 2 busy cores against 4 (scripts/bench_quality_reader.py)
            options = {"batch_size": 16} if self.local else {}
            self._reader = self._load_reader(**options)
            if self._reader.identity != self.gate.reader_identity:
                raise ValueError(f"the quality gate was fitted for {self.gate.reader_identity}, but "
                                 f"{self.gate.reader!r} is now {self._reader.identity}: refit it "
                                 "(usl quality fit-gate)")
        return self._reader

    @property
    def bank(self) -> QualityBank:
        if self._bank is None:
            bank = QualityBank.empty(self.gate.reader_identity)
            for path in self._shipped:
                bank.absorb(QualityBank.load(path))
            self._bank = bank
            self._refresh()
        return self._bank

    def _refresh(self) -> bool:
        """Merge this data directory's file when it changed since it was last read (another process,
        ``usl data add-model`` beside a running server, stores its readings there); True when that
        brought readings this bank lacked."""
        try:
            stamp = self._path.stat().st_mtime_ns
        except OSError:
            return False
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        stored = stored_bank(self._path, self.bank.reader)
        return stored is not None and self.bank.absorb(stored) > 0

    def missing(self, queries: Sequence[str], answers: Sequence[str], baselines: Sequence[str]) -> int:
        return int(np.isnan(self._lookup(queries, answers, baselines)).sum())

    def _lookup(self, queries: Sequence[str], answers: Sequence[str], baselines: Sequence[str]) -> np.ndarray:
        """The stored readings, after taking what another process stored if some pair is missing."""
        have = self.bank.lookup(queries, answers, baselines)
        if np.isnan(have).any() and self._refresh():
            have = self.bank.lookup(queries, answers, baselines)
        return have

    def readings(self, queries: Sequence[str], answers: Sequence[str], baselines: Sequence[str],
                 progress: Progress | None = None, fine: bool = False) -> np.ndarray:
        """``Q(answer, baseline)`` of each pair; pairs not stored are read now and stored, a batch at a
        time, ``progress(done, total)`` after each. ``fine``: the caller stops the reading by raising
        from ``progress`` (a leaderboard request whose client left), so a local reader reads
        :data:`FINE_BATCH` pairs a batch, about a second, instead of 16: stopped sooner, read slower."""
        key = (len(queries), hash(tuple(queries)), hash(tuple(answers)), hash(tuple(baselines)))
        if key in self._memo:
            return self._memo[key]
        have = self._lookup(queries, answers, baselines)
        if not np.isnan(have).any():
            return self._remember(key, have)
        n = int(np.isnan(have).sum())
        log.info("quality reader %s: reading %d new pairs", self.gate.reader_identity, n)
        if progress is None:
            progress = lambda done, total: log.info("quality readings: %d / %d pairs", done, total)  # noqa: E731
        reader = self.reader
        with self._reading:
            got = fill(self.bank, reader.readings, queries, answers, baselines,
                       path=self._path, batch=FINE_BATCH if fine and self.local else 16, progress=progress)
        return self._remember(key, got)

    def _remember(self, key: tuple[int, int, int, int], values: np.ndarray) -> np.ndarray:
        if len(self._memo) >= 16:
            self._memo.pop(next(iter(self._memo)))
        values.setflags(write=False)
        self._memo[key] = values
        return values
