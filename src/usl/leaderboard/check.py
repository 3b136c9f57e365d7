"""How often the judge agrees with a user's own votes ("check the judge on your taste").

A vote says which of two answers the user preferred (or a tie); the judge's reading is P(model's
answer beats the baseline's). The judge agrees with a decided vote when it prefers the same answer
(P > 0.5 for the model's, < 0.5 for the baseline's); ties are counted apart, not as agreement. The
interval is Wilson's 95% score interval over the decided votes, which stays inside [0, 1] and is
sensible for the ten or so votes a user gives (a normal interval at 9 of 10 would reach past 1).

Worked example: 8 of 10 decided votes agree -> rate 0.8, interval 0.49-0.94.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Agreement:
    decided: int          # votes that preferred one answer
    agree: int            # of those, the judge preferred the same
    ties: int
    rate: float | None    # agree / decided (None without a decided vote)
    ci: tuple[float, float] | None


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def agreement(choices: Sequence[str], p_model: Sequence[float]) -> Agreement:
    """``choices``: "model" / "baseline" / "tie" per vote; ``p_model``: the judge's P(model wins)."""
    decided = [(c, p) for c, p in zip(choices, p_model) if c != "tie"]
    agree = sum((c == "model") == (p > 0.5) for c, p in decided if p != 0.5)
    n = len(decided)
    return Agreement(n, agree, len(choices) - n, agree / n if n else None, wilson(agree, n) if n else None)


def suggest_length(choices: Sequence[str], model_words: Sequence[int], baseline_words: Sequence[int],
                   mentioned: bool, min_votes: int = 5, share: float = 0.75) -> str | None:
    """A length criterion the votes show and the criteria do not say: when at least ``share`` of the
    decided votes between answers of clearly different length (one 1.5 times the other) went to the
    shorter (or the longer) one."""
    if mentioned:
        return None
    shorter = longer = 0
    for c, m, b in zip(choices, model_words, baseline_words):
        if c == "tie" or max(m, b) < 1.5 * max(min(m, b), 1):
            continue
        chose_model_shorter = (c == "model") == (m < b)
        shorter += chose_model_shorter
        longer += not chose_model_shorter
    n = shorter + longer
    if n < min_votes:
        return None
    if shorter >= share * n:
        return f"Short answers that get to the point (you chose the shorter answer {shorter} times of {n})"
    if longer >= share * n:
        return f"Detailed, thorough answers (you chose the longer answer {longer} times of {n})"
    return None
