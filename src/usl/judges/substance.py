"""``substance[:DIR]``: the substance reader's quality head as a judge and as the default judge's quality reader.

The substance reader (``usl.fast.substance``) reads each (query, answer) once; trained on preference pairs as
well, it gives beside ``z`` (does this answer the query) a Bradley-Terry score ``r`` of the answer's quality,
so the quality of a pair costs no pass of its own: ``Q(A, B) = r(A) - r(B)``, antisymmetric by construction.
As a judge it answers "which answer is better overall", whatever criteria it is given. ``DIR`` is the
reader's folder (default: the shipped judge's ``fast-crm/substance``); the readings are the bank's
(:meth:`~usl.fast.substance.SubstanceBank.shared`), so the default judge reads each answer once for both
terms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from usl import paths
from usl.fast.substance import FOLDER, SubstanceBank
from usl.judges.base import JudgeRequest, Verdict
from usl.judges.registry import register
from usl.weights import shipped


class SubstanceQuality:
    name = "substance"
    can_tie = False
    cacheable = False   # a stored reading is a dictionary lookup

    def __init__(self, folder: str | Path | None = None, home: str | None = None):
        folder = Path(folder) if folder else shipped("fast-crm") / FOLDER
        if not (folder / "head.safetensors").is_file():
            raise FileNotFoundError(f"no substance reader in {folder} (adapter and head.safetensors)")
        self.bank = SubstanceBank.shared(folder, paths.cache_dir(home) / "substance")
        if self.bank.heads < 2:
            raise ValueError(f"{folder}: this substance reader has no quality head (train it with --pairs)")
        self.version = self.bank.digest

    @property
    def readings_dir(self) -> Path:
        return self.bank.folder

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def load_readers(self) -> None:
        """Load the reader ahead of the first new answer (``LoadsReaders``)."""
        self.bank.load_reader()

    def readings(self, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
        """``Q(A, B) = r(A) - r(B)`` for each pair, shape (n,)."""
        q = list(queries)
        r = self.bank.quality(q + q, list(answers_a) + list(answers_b))
        return (r[:len(q)] - r[len(q):]).astype(np.float32)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        q = self.readings([r.query for r in requests], [r.response_a for r in requests],
                          [r.response_b for r in requests])
        return [Verdict(float(p)) for p in 1.0 / (1.0 + np.exp(-q.astype(np.float64)))]


@register("substance")
def _substance(arg: str | None = None, home: str | None = None, **_) -> SubstanceQuality:
    return SubstanceQuality(arg or None, home=home)
