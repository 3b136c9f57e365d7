"""Scoring jobs: judge every (model answer, baseline answer) pair, in both orders, with a cache.

A job is (benchmark, queries, criteria, judge, baseline, models). Its result is the score matrix
``S`` (models x queries) that ``usl.leaderboard.stats`` consumes: ``S[m, q]`` is the model's
share of the win against the baseline, averaged over the two presentation orders::

    S[m, q] = ( score_a(model first) + (1 - score_a(baseline first)) ) / 2

with ``score_a = p_a + p_tie / 2``. NaN where the model or the baseline did not answer q.

Three ways to obtain verdicts, chosen by what the judge offers (never by its name):

- ``judge.judge(requests)`` (the protocol): batches of ``batch_size`` requests; each finished
  batch is committed to the judgment cache before the next starts, so a killed job resumes where
  it stopped and re-running a finished job judges nothing.
- ``judge.judge_matrix(criteria, queries, model_answers, baseline_answers) -> (n,) array`` (an
  optional fast path for vectorised judges): already averaged over both orders; cached with
  order code ``BOTH_ORDERS``.
- ``judge.cacheable = False``: the judge is cheaper to rerun than the SQLite cache is to read,
  so the store is skipped entirely.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np

from usl.judges.base import Judge, JudgeRequest
from usl.leaderboard.answers import Answers
from usl.leaderboard.judgments import (BASELINE_FIRST, BOTH_ORDERS, MODEL_FIRST, CacheScope, Judgment,
                                       JudgmentCache)
from usl.types import Criteria

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ScoringJob:
    criteria: Criteria
    baseline: str
    models: tuple[str, ...]
    query_ids: tuple[str, ...]


@dataclass(frozen=True)
class JobConfig:
    batch_size: int = 64          # requests per judge call and per committed cache batch
    matrix_batch_size: int = 4096  # pairs per judge_matrix call (and per committed batch)


def _pairs(data: Answers, job: ScoringJob) -> list[tuple[int, int]]:
    """(model row, query column) of every pair where both the model and the baseline answered."""
    out = []
    has_base = [(q, job.baseline) in data.responses for q in job.query_ids]
    for i, m in enumerate(job.models):
        for j, q in enumerate(job.query_ids):
            if has_base[j] and (q, m) in data.responses:
                out.append((i, j))
    return out


def score(data: Answers, judge: Judge, job: ScoringJob, cache: JudgmentCache | None = None,
          config: JobConfig = JobConfig(), progress: Progress | None = None) -> np.ndarray:
    """The (len(models), len(query_ids)) score matrix of the job; see the module docstring."""
    pairs = _pairs(data, job)
    if not getattr(judge, "cacheable", True):
        cache = None
    scope = CacheScope(judge.identity, job.criteria.key(), data.name, job.baseline)
    if hasattr(judge, "judge_matrix"):
        return _score_matrix_path(data, judge, job, pairs, cache, scope, config, progress)
    return _score_requests(data, judge, job, pairs, cache, scope, config, progress)


def _contents(data: Answers, job: ScoringJob, pairs: list[tuple[int, int]]) -> list[int]:
    return [data.content(job.query_ids[j], job.models[i], job.baseline) for i, j in pairs]


def _score_matrix_path(data, judge, job, pairs, cache, scope, config, progress) -> np.ndarray:
    s = np.full((len(job.models), len(job.query_ids)), np.nan)
    todo = pairs
    contents: list[int] = []
    if cache is not None:
        contents = _contents(data, job, pairs)
        known = cache.lookup(scope)
        todo, todo_c = [], []
        for (i, j), c in zip(pairs, contents):
            hit = known.get((job.models[i], job.query_ids[j], BOTH_ORDERS, c))
            if hit is None:
                todo.append((i, j))
                todo_c.append(c)
            else:
                s[i, j] = hit[0] + 0.5 * hit[1]
        contents = todo_c
    step = config.matrix_batch_size if cache is not None else max(len(todo), 1)
    for start in range(0, len(todo), step):
        chunk = todo[start:start + step]
        qs = [data.query_text[job.query_ids[j]] for _, j in chunk]
        ma = [data.responses[(job.query_ids[j], job.models[i])] for i, j in chunk]
        ba = [data.responses[(job.query_ids[j], job.baseline)] for _, j in chunk]
        vals = np.asarray(judge.judge_matrix(job.criteria, qs, ma, ba), dtype=np.float64)
        if vals.shape != (len(chunk),):
            raise ValueError(f"judge {judge.identity}: judge_matrix returned shape {vals.shape}, "
                             f"expected ({len(chunk)},)")
        rows, cols = zip(*chunk)
        s[list(rows), list(cols)] = vals
        if cache is not None:
            cache.insert(scope, [Judgment(job.models[i], job.query_ids[j], BOTH_ORDERS, c, float(v))
                                 for (i, j), c, v in zip(chunk, contents[start:start + step], vals)])
        if progress:
            progress(min(start + step, len(todo)), len(todo))
    return s


def _score_requests(data, judge, job, pairs, cache, scope, config, progress) -> np.ndarray:
    m, q = len(job.models), len(job.query_ids)
    first = np.full((m, q), np.nan)    # score_a with the model answer shown first
    second = np.full((m, q), np.nan)   # score_a with the baseline answer shown first
    contents = _contents(data, job, pairs) if cache is not None else [0] * len(pairs)
    known = cache.lookup(scope) if cache is not None else {}
    todo: list[tuple[int, int, int, int]] = []   # (i, j, order, content)
    for (i, j), c in zip(pairs, contents):
        for order, target in ((MODEL_FIRST, first), (BASELINE_FIRST, second)):
            hit = known.get((job.models[i], job.query_ids[j], order, c))
            if hit is None:
                todo.append((i, j, order, c))
            else:
                target[i, j] = hit[0] + 0.5 * hit[1]
    if todo:
        log.info("judging %d of %d (pair, order) items with %s (%d cached)", len(todo), 2 * len(pairs),
                 judge.identity, 2 * len(pairs) - len(todo))
    for start in range(0, len(todo), config.batch_size):
        chunk = todo[start:start + config.batch_size]
        requests = [_request(data, job, i, j, order) for i, j, order, _ in chunk]
        verdicts = judge.judge(requests)
        if len(verdicts) != len(requests):
            raise ValueError(f"judge {judge.identity} returned {len(verdicts)} verdicts for "
                             f"{len(requests)} requests")
        for (i, j, order, _), v in zip(chunk, verdicts):
            (first if order == MODEL_FIRST else second)[i, j] = v.score_a
        if cache is not None:
            cache.insert(scope, [Judgment(job.models[i], job.query_ids[j], order, c, v.p_a, v.p_tie)
                                 for (i, j, order, c), v in zip(chunk, verdicts)])
        if progress:
            progress(min(start + config.batch_size, len(todo)), len(todo))
    return 0.5 * (first + (1.0 - second))


def _request(data: Answers, job: ScoringJob, i: int, j: int, order: int) -> JudgeRequest:
    qid, model = job.query_ids[j], job.models[i]
    mine, base = data.responses[(qid, model)], data.responses[(qid, job.baseline)]
    a, b = (mine, base) if order == MODEL_FIRST else (base, mine)
    return JudgeRequest(job.criteria, data.query_text[qid], a, b)

