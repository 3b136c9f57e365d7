"""One protocol for everything that answers "which response does this user prefer?".

A judge takes a batch of ``JudgeRequest`` and returns one ``Verdict`` each. Backends register
by name in ``usl.judges.registry``; callers never branch on a judge's or model's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

from usl.types import Criteria, CriteriaReading

if TYPE_CHECKING:       # numpy is imported where arrays are made, not with the protocol
    from pathlib import Path

    import numpy as np

    from usl.quality.reader import QualityReading


@dataclass(frozen=True)
class JudgeRequest:
    criteria: Criteria
    query: str
    response_a: str
    response_b: str


@dataclass(frozen=True)
class Verdict:
    """``p_a``: probability that response A is better; ``p_tie``: probability of a tie
    (0 for judges that cannot say tie). P(B better) = 1 - p_a - p_tie."""

    p_a: float
    p_tie: float = 0.0

    @property
    def p_b(self) -> float:
        return 1.0 - self.p_a - self.p_tie

    @property
    def label(self) -> str:
        """The decision: the most probable of model_a / model_b / tie."""
        probs = {"model_a": self.p_a, "model_b": self.p_b, "tie": self.p_tie}
        return max(probs, key=probs.get)

    @property
    def score_a(self) -> float:
        """A's share of the win, ties counting half: the quantity win rates average."""
        return self.p_a + 0.5 * self.p_tie


@runtime_checkable
class Judge(Protocol):
    name: str       # registry name, e.g. "length"
    version: str    # changes whenever the judge's decisions could change (weights hash, prompt)
    can_tie: bool

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """Judge a batch. Order-dependent judges see A first; callers average both orders."""
        ...

    @property
    def identity(self) -> str:
        """``name@version``: the cache key's judge part."""
        ...


@dataclass(frozen=True)
class DecisionTerms:
    """The terms a judge's logit for "the model's answer beats the baseline's" sums, for n pairs:
    ``logit = criteria_rows.sum(0) + quality_rows.sum(0) + answer``. A calibration (``usl.judges.calibration``)
    weighs them apart: ``criteria_rows`` (k, n) each stated criterion's reading, ``quality_rows`` (k, n) each
    criterion's share of a quality reading, ``answer`` (n,) what the judge reads of the answers whatever the
    criteria."""

    criteria: tuple[str, ...]
    criteria_rows: np.ndarray
    quality_rows: np.ndarray
    answer: np.ndarray

    @property
    def logit(self) -> np.ndarray:
        return self.criteria_rows.sum(0) + self.quality_rows.sum(0) + self.answer


@runtime_checkable
class MatrixJudge(Protocol):
    """A judge that scores whole columns of (model answer, baseline answer) pairs at once, both orders in one
    number; ``progress`` is called between the readings it starts, and raising from it stops them."""

    def judge_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                     baseline_answers: Sequence[str], progress=None) -> np.ndarray:
        ...


@runtime_checkable
class ReadsCriteria(Protocol):
    """A judge that reads criteria: how it reads a set of them (each criterion's length wish, and the note the
    page shows beside a board) is what length control, the contradiction check and the vote check take. A
    judge without it gets ``CriteriaReading()`` (``usl.types``: no length wish, no notes)."""

    def read_criteria(self, criteria: Criteria) -> CriteriaReading:
        ...


def read_criteria(judge: Judge, criteria: Criteria) -> CriteriaReading:
    """How ``judge`` reads ``criteria``; the documented default, ``CriteriaReading()`` (no length wish: length
    control stays on; no notes), for a judge that does not read criteria."""
    return judge.read_criteria(criteria) if isinstance(judge, ReadsCriteria) else CriteriaReading()


@runtime_checkable
class Decomposable(Protocol):
    """A judge whose decision is a sum of named terms (the fast CRM): what a calibration can weigh."""

    def decision_terms(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                       baseline_answers: Sequence[str], progress=None) -> DecisionTerms:
        ...


@runtime_checkable
class Prepares(Protocol):
    """A judge that reads a benchmark's answers ahead of its first board (the fast CRM's answer vectors, cached
    on disk): handed the whole benchmark once, in a fixed order, it finds them there instead of recomputing."""

    def prepare(self, queries: Sequence[str], answers: Sequence[str], progress=None) -> None:
        ...


@runtime_checkable
class LoadsReaders(Protocol):
    """A judge that reads new inputs with models it loads on first use (the default judge's style scorer and
    substance reader, about 0.5 GB, read new answers; ``crm-factored``'s CRM, about 0.14 GB with its head,
    reads new criteria): ``load_readers()`` loads them and runs each once over made-up texts of every batch
    shape, so that a server pays for them at start rather than in the first request that brings a new answer
    or criteria set."""

    def load_readers(self) -> None:
        ...


@runtime_checkable
class ReadsPairsAhead(Protocol):
    """A judge that serves only the (answer, baseline) pairs it has read ahead (``crm-factored``'s stored
    vectors, 2 transformer passes a pair): how many of a board's pairs it lacks."""

    def missing_pairs(self, queries: Sequence[str], model_answers: Sequence[str],
                      baseline_answers: Sequence[str]) -> int:
        ...


@runtime_checkable
class HasQualityTerm(Protocol):
    """A judge whose decision weighs a quality reading of each (answer, baseline) pair (``usl.quality``; None
    where its weights hold no gate): what ``usl quality fill`` and ``prepare`` read ahead."""

    quality: QualityReading | None


@runtime_checkable
class StoresReadings(Protocol):
    """A judge that reads something of each (answer, baseline) pair once and stores it (the default judge's
    quality reading): how many of a board's pairs it has not read yet, each a second of CPU or a request."""

    def missing_readings(self, queries: Sequence[str], model_answers: Sequence[str],
                         baseline_answers: Sequence[str]) -> int:
        ...


@runtime_checkable
class ReadsLocally(Protocol):
    """A reader of quality that runs on this machine (a CRM, the substance reader), not over the network: the
    folder of its weights, where banks of its readings (``bank-*.npz``) may ship beside them."""

    @property
    def readings_dir(self) -> Path:
        ...


@runtime_checkable
class SaysIfCacheable(Protocol):
    """A judge that says whether its judgments are worth storing: ``cacheable`` False for one that recomputes
    a board faster than SQLite reads it back. A judge that says nothing is cached."""

    cacheable: bool


def cacheable(judge: Judge) -> bool:
    return not isinstance(judge, SaysIfCacheable) or judge.cacheable


def verdicts_by_matrix(judge_matrix, requests: Sequence[JudgeRequest]) -> list[Verdict]:
    """The protocol's ``judge`` for a judge with ``judge_matrix``: one call per criteria set."""
    import numpy as np

    by_criteria: dict = {}
    for i, r in enumerate(requests):
        by_criteria.setdefault(r.criteria, []).append(i)
    p = np.zeros(len(requests))
    for crit, idx in by_criteria.items():
        p[idx] = judge_matrix(crit, [requests[i].query for i in idx], [requests[i].response_a for i in idx],
                              [requests[i].response_b for i in idx])
    return [Verdict(float(x)) for x in p]
