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
- ``judge.judge_matrix(criteria, queries, model_answers, baseline_answers, progress) -> (n,) array``
  (an optional fast path for vectorised judges): already averaged over both orders; cached with
  order code ``BOTH_ORDERS``. A judge that reads something slow first (the default judge's quality
  readings of new pairs) calls ``progress`` between its batches, which is where a job nobody waits
  for is stopped (the callback raises).
- ``judge.cacheable = False``: the judge is cheaper to rerun than the SQLite cache is to read,
  so the store is skipped entirely.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from usl.judges.base import Judge, JudgeRequest, MatrixJudge, cacheable
from usl.leaderboard.answers import Answers, PairGrid
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
    shard: tuple[int, int] = (0, 1)  # (this process, processes): judge only every n-th uncached pair


def score(data: Answers, judge: Judge, job: ScoringJob, cache: JudgmentCache | None = None,
          config: JobConfig = JobConfig(), progress: Progress | None = None) -> np.ndarray:
    """The (len(models), len(query_ids)) score matrix of the job; see the module docstring."""
    grid = data.grid(job.baseline, tuple(job.models), tuple(job.query_ids))
    if not cacheable(judge):
        cache = None
    scope = CacheScope(judge.identity, job.criteria.key(), data.name, job.baseline)
    if isinstance(judge, MatrixJudge):
        return _score_matrix_path(data, judge, job, grid, cache, scope, config, progress)
    return _score_requests(data, judge, job, grid, cache, scope, config, progress)


def cached_scores(data: Answers, judge: Judge, job: ScoringJob, cache: JudgmentCache) -> np.ndarray:
    """The job's score matrix from the judgment cache alone, judging nothing: NaN wherever a
    verdict (either order, for a judge without ``judge_matrix``) is not stored yet."""
    grid = data.grid(job.baseline, tuple(job.models), tuple(job.query_ids))
    scope = CacheScope(judge.identity, job.criteria.key(), data.name, job.baseline)
    if isinstance(judge, MatrixJudge):
        (s,) = _cached(cache, scope, grid, (BOTH_ORDERS,))
    else:
        first, second = _cached(cache, scope, grid, (MODEL_FIRST, BASELINE_FIRST))
        s = 0.5 * (first + (1.0 - second))
    s[~grid.answered] = np.nan
    return s


def _cached(cache: JudgmentCache | None, scope: CacheScope, grid: PairGrid, orders: tuple[int, ...]):
    if cache is None:
        return [np.full(grid.content.shape, np.nan) for _ in orders]
    return cache.lookup(scope).fill(grid.models, grid.query_ids, grid.content, orders)


def _score_matrix_path(data, judge, job, grid, cache, scope, config, progress) -> np.ndarray:
    (s,) = _cached(cache, scope, grid, (BOTH_ORDERS,))
    rows, cols = np.nonzero(grid.answered)
    todo = np.flatnonzero(np.isnan(s[rows, cols]))          # positions into the answered pairs
    qs, ma, ba = data.pair_texts(grid, job.baseline)
    step = config.matrix_batch_size if cache is not None else max(len(todo), 1)
    for start in range(0, len(todo), step):
        idx = todo[start:start + step]
        whole = len(idx) == len(qs)                          # the usual uncached case: no copying
        vals = np.asarray(judge.judge_matrix(job.criteria, qs if whole else [qs[k] for k in idx],
                                             ma if whole else [ma[k] for k in idx],
                                             ba if whole else [ba[k] for k in idx], progress), dtype=np.float64)
        if vals.shape != (len(idx),):
            raise ValueError(f"judge {judge.identity}: judge_matrix returned shape {vals.shape}, "
                             f"expected ({len(idx)},)")
        r, c = rows[idx], cols[idx]
        s[r, c] = vals
        if cache is not None:
            cache.insert(scope, [Judgment(job.models[i], job.query_ids[j], BOTH_ORDERS, int(grid.content[i, j]),
                                          float(v)) for i, j, v in zip(r.tolist(), c.tolist(), vals.tolist())])
        if progress:
            progress(min(start + step, len(todo)), len(todo))
    return s


def _score_requests(data, judge, job, grid, cache, scope, config, progress) -> np.ndarray:
    # first: score_a with the model answer shown first; second: with the baseline's shown first
    first, second = _cached(cache, scope, grid, (MODEL_FIRST, BASELINE_FIRST))
    todo: list[tuple[int, int, int]] = []   # (i, j, order)
    for order, target in ((MODEL_FIRST, first), (BASELINE_FIRST, second)):
        todo += [(int(i), int(j), order) for i, j in zip(*np.nonzero(grid.answered & np.isnan(target)))]
    todo.sort()
    todo = _shard(todo, config.shard, grid.answered)
    n_items = 2 * int(grid.answered.sum())
    if todo:
        log.debug("judging %d of %d (pair, order) items with %s (%d cached)", len(todo), n_items,
                 judge.identity, n_items - len(todo))
    for start in range(0, len(todo), config.batch_size):
        chunk = todo[start:start + config.batch_size]
        requests = [_request(data, job, i, j, order) for i, j, order in chunk]
        verdicts = judge.judge(requests)
        if len(verdicts) != len(requests):
            raise ValueError(f"judge {judge.identity} returned {len(verdicts)} verdicts for "
                             f"{len(requests)} requests")
        for (i, j, order), v in zip(chunk, verdicts):
            (first if order == MODEL_FIRST else second)[i, j] = v.score_a
        if cache is not None:
            cache.insert(scope, [Judgment(job.models[i], job.query_ids[j], order, int(grid.content[i, j]),
                                          v.p_a, v.p_tie) for (i, j, order), v in zip(chunk, verdicts)])
        if progress:
            progress(min(start + config.batch_size, len(todo)), len(todo))
    return 0.5 * (first + (1.0 - second))


def _shard(todo: list[tuple[int, int, int]], shard: tuple[int, int],
           answered: np.ndarray) -> list[tuple[int, int, int]]:
    """This process's part of the (i, j, order) items: every ``n``-th answered (model, query) pair,
    both of its orders together (a judge that averages the orders runs them once). The split
    depends on the grid alone, not on what is cached yet: processes that start at different
    moments still divide the pairs between them without a gap."""
    rank, n = shard
    if not 0 <= rank < n:
        raise ValueError(f"shard {shard}: expected (rank, processes) with 0 <= rank < processes")
    if n == 1:
        return todo
    mine = {(int(i), int(j)) for i, j in np.argwhere(answered)[rank::n]}
    return [t for t in todo if (t[0], t[1]) in mine]


def score_distributed(data: Answers, judge: Judge, job: ScoringJob, cache: JudgmentCache,
                      config: JobConfig = JobConfig(), progress: Progress | None = None) -> np.ndarray:
    """``score`` split over the processes of a ``torch.distributed`` group (``torchrun``, one
    process a GPU): each judges its shard of the uncached pairs into the one judgment store (SQLite
    in WAL mode; a verdict's key is unique, so nothing is stored twice), waits for the others, and
    returns the whole matrix read back from the store. Without a process group: plain ``score``."""
    import dataclasses

    # a judge_matrix judge is vectorised and cheap: each process runs it whole (the store keeps one copy).
    # A process group lives only in a process that has imported torch (torchrun's workers): a board
    # ranked without torch must not import it (a second) only to find there is none
    dist = sys.modules.get("torch.distributed")
    if isinstance(judge, MatrixJudge) or dist is None or not (dist.is_available() and dist.is_initialized()) \
            or dist.get_world_size() == 1:
        return score(data, judge, job, cache, config, progress)
    score(data, judge, job, cache, dataclasses.replace(config, shard=(dist.get_rank(), dist.get_world_size())),
          progress)
    dist.barrier()
    return cached_scores(data, judge, job, cache)


def _request(data: Answers, job: ScoringJob, i: int, j: int, order: int) -> JudgeRequest:
    qid, model = job.query_ids[j], job.models[i]
    mine, base = data.responses[(qid, model)], data.responses[(qid, job.baseline)]
    a, b = (mine, base) if order == MODEL_FIRST else (base, mine)
    return JudgeRequest(job.criteria, data.query_text[qid], a, b)
