"""A board's score matrix: every (model, query) cell's P(model's answer beats the baseline's), judged through
the judgment cache (``usl.leaderboard.jobs``) and kept in memory for the next board of the same judge,
criteria, models and queries; and the per-criterion breakdown of a board with several criteria.

The last ``memo_size`` matrices stay in memory, read-only: a repeated board (the page's default, a vote
on a board just ranked) costs a dictionary lookup instead of SQLite reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from usl.judges.base import Judge
from usl.leaderboard import stats
from usl.leaderboard.answers import Answers
from usl.leaderboard.jobs import JobConfig, ScoringJob, score_distributed
from usl.leaderboard.judgments import JudgmentCache
from usl.types import Criteria

Progress = Callable[[int, int], None]


class BoardScores:
    def __init__(self, cache: JudgmentCache, job_config: JobConfig = JobConfig(), memo_size: int = 32):
        self.cache, self.job_config = cache, job_config
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.Lock()    # the server scores from several threads; scoring runs outside it

    def score(self, data: Answers, judge: Judge, criteria: Criteria, baseline: str, models: list[str],
              query_ids: tuple[str, ...], progress: Progress | None = None) -> np.ndarray:
        """(len(models), len(query_ids)) probabilities, NaN where a model left a query unanswered."""
        key = (judge.identity, criteria.key(), data.name, data.benchmark.version, baseline, tuple(models),
               query_ids)
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        job = ScoringJob(criteria.canonical(), baseline, tuple(models), query_ids)
        s = score_distributed(data, judge, job, self.cache, self.job_config, progress)
        s.setflags(write=False)
        with self._lock:
            self._memo[key] = s
            while len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return s

    def clear(self) -> None:
        """Forget the matrices kept in memory (the judgment cache keeps their judgments)."""
        with self._lock:
            self._memo.clear()

    def per_criterion(self, criteria: Criteria, data: Answers, judge: Judge, baseline: str, models: list[str],
                      query_ids: tuple[str, ...], combined: np.ndarray, progress: Progress | None = None
                      ) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
        """Each criterion's own board (label -> model -> win rate) and its share of the combined board: the
        combined win rates fitted as a non-negative combination of the single-criterion ones (NNLS), shares
        summing to 1. Empty for fewer than two criteria."""
        parts = [(c, Criteria((c,))) for c in criteria.canonical().likes]
        parts += [(f"Avoid: {c}", Criteria((), (c,))) for c in criteria.canonical().avoid]
        if len(parts) < 2:
            return {}, {}
        breakdown, columns = {}, []
        for label, crit in parts:
            wr, _ = stats.win_rates(self.score(data, judge, crit, baseline, models, query_ids, progress))
            breakdown[label] = {m: _r(v) for m, v in zip(models, wr) if np.isfinite(v)}
            columns.append(wr)
        from scipy.optimize import nnls   # here: 0.5 s of import that a board of one criterion never needs

        target, _ = stats.win_rates(combined)
        x = np.stack(columns, axis=1)
        ok = np.isfinite(target) & np.isfinite(x).all(axis=1)
        weights = nnls(x[ok], target[ok])[0] if ok.sum() >= 2 else np.zeros(len(parts))
        total = weights.sum()
        shares = weights / total if total > 0 else np.full(len(parts), 1.0 / len(parts))
        return breakdown, {label: _r(w, 3) for (label, _), w in zip(parts, shares)}


def _r(x: float, digits: int = 2) -> float:
    return round(float(x), digits)
