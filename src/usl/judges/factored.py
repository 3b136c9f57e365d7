"""``crm-factored[:PATH]``: the transformer CRM, instantly, from answer vectors read once.

The pairwise span-head CRM (``crm``, or the one at ``PATH``) split in two (``usl.crm.factored``):
each (answer, baseline) pair is read once under neutral criteria and its vectors stored; a criteria
set costs :data:`~usl.crm.factored.CONTEXTS` short passes and one matrix product over every
stored pair. Vectors come from the banks shipped beside the CRM (``factored/*.npz``: the default
AlpacaEval board) and from this data directory's own bank, which grows as pairs without vectors
are read (2 transformer passes each, as slow as ``crm`` itself: about an hour on 2 cores for a new
43 x 483 board, a minute on a GPU; ``usl rank --judge crm-factored`` or ``usl eval`` fill it).

Its decisions approximate ``crm``'s: measured against ``crm``'s own boards, not assumed
(``scripts/factored_crm.py``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from usl import paths
from usl.crm.factored import NEUTRAL
from usl.judges.base import JudgeRequest, Verdict
from usl.judges.registry import register
from usl.types import Criteria

log = logging.getLogger(__name__)


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
    _contexts: Any = field(default=None, repr=False)
    _criteria: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # -- identity ------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        from usl.crm.inference import model_dir_of

        return model_dir_of(self.path)

    @property
    def factored_dir(self) -> Path:
        from usl.crm.factored import FACTORED_DIR

        return self.dir / FACTORED_DIR

    @property
    def version(self) -> str:
        from usl.crm.factored import weights_version

        h = hashlib.sha256(weights_version(self.dir).encode())
        for f in ("basis.npz", "contexts.json"):
            h.update((self.factored_dir / f).read_bytes())
        if self.contexts:
            h.update(f"contexts={self.contexts}".encode())
        return h.hexdigest()[:12]

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    # -- parts, loaded on first use ------------------------------------------------------------
    @property
    def crm(self):
        if self._crm is None:
            from usl.crm.factored import FactoredCRM
            from usl.crm.inference import CRMScorer

            self._crm = FactoredCRM(CRMScorer(self.path, device=self.device, home=self.home,
                                              batch_size=self.batch_size))
        return self._crm

    @property
    def basis(self):
        from usl.crm.factored import Basis

        return Basis.load(self.factored_dir / "basis.npz")

    def _home_bank_path(self) -> Path:
        return paths.cache_dir(self.home, "factored") / f"{self.crm.version}.npz"

    def bank(self):
        """Shipped banks of this CRM plus this data directory's own."""
        if self._bank is None:
            from usl.crm.factored import PairBank

            basis = self.basis
            bank = PairBank.empty(*basis.components.shape, self.crm.version)
            for f in sorted(self.factored_dir.glob("bank-*.npz")) + [self._home_bank_path()]:
                if not f.is_file():
                    continue
                b = PairBank.load(f)
                if b.version != self.crm.version:
                    log.warning("%s holds vectors of other CRM weights (%s, not %s): ignored", f, b.version,
                                self.crm.version)
                    continue
                bank = bank.merged(b)
            self._bank = bank
        return self._bank

    def _contexts_list(self):
        if self._contexts is None:
            from usl.crm.factored import CONTEXTS, read_contexts

            self._contexts = read_contexts(self.factored_dir / "contexts.json", self.contexts or CONTEXTS)
        return self._contexts

    def head(self):
        if self._head is None or self._head.bank is not self.bank():
            from usl.crm.factored import FactoredHead

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
    def _add(self, pairs: list[tuple[str, str, str]], keys: list[bytes]) -> None:
        from usl.crm.factored import PairBank

        log.info("reading %d answer pairs with %s (2 transformer passes each; stored for next time)",
                 len(pairs), self.path)
        done = [0]

        def progress(n: int) -> None:
            done[0] += n
            log.info("read %d / %d answer pairs", done[0], len(pairs))

        new = PairBank.build(keys, [q for q, _, _ in pairs], self.crm.pair_vectors(pairs, progress), self.basis,
                             self.crm.version)
        path = self._home_bank_path()
        own = PairBank.load(path) if path.is_file() else None
        (own.merged(new) if own is not None and own.version == new.version else new).save(path)
        self._bank = None          # read back what was saved: the next start judges with the same values

    def warm(self) -> None:
        """Load the model, the banks and the head ahead of the first request."""
        with self._lock:
            self.head()
            self.criteria_vector(("warm-up",))

    def prepare(self, queries: Sequence[str], answers: Sequence[str], progress=None) -> None:
        self.warm()

    # -- the Judge protocol ----------------------------------------------------------------------
    def _rows(self, queries: Sequence[str], model_answers: Sequence[str],
              baseline_answers: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Bank row and sign of every pair, reading (and storing) the pairs the bank lacks."""
        from usl.crm.factored import pair_key

        trip = list(zip(queries, model_answers, baseline_answers))
        keys = [pair_key(q, a, b) for q, a, b in trip]
        swapped = [pair_key(q, b, a) for q, a, b in trip]
        rows, sign = self.bank().lookup(keys, swapped)
        missing = np.flatnonzero(rows < 0)
        if len(missing):
            first = {keys[i]: i for i in missing}          # a pair asked twice is read once
            self._add([trip[i] for i in first.values()], list(first))
            rows, sign = self.bank().lookup(keys, swapped)
        return rows, sign

    def judge_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                     baseline_answers: Sequence[str]) -> np.ndarray:
        """P(model answer beats baseline answer), shape (n,), both orders averaged."""
        with self._lock:
            rows, sign = self._rows(queries, model_answers, baseline_answers)
            head, c = self.head(), self.criteria_vector(tuple(criteria.as_list()) or NEUTRAL)
        return 1.0 / (1.0 + np.exp(-sign * head.logits(c, rows)))

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        with self._lock:
            rows, sign = self._rows([r.query for r in requests], [r.response_a for r in requests],
                                    [r.response_b for r in requests])
            head = self.head()
            by_criteria: dict[Criteria, list[int]] = {}
            for i, r in enumerate(requests):
                by_criteria.setdefault(r.criteria, []).append(i)
            logit = np.zeros(len(requests))
            for crit, idx in by_criteria.items():
                c = self.criteria_vector(tuple(crit.as_list()) or NEUTRAL)
                logit[idx] = sign[idx] * head.logits(c, rows[idx])
        return [Verdict(float(1.0 / (1.0 + np.exp(-x)))) for x in logit]


@register("crm-factored")
def _crm_factored(arg: str | None = None, *, home: str | None = None, device: str | None = None,
                  batch_size: int | None = None, contexts: int | None = None, **_) -> FactoredJudge:
    from usl.crm import shipped_weights
    from usl.crm.factored import FACTORED_DIR
    from usl.crm.inference import model_dir_of
    from usl.judges.crm import SHIPPED

    d = model_dir_of(arg or str(shipped_weights(SHIPPED)))    # fail fast on a wrong path
    for f in ("basis.npz", "contexts.json"):
        if not (d / FACTORED_DIR / f).is_file():
            raise FileNotFoundError(f"{d}: no {FACTORED_DIR}/{f} (make them with `python scripts/factored_crm.py "
                                    f"basis ...`); crm-factored needs them beside the CRM")
    return FactoredJudge(path=str(d), home=home, device=device, batch_size=batch_size, contexts=contexts)
