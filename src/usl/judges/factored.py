"""``crm-factored[:PATH]``: an approximation of the transformer CRM's decisions in a second, from
answer vectors read once.

The pairwise span-head CRM (``crm``, or the one at ``PATH``) split in two (``usl.crm.factored``):
each (answer, baseline) pair is read once under neutral criteria and its vectors stored; a criteria
set costs :data:`~usl.crm.factored.CONTEXTS` 512-token passes and one matrix product over every
stored pair. Vectors come from the banks shipped beside the CRM (``factored/bank-*.npz``: the
default AlpacaEval board) and from this data directory's own bank, which grows as pairs without
vectors are read (2 transformer passes each, as many as ``crm`` itself: about an hour on 2 cores
for a new 43 x 483 board, a minute on a GPU; ``usl rank --judge crm-factored`` or ``usl eval``
fill it; the server does not, see ``LeaderboardService.unread_pairs``).

Its decisions approximate ``crm``'s: measured against ``crm``'s own boards, not assumed
(``scripts/factored_crm.py``; figures in the crm-minilm-span model card).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from usl import paths
from usl.crm.factored import Basis, CONTEXTS, FACTORED_DIR, FactoredCRM, FactoredHead, NEUTRAL, PairBank, bank_version, pair_key, read_contexts, weights_version
from usl.judges.base import JudgeRequest, Verdict, verdicts_by_matrix
from usl.judges.registry import register
from usl.types import Criteria
from usl.crm.inference import CRMScorer, model_dir_of
from usl.judges.crm import SHIPPED
from usl.weights import shipped

log = logging.getLogger(__name__)
SAVE_EVERY = 512      # pairs read between two saves of the data directory's bank (~1 min on 2 cores)


@dataclass
class FactoredJudge:
    path: str
    home: str | None = None
    device: str | None = None
    batch_size: int | None = None
    contexts: int | None = None   # None: usl.crm.factored.CONTEXTS
    name: str = "crm-factored"
    can_tie: bool = False
    cacheable: bool = False     # a board costs less than reading it back from SQLite
    _crm: Any = field(default=None, repr=False)
    _head: Any = field(default=None, repr=False)
    _bank: Any = field(default=None, repr=False)
    _basis: Any = field(default=None, repr=False)
    _contexts: Any = field(default=None, repr=False)
    _version: str = field(default="", repr=False)
    _bank_version: str = field(default="", repr=False)
    _criteria: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _found: dict = field(default_factory=dict, repr=False)     # (query, answer, baseline) -> (row, sign)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # -- identity ------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return model_dir_of(self.path)

    @property
    def factored_dir(self) -> Path:
        return self.dir / FACTORED_DIR

    @property
    def version(self) -> str:
        """Changes with anything a decision depends on: the CRM's weights and reading settings, the
        basis, the contexts and how many are read, the neutral criteria, the shipped banks."""
        if not self._version:
            h = hashlib.sha256(self.bank_version.encode())
            h.update((self.factored_dir / "contexts.json").read_bytes())
            h.update(f"contexts={self.contexts or CONTEXTS};neutral={NEUTRAL}".encode())
            for f in self._shipped_banks():
                h.update(f.name.encode())
                h.update(f.read_bytes())
            self._version = h.hexdigest()[:12]
        return self._version

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def bank_version(self) -> str:
        """What stored codes mean here (the CRM's weights and the basis): banks of another are ignored."""
        if not self._bank_version:
            self._bank_version = bank_version(weights_version(self.dir), self.basis)
        return self._bank_version

    # -- parts, loaded on first use ------------------------------------------------------------
    @property
    def crm(self):
        if self._crm is None:
            self._crm = FactoredCRM(CRMScorer(self.path, device=self.device, home=self.home,
                                              batch_size=self.batch_size))
        return self._crm

    @property
    def basis(self):
        if self._basis is None:
            self._basis = Basis.load(self.factored_dir / "basis.npz")
        return self._basis

    def _shipped_banks(self) -> list[Path]:
        return sorted(self.factored_dir.glob("bank-*.npz"))

    def home_bank_path(self) -> Path:
        """This data directory's bank: the pairs read here."""
        return paths.cache_dir(self.home, "factored") / f"{self.bank_version}.npz"

    def _load_home_bank(self):
        """The data directory's bank, or None; a broken one (a cache) is moved aside with a warning."""
        path = self.home_bank_path()
        if not path.is_file():
            return None
        try:
            return PairBank.load(path)
        except ValueError as e:
            aside = path.with_name(f"{path.name}.broken-{int(time.time())}")
            os.replace(path, aside)
            log.warning("%s; moved aside to %s, its pairs will be read again", e, aside.name)
            return None

    def bank(self):
        """Shipped banks of this CRM plus this data directory's own."""
        if self._bank is None:
            self._found.clear()
            bank = PairBank.empty(self.basis, self.bank_version)
            found = [(f, PairBank.load(f)) for f in self._shipped_banks()]
            own = self._load_home_bank()
            found += [(self.home_bank_path(), own)] if own is not None else []
            for f, b in found:
                if b.version != self.bank_version:
                    log.warning("%s holds vectors of another CRM or basis (%s, not %s): ignored", f, b.version,
                                self.bank_version)
                    continue
                bank = bank.merged(b)
            self._bank = bank
        return self._bank

    def _contexts_list(self):
        if self._contexts is None:
            self._contexts = read_contexts(self.factored_dir / "contexts.json", self.contexts or CONTEXTS)
        return self._contexts

    def head(self):
        if self._head is None or self._head.bank is not self.bank():
            self._head = FactoredHead(self.crm.scorer.model.head, self.basis, self.bank())
        return self._head

    def criteria_vector(self, crit: tuple[str, ...]) -> np.ndarray:
        c = self._criteria.get(crit)
        if c is None:
            c = self.crm.criteria_vector(crit, self._contexts_list())
            self._criteria[crit] = c
            while len(self._criteria) > 256:
                self._criteria.popitem(last=False)
        return c

    # -- filling the bank ----------------------------------------------------------------------
    def _add(self, pairs: list[tuple[str, str, str]], keys: list[bytes], progress=None) -> None:
        """Read ``pairs`` and store them in this data directory's bank, :data:`SAVE_EVERY` pairs at
        a time (under a file lock: another process may be adding too): a killed run keeps what it
        read, and the next one reads only the rest."""
        import fcntl

        path = self.home_bank_path()
        log.info("reading %d answer pairs with %s (2 transformer passes each; stored in %s)", len(pairs),
                 self.path, path)
        for start in range(0, len(pairs), SAVE_EVERY):
            chunk = pairs[start:start + SAVE_EVERY]
            new = PairBank.build(keys[start:start + SAVE_EVERY], [q for q, _, _ in chunk],
                                 self.crm.pair_vectors(chunk), self.basis, self.bank_version)
            with open(path.with_name(path.name + ".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                own = self._load_home_bank()
                (own.merged(new) if own is not None and own.version == new.version else new).save(path)
            self._bank = self.bank().merged(new)          # codes on a fixed step: what was saved, exactly
            if self._head is not None:
                self._head = self._head.extended(self._bank)
            log.info("read %d / %d answer pairs", start + len(chunk), len(pairs))
            if progress:
                progress(start + len(chunk), len(pairs))

    def _lookup(self, trip: list[tuple[str, str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """Bank rows and signs (-1: not stored). Found pairs are remembered by their texts (Python
        caches a string's hash, so a board asked again costs dict lookups, not 40k digests)."""
        bank = self.bank()                  # first: a bank built afresh forgets what was found
        rows = np.full(len(trip), -1, np.int64)
        sign = np.ones(len(trip), np.float32)
        todo = []
        for i, t in enumerate(trip):
            hit = self._found.get(t)
            if hit is None:
                todo.append(i)
            else:
                rows[i], sign[i] = hit
        if todo:
            r, sg = bank.lookup([pair_key(*trip[i]) for i in todo],
                                       [pair_key(trip[i][0], trip[i][2], trip[i][1]) for i in todo])
            rows[todo], sign[todo] = r, sg
            if len(self._found) < 1_000_000:
                self._found.update((trip[i], (int(x), float(y))) for i, x, y in zip(todo, r, sg) if x >= 0)
        return rows, sign

    def missing_pairs(self, queries: Sequence[str], model_answers: Sequence[str],
                      baseline_answers: Sequence[str]) -> int:
        """How many of these pairs have no stored vectors (each would cost 2 transformer passes)."""
        with self._lock:
            rows, _ = self._lookup(list(zip(queries, model_answers, baseline_answers)))
        return int((rows < 0).sum())

    def warm(self) -> None:
        """Load the model, the banks and the head ahead of the first request."""
        with self._lock:
            self.head()
            self.criteria_vector(("warm-up",))

    def prepare(self, queries: Sequence[str], answers: Sequence[str], progress=None) -> None:
        self.warm()

    def load_readers(self) -> None:
        """``LoadsReaders``: the CRM reads each new criteria set, so a server loads it at start."""
        self.warm()

    # -- the Judge protocol ----------------------------------------------------------------------
    def _rows(self, queries: Sequence[str], model_answers: Sequence[str],
              baseline_answers: Sequence[str], progress=None) -> tuple[np.ndarray, np.ndarray]:
        """Bank row and sign of every pair, reading (and storing) the pairs the bank lacks; a pair
        asked in both orientations is read once."""
        trip = list(zip(queries, model_answers, baseline_answers))
        rows, sign = self._lookup(trip)
        missing = np.flatnonzero(rows < 0)
        if len(missing):
            first: dict[bytes, int] = {}
            for i in missing:
                q, a, b = trip[i]
                k, ks = pair_key(q, a, b), pair_key(q, b, a)
                if k not in first and ks not in first:
                    first[k] = i
            self._add([trip[i] for i in first.values()], list(first), progress)
            rows, sign = self._lookup(trip)
            if (rows < 0).any():
                raise RuntimeError(f"{int((rows < 0).sum())} answer pairs still have no vectors after reading them")
        return rows, sign

    def judge_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                     baseline_answers: Sequence[str], progress=None) -> np.ndarray:
        """P(model answer beats baseline answer), shape (n,), both orders averaged; ``progress`` after
        each stored batch of pairs read first."""
        with self._lock:
            rows, sign = self._rows(queries, model_answers, baseline_answers, progress)
            head, c = self.head(), self.criteria_vector(tuple(criteria.as_list()) or NEUTRAL)
        return 1.0 / (1.0 + np.exp(-sign * head.logits(c, rows)))

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return verdicts_by_matrix(self.judge_matrix, requests)


@register("crm-factored")
def _crm_factored(arg: str | None = None, *, home: str | None = None, device: str | None = None,
                  batch_size: int | None = None, contexts: int | None = None, **_) -> FactoredJudge:
    d = model_dir_of(arg or str(shipped(SHIPPED)))    # fail fast on a wrong path
    for f in ("basis.npz", "contexts.json"):
        if not (d / FACTORED_DIR / f).is_file():
            raise FileNotFoundError(f"{d}: no {FACTORED_DIR}/{f}; crm-factored needs it beside the CRM (make it "
                                    "with `python scripts/factored_crm.py contexts` or `... bank --fit-basis 64`)")
    return FactoredJudge(path=str(d), home=home, device=device, batch_size=batch_size, contexts=contexts)
