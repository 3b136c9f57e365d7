"""``quality[:PATH]``: the quality reader, a pairwise CRM that reads general answer quality.

It is the transformer CRM of ``usl train`` (``crm.py``) trained on general-preference pairs only
(``usl data build-train``'s ``quality/`` files: human, LLM-judge and rubric labels) under one fixed
wording, :data:`~usl.data.pairs.general.QUALITY_CRITERIA`, and always read under that wording, so
its reading of a pair does not depend on the user's criteria: a board computes it once per
(answer, baseline) pair and keeps it (:mod:`usl.crm.quality_bank`). As a judge it answers "which
answer is better overall", whatever criteria it is given.

Its reading of a pair is the order-averaged logit
``Q(A, B) = (logit p(A first) - logit p(B first)) / 2``, antisymmetric by construction.
Plain ``quality`` is the shipped reader (``weights/quality-minilm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from usl.data.pairs.general import QUALITY_CRITERIA
from usl.judges.base import JudgeRequest, Verdict
from usl.judges.crm import CRMJudge
from usl.judges.registry import register

SHIPPED = "quality-minilm"


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


@dataclass
class QualityJudge(CRMJudge):
    name: str = "quality"

    def readings(self, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
        """``Q(A, B)`` for each pair, shape (n,): both orders read, their logits averaged."""
        crit = list(QUALITY_CRITERIA)
        items = [(crit, q, a, b) for q, a, b in zip(queries, answers_a, answers_b)]
        if self.scorer.meta.get("order_average"):   # the scorer reads both orders and averages their logits
            return _logit(np.asarray(self.scorer.p_a(items), dtype=np.float64)).astype(np.float32)
        items += [(crit, q, b, a) for q, a, b in zip(queries, answers_a, answers_b)]
        p = np.asarray(self.scorer.p_a(items), dtype=np.float64)
        n = len(queries)
        return (0.5 * (_logit(p[:n]) - _logit(p[n:]))).astype(np.float32)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        crit = list(QUALITY_CRITERIA)
        return [Verdict(p) for p in self.scorer.p_a([(crit, r.query, r.response_a, r.response_b) for r in requests])]


@register("quality")
def _quality(arg: str | None = None, *, device: str | None = None, home: str | None = None,
             batch_size: int | None = None, **_) -> QualityJudge:
    from usl.weights import shipped
    from usl.crm.inference import model_dir_of

    arg = arg or str(shipped(SHIPPED))
    model_dir_of(arg)  # fail fast on a wrong path
    return QualityJudge(path=arg, device=device, home=home, batch_size=batch_size)
