"""``substance[:DIR]``: the substance reader's quality head as a judge and as the default judge's quality reader.

The substance reader (``usl.fast.substance``) reads each (query, answer) once; trained on preference pairs as
well, it gives beside ``z`` (does this answer the query) a Bradley-Terry score ``r`` of the answer's quality,
so the quality of a pair costs no pass of its own: ``Q(A, B) = r(A) - r(B)``, antisymmetric by construction.
As a judge it answers "which answer is better overall", whatever criteria it is given. ``DIR`` is the
reader's folder (default: the shipped judge's ``fast-crm/substance``); the readings are the bank's
(:meth:`~usl.fast.substance.SubstanceBank.shared`), so the default judge reads each answer once for both
terms.

**Length-corrected.** ``r`` learned from LLM judges' labels, and those favour longer answers: between one
model's concise and verbose answers to a query, which say the same at two lengths, ``r`` rises with length.
Where the reader's folder holds ``length_correction.json`` (:func:`fit_length_correction`, ``usl quality
fit-length``), that rise is taken out, as AlpacaEval's length-controlled win rate does for its judge:

    Q(A, B) = r(A) - r(B) - lambda * (log words(A) - log words(B))

``lambda`` is the least-squares slope of ``r(longer) - r(shorter)`` on their log length ratio over such pairs
of training queries. Length is then the criteria's to decide (the fast CRM's length prior), and quality
what the answers say.
"""

from __future__ import annotations

import json
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
        self.length_slope = length_slope(folder)
        # a reading under another slope is another reading: stored quality banks are kept per identity
        self.version = self.bank.digest + (f"-lc{self.length_slope:.4f}" if self.length_slope else "")

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
        out = r[:len(q)] - r[len(q):]
        if self.length_slope:
            out = out - self.length_slope * (log_words(answers_a) - log_words(answers_b))
        return out.astype(np.float32)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        q = self.readings([r.query for r in requests], [r.response_a for r in requests],
                          [r.response_b for r in requests])
        return [Verdict(float(p)) for p in 1.0 / (1.0 + np.exp(-q.astype(np.float64)))]


LENGTH_FILE = "length_correction.json"


def log_words(texts: Sequence[str]) -> np.ndarray:
    """log of each text's word count (at least one word)."""
    return np.log(np.array([max(1, len(t.split())) for t in texts], dtype=np.float64))


def length_slope(folder: str | Path) -> float:
    """The reader's fitted ``lambda`` (0 where its folder holds no ``length_correction.json``)."""
    path = Path(folder) / LENGTH_FILE
    if not path.is_file():
        return 0.0
    try:
        return float(json.loads(path.read_text())["slope"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a length correction ({e}); refit it with usl quality fit-length") from None


def fit_length_correction(r_short: np.ndarray, r_long: np.ndarray, short: Sequence[str], long: Sequence[str]) -> dict:
    """``lambda``, the least-squares slope through the origin of ``r(long) - r(short)`` on the log length ratio
    (:func:`log_words`), over pairs of one model's shorter and longer answers to one query (which say the same
    at two lengths); with the share of the readings' spread it explains (r2) and the pairs' count."""
    dr = np.asarray(r_long, np.float64) - np.asarray(r_short, np.float64)
    dl = log_words(long) - log_words(short)
    if len(dr) < 2 or not np.any(dl):
        raise ValueError("too few pairs of different lengths to fit a length correction")
    slope = float(dr @ dl / (dl @ dl))
    r2 = 1.0 - float(((dr - slope * dl) ** 2).sum() / max((dr ** 2).sum(), 1e-12))
    return {"slope": slope, "r2": round(r2, 4), "pairs": int(len(dr)),
            "longer_read_better": round(float(np.mean(dr > 0)), 4)}


@register("substance")
def _substance(arg: str | None = None, home: str | None = None, **_) -> SubstanceQuality:
    return SubstanceQuality(arg or None, home=home)
