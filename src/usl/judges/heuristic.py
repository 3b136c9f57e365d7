"""Baselines that ignore the criteria: the longer answer wins; a coin flip."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from usl.judges.base import JudgeRequest, Verdict
from usl.judges.registry import register


@dataclass
class LengthJudge:
    """The longer answer (in whitespace words) wins; equal lengths tie. The classic length bias."""

    name: str = "length"
    version: str = "1"
    can_tie: bool = True

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        out = []
        for r in requests:
            la, lb = len(r.response_a.split()), len(r.response_b.split())
            out.append(Verdict(1.0, 0.0) if la > lb else Verdict(0.0, 0.0) if lb > la else Verdict(0.0, 1.0))
        return out


@dataclass
class RandomJudge:
    """A fair coin per request, reproducible: seeded by the request's content and ``seed``."""

    seed: int = 0
    name: str = "random"
    can_tie: bool = False

    @property
    def version(self) -> str:
        return f"seed{self.seed}"

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        import hashlib

        out = []
        for r in requests:
            h = hashlib.sha256(f"{self.seed}\0{r.criteria.key()}\0{r.query}\0{r.response_a}\0{r.response_b}"
                               .encode()).digest()
            rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
            out.append(Verdict(float(rng.random() < 0.5)))
        return out


@register("length")
def _length(arg: str | None = None, **_) -> LengthJudge:
    if arg:
        raise ValueError(f"judge 'length:{arg}': length takes no argument")
    return LengthJudge()


@register("random")
def _random(arg: str | None = None, **_) -> RandomJudge:
    if arg and not arg.lstrip("-").isdigit():
        raise ValueError(f"judge 'random:{arg}': the seed must be an integer")
    return RandomJudge(seed=int(arg) if arg else 0)
