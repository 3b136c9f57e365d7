"""Scalar rewards from any judge, for training loops: one number per response to a prompt.

A judge answers "which of two responses does this user prefer" (``Judge.judge``). A reinforcement
learning loop wants one reward per response. The reduction, for the responses r_1..r_n to one prompt:

- with a reference answer: ``reward_i = logit P(r_i beats the reference)``;
- without one: ``reward_i = mean over j != i of logit P(r_i beats r_j)``, 0 for a lone response.

P is averaged over both presentation orders (``(p_a(r_i, r_j) + p_b(r_j, r_i)) / 2``, ties half), and
clipped to [1e-6, 1 - 1e-6] before the logit. For a Bradley-Terry judge (a pointwise head, whose
P(i beats j) = sigmoid(s_i - s_j)) the group reduction is s_i minus the mean score of the group: the
head's own score up to a shift per prompt, so rewards of one prompt's responses compare as the scores
do. Worked example: two responses that a judge rates P(r_1 beats r_2) = 0.8 get rewards
logit(0.8) = 1.386 and logit(0.2) = -1.386.

Every pair of a batch goes to the judge in one ``judge`` call (one criteria set costs one pass for the
fast CRM whatever the batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from usl.judges.base import Judge, JudgeRequest, Verdict
from usl.types import Criteria

EPS = 1e-6


@dataclass(frozen=True)
class RewardItem:
    """One prompt and the responses to score; ``reference``: an answer to score them against."""

    prompt: str
    responses: tuple[str, ...]
    reference: str | None = None


@dataclass(frozen=True)
class Rewards:
    """``rewards[i]`` for ``responses[i]``; ``pairwise[i][j]`` = P(responses[i] beats responses[j])
    (0.5 on the diagonal), and ``vs_reference[i]`` = P(responses[i] beats the reference), when asked."""

    rewards: tuple[float, ...]
    pairwise: tuple[tuple[float, ...], ...] | None = None
    vs_reference: tuple[float, ...] | None = None


def logit(p: float) -> float:
    p = min(max(p, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def score_batch(judge: Judge, criteria: Criteria, items: Sequence[RewardItem],
                pairwise: bool = False) -> list[Rewards]:
    """Rewards for every item, all pairs judged in one call; ``pairwise`` adds the matrix among each
    item's responses even when a reference is given (it is always computed without one)."""
    requests = pair_requests(criteria, items, pairwise)
    return rewards_of(items, judge.judge(requests) if requests else [], pairwise)


def pair_requests(criteria: Criteria, items: Sequence[RewardItem], pairwise: bool = False) -> list[JudgeRequest]:
    """What ``score_batch`` asks the judge: each pair of each item in both orders, (a, b) then (b, a).
    A caller may judge them in slices (the server does, to stop between two) and hand every verdict,
    in order, to ``rewards_of``."""
    requests: list[JudgeRequest] = []
    for it in items:
        for a, b in _pairs(it, pairwise):
            requests += [JudgeRequest(criteria, it.prompt, a, b), JudgeRequest(criteria, it.prompt, b, a)]
    return requests


def rewards_of(items: Sequence[RewardItem], verdicts: Sequence[Verdict], pairwise: bool = False) -> list[Rewards]:
    """The rewards from the verdicts of ``pair_requests(criteria, items, pairwise)``, in its order."""
    verdicts = iter(verdicts)
    out = []
    for it in items:
        probs = {}
        for key in _pair_keys(it, pairwise):
            first, second = next(verdicts), next(verdicts)
            probs[key] = (first.score_a + (1.0 - second.score_a)) / 2
        out.append(_reduce(it, probs, pairwise))
    return out


def _pair_keys(it: RewardItem, pairwise: bool) -> list[tuple[int, int]]:
    """(i, j) with j = -1 for the reference; among responses, i < j."""
    n = len(it.responses)
    keys = [(i, -1) for i in range(n)] if it.reference is not None else []
    if it.reference is None or pairwise:
        keys += [(i, j) for i in range(n) for j in range(i + 1, n)]
    return keys


def _pairs(it: RewardItem, pairwise: bool) -> list[tuple[str, str]]:
    return [(it.responses[i], it.reference if j < 0 else it.responses[j]) for i, j in _pair_keys(it, pairwise)]


def _reduce(it: RewardItem, probs: dict[tuple[int, int], float], pairwise: bool) -> Rewards:
    n = len(it.responses)
    vs_ref = tuple(probs[(i, -1)] for i in range(n)) if it.reference is not None else None
    matrix = None
    if it.reference is None or pairwise:
        p = [[0.5] * n for _ in range(n)]
        for (i, j), v in probs.items():
            if j >= 0:
                p[i][j], p[j][i] = v, 1.0 - v
        matrix = tuple(tuple(row) for row in p)
    if vs_ref is not None:
        rewards = tuple(logit(v) for v in vs_ref)
    else:
        rewards = tuple(sum(logit(matrix[i][j]) for j in range(n) if j != i) / (n - 1) if n > 1 else 0.0
                        for i in range(n))
    return Rewards(rewards, matrix if pairwise else None, vs_ref)
