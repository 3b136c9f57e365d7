"""``crm:PATH``: a trained customizable reward model as a judge.

``PATH`` is a training run directory, its ``final/`` directory, or shipped weights (any directory
with ``crm.json``); plain ``crm`` is the shipped transformer CRM (``weights/crm-minilm-span``:
a LoRA adapter and span head over the packaged all-MiniLM-L6-v2, see its MODEL_CARD.md). Runs on
CUDA when available, else CPU. Returns P(A) for the order it is given; callers average both
orders. ``version`` hashes crm.json and the weight files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from usl.judges.base import JudgeRequest, Verdict
from usl.judges.registry import register
from usl.crm.inference import CRMScorer, model_dir_of, weights_version
from usl.weights import shipped


@dataclass
class CRMJudge:
    path: str
    device: str | None = None
    home: str | None = None
    batch_size: int | None = None   # None: 32 on CUDA, 4 on CPU
    name: str = "crm"
    can_tie: bool = False
    cacheable: bool = True
    _scorer: Any = field(default=None, repr=False)
    _version: str = field(default="", repr=False)

    @property
    def readings_dir(self) -> Path:
        return model_dir_of(self.path)

    @property
    def version(self) -> str:
        if not self._version:
            self._version = weights_version(model_dir_of(self.path))
        return self._version

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def scorer(self):
        if self._scorer is None:
            self._scorer = CRMScorer(self.path, device=self.device, home=self.home, batch_size=self.batch_size)
        return self._scorer

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        items = [(r.criteria.as_list() or ["General user preference"], r.query, r.response_a, r.response_b)
                 for r in requests]
        return [Verdict(p) for p in self.scorer.p_a(items)]


SHIPPED = "crm-minilm-span"


@register("crm")
def _crm(arg: str | None = None, *, device: str | None = None, home: str | None = None,
         batch_size: int | None = None, **_) -> CRMJudge:
    arg = arg or str(shipped(SHIPPED))
    model_dir_of(arg)  # fail fast on a wrong path
    return CRMJudge(path=arg, device=device, home=home, batch_size=batch_size)
