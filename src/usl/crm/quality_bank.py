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

    python3 -m usl.crm.quality_bank --judge quality:RUN --board board.json.xz --out bank-board.npz
"""

from __future__ import annotations

import hashlib
import logging
import threading
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
# pairs a reading that its requester may stop reads between two progress calls: the shipped reader's
# longest call of 2 pairs took 1.3-1.9 s on 2 shared cores (of 4: 2.6 s; of 16: 5.3-5.8 s), at 1.2-1.6
# pairs/s against 2.8-3.0 in calls of 16 (scripts/bench_quality_reader.py --pairs 32 --call-pairs N)
FINE_BATCH = 2


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
    stored = _stored(path, bank.reader)
    if stored is not None:
        bank.absorb(stored)
    bank.save(path)


def _stored(path: Path, reader: str) -> QualityBank | None:
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


def _main() -> None:
    """Read a board's every (answer, baseline) pair on this machine's device (a GPU box)."""
    import argparse
    import json
    import lzma
    import time

    from usl.judges.registry import load_judge

    ap = argparse.ArgumentParser(description=_main.__doc__)
    ap.add_argument("--judge", required=True, help="a judge with readings(), e.g. quality:RUN")
    ap.add_argument("--board", required=True, help='{"queries", "baseline", "answers": {model: [...]}} (.xz ok)')
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()
    opener = lzma.open if args.board.endswith(".xz") else open
    with opener(args.board, "rt", encoding="utf-8") as f:
        board = json.load(f)
    base = board["answers"][board["baseline"]]
    trip = [(q, a, b) for m, ans in board["answers"].items() if m != board["baseline"]
            for q, a, b in zip(board["queries"], ans, base) if a and b]
    judge = load_judge(args.judge, batch_size=args.batch_size)
    bank = QualityBank.empty(judge.identity)
    t0 = time.time()
    fill(bank, judge.readings, *zip(*trip), batch=1024,
         progress=lambda d, n: log.info("read %d / %d pairs (%.0f s)", d, n, time.time() - t0))
    bank.save(Path(args.out))
    log.info("%d pairs in %.0f s -> %s", len(bank), time.time() - t0, args.out)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _main()


def judge_readings(judge, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
    """``Q(A, B)`` from any judge of the protocol (an ``llm:...`` judge, say): both orders under
    ``QUALITY_CRITERIA``, ``(logit p(A first) - logit p(B first)) / 2``, each probability kept within
    [0.05, 0.95] so that a hard verdict reads as a confident one (logit 2.9), not an infinite one.
    A judge with ``readings()`` (the quality reader) reads itself."""
    if hasattr(judge, "readings"):
        return judge.readings(queries, answers_a, answers_b)
    from usl.data.pairs.general import QUALITY_CRITERIA
    from usl.judges.base import JudgeRequest
    from usl.types import Criteria

    crit = Criteria(QUALITY_CRITERIA, ())
    reqs = [JudgeRequest(crit, q, a, b) for q, a, b in zip(queries, answers_a, answers_b)]
    reqs += [JudgeRequest(crit, q, b, a) for q, a, b in zip(queries, answers_a, answers_b)]
    p = np.clip(np.array([v.score_a for v in judge.judge(reqs)], np.float64), 0.05, 0.95)
    lg = np.log(p) - np.log1p(-p)
    n = len(queries)
    return (0.5 * (lg[:n] - lg[n:])).astype(np.float32)


class QualityReading:
    """The quality term of a judge: its gate (``usl.fast.quality_gate``), the reader it was fitted for, and
    that reader's stored readings (every ``bank-*.npz`` beside the reader's weights, then this machine's).
    Pairs not stored are read on demand by the reader itself and stored: the bank is a cache of the
    reader, never another model."""

    def __init__(self, gate, home: str | Path | None, reader: str = ""):
        """``reader``: a judge spec that supplies the readings instead of the one the gate was fitted
        for (a stronger judge: ``llm:...``, ``crm:PATH``); its own readings, in a bank of its own."""
        from dataclasses import replace

        from usl import paths

        if reader and reader != gate.reader:
            from usl.judges.registry import load_judge

            gate = replace(gate, reader=reader, reader_identity=load_judge(reader, home=None if home is None
                                                                           else str(home)).identity)
        self.gate = gate
        self.home = home
        self._reader = None
        self._bank: QualityBank | None = None
        # a board asks for the same pairs at every request: their readings by the pair lists' hash (the
        # strings' hashes are cached by Python, so this costs milliseconds where a lookup costs 0.1 s)
        self._memo: dict[tuple[int, int, int, int], np.ndarray] = {}
        self._path = home_path(paths.cache_dir(home), gate.reader_identity)
        self._stamp: int | None = None   # the home file's mtime when last merged
        # one reading at a time: two boards of the same new pairs (a board and its default, in one request)
        # read them once, the second waiting for the first; and the bank grows from one thread
        self._reading = threading.Lock()
        # a reader of this machine (a CRM) spends its CPU here; an LLM's are requests over the network
        self.local = gate.reader.partition(":")[0] in ("quality", "crm")

    @classmethod
    def for_weights(cls, weights: Path, home: str | Path | None, reader: str = "") -> QualityReading | None:
        from usl.fast.quality_gate import QualityGate

        gate = QualityGate.load(weights)
        if gate is None and reader:
            raise ValueError(f"{weights}: no quality_gate.json, so no quality reading to take from {reader!r}")
        return None if gate is None else cls(gate, home, reader)

    @property
    def reader(self):
        if self._reader is None:
            from usl.judges.registry import load_judge

            # 16 pairs a forward: 1.6 pairs/s on 2 busy cores against 4 (scripts/bench_quality_reader.py)
            options = {"batch_size": 16} if self.local else {}
            self._reader = load_judge(self.gate.reader, home=None if self.home is None else str(self.home),
                                      **options)
            if self._reader.identity != self.gate.reader_identity:
                raise ValueError(f"the quality gate was fitted for {self.gate.reader_identity}, but "
                                 f"{self.gate.reader!r} is now {self._reader.identity}: refit it "
                                 "(usl quality fit-gate)")
        return self._reader

    @property
    def bank(self) -> QualityBank:
        if self._bank is None:
            bank = QualityBank.empty(self.gate.reader_identity)
            for path in self._shipped():
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
        stored = _stored(self._path, self.bank.reader)
        return stored is not None and self.bank.absorb(stored) > 0

    def _shipped(self) -> list[Path]:
        from usl.crm.inference import model_dir_of
        from usl.judges.registry import load_judge

        if not self.local:
            return []
        path = getattr(load_judge(self.gate.reader), "path", None)   # cheap: a CRM judge loads its weights lazily
        return sorted(model_dir_of(path).glob("bank-*.npz")) if path else []

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
            got = fill(self.bank, lambda q, a, b: judge_readings(reader, q, a, b), queries, answers, baselines,
                       path=self._path, batch=FINE_BATCH if fine and self.local else 16, progress=progress)
        return self._remember(key, got)

    def _remember(self, key: tuple[int, int, int, int], values: np.ndarray) -> np.ndarray:
        if len(self._memo) >= 16:
            self._memo.pop(next(iter(self._memo)))
        values.setflags(write=False)
        self._memo[key] = values
        return values
