"""Progressive refinement: the fast judge's board now, the reference CRM's board as it is judged.

The fast path answers new criteria in a fraction of a second, but it is a different judge from the
pairwise CRM it stands in for (``scripts/crm_fidelity.py report`` measures how different). The
reference CRM costs one transformer pass per (model, query, order): minutes of CPU for a handful
of queries, most of an hour for the whole board. Refinement spends that cost a few queries at a
time, in a fixed order, and after every step gives the best estimate of the board the reference
would give on *all* the selected queries.

The estimate is the survey statistician's two-phase regression estimator (the same idea as
prediction-powered inference): the fast judge has scored every query, the reference a random
subset ``J``; per model,

    theta = mean_J(g) + lam * (mean_all(f) - mean_J(f))

with ``f`` the fast score, ``g`` the reference's, and ``lam`` the slope of ``g`` on ``f`` over the
judged pairs (pooled over models after centring each model, clipped to [0, 1]). Where the fast
judge predicts the reference well the correction removes most of the sampling noise of the
subset; where it does not (``lam`` near 0) the estimate is the plain mean over the judged queries:
never worse than ignoring the fast judge, up to the noise in ``lam``.

Then each model's correction of the fast board, ``d = theta - mean_all(f)``, is shrunk towards
the models' mean correction (James-Stein, per model, ``_shrink``): with a handful of judged
queries much of the spread of the ``d`` is the subset's sampling noise, and the shrunk board keeps
what stands out of it. The part of the residual ``e = g - lam f`` that all models share on a query
moves every correction alike: it is not shrunk, and its variance is added to every model's. Only
the subset's noise is shrunk, so a model whose every query is judged keeps its estimate, and once
every query is judged the win rates are the reference's exactly. On the 24 measured criteria sets
the refined board is closer to the reference's whole board than the fast board on 15 of them from
5 judged queries, 22 from 20.

Its variance, ``s2_g / n + (1/k - 1/n) s2_e`` (``k`` judged of ``n`` answered; the second term,
split into the shared part and Morris's empirical Bayes variance of the shrunk rest),
covers the same thing the fast board's bootstrap CI does, the reference's win rate on queries like
these; the CI uses Student's t with ``k - 1`` degrees of freedom, and each model's variances are
pulled towards all models' with the weight of ``PRIOR_QUERIES`` queries (a model that won its three
judged queries gets a wide interval, not a zero-width one). A model with fewer than two
judged queries keeps its fast estimate and CI.

The order is a fixed pseudo-random permutation of the query ids (a hash, so it does not depend on
the selection), and only a judged *prefix* of it is a random sample of the selection: judgments
cached for another selection (a topic refined first) count once the order reaches them, not
before. Judgments cached by one user's refinement serve the next user with the same criteria.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from usl.judges.base import Judge
from usl.leaderboard.answers import Answers
from usl.leaderboard.jobs import JobConfig, ScoringJob, cached_scores, score
from usl.leaderboard.judgments import JudgmentCache
from usl.leaderboard.stats import Summary, ci_rank

MIN_JUDGED = 2      # judged queries a model needs before its reference estimate replaces the fast one
STEP_ITEMS = 8      # (pair, order) items the reference judges between two progress reports within a query
                    # (a query is 2 x models items: ~20 CPU-seconds of the transformer CRM for 42 models)
PRIOR_QUERIES = 5   # weight, in queries, of the all-models variance in each model's variance


def refinement_order(query_ids: Sequence[str], salt: str = "usl-refine-1") -> list[str]:
    """``query_ids`` in the fixed order refinement judges them (stable under any sub-selection)."""
    return sorted(query_ids, key=lambda q: hashlib.sha256(f"{salt}\0{q}".encode()).hexdigest())


@dataclass(frozen=True)
class Refined:
    summary: Summary          # percent win rates, CIs, CI-aware ranks, answered counts
    judged: np.ndarray        # (M,) queries the reference judged, per model
    slope: float              # lam: how much of the fast judge's signal the estimate uses


def judge_in_order(data: Answers, reference: Judge, job: ScoringJob, fast: np.ndarray, cache: JudgmentCache,
                   config: JobConfig, queries: int | None, seconds: float | None,
                   progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, int]:
    """Judge up to ``queries`` more of ``job``'s queries with ``reference`` (None: all the rest), in the
    refinement order, stopping once ``seconds`` have passed (checked between queries); ``progress(done,
    total)`` counts queries, and is also called every :data:`STEP_ITEMS` items within a query (with the
    queries done so far), so that a progress that raises stops the reference within a few seconds of CPU.
    Judgments go to ``cache``, so a later call resumes where this one stopped.
    Returns the reference's matrix over the judged prefix of the order (NaN elsewhere: only that prefix is a
    random sample of the queries; other cached judgments, another topic refined first or a topic ranked with
    the reference, are left out) and how many queries the prefix holds."""
    g = cached_scores(data, reference, job, cache)
    todo = _judging_order(fast, g, job.query_ids)[1]
    total = len(todo) if queries is None else min(max(queries, 0), len(todo))
    t0 = time.monotonic()
    if progress:
        progress(0, total)
    step = dataclasses.replace(config, batch_size=min(config.batch_size, STEP_ITEMS))
    for done, qid in enumerate(todo[:total], 1):
        if seconds is not None and time.monotonic() - t0 >= seconds:
            break
        within = (lambda _d, _t, done=done: progress(done - 1, total)) if progress else None
        score(data, reference, dataclasses.replace(job, query_ids=(qid,)), cache, step, within)
        if progress:
            progress(done, total)
    g = cached_scores(data, reference, job, cache)
    sample = _judging_order(fast, g, job.query_ids)[0]
    g[:, ~np.isin(np.asarray(job.query_ids), sample)] = np.nan
    return g, len(sample)


def _judging_order(fast: np.ndarray, reference: np.ndarray, query_ids: tuple[str, ...]):
    """(the longest prefix of the refinement order whose every answered pair the reference has
    judged, the queries still to judge after it in that order); a query with no answered pair
    counts as judged."""
    missing = dict(zip(query_ids, (~np.isnan(fast) & np.isnan(reference)).any(axis=0)))
    order = refinement_order(query_ids)
    cut = next((i for i, q in enumerate(order) if missing[q]), len(order))
    return order[:cut], [q for q in order[cut:] if missing[q]]


def refine(fast: np.ndarray, reference: np.ndarray, fast_ci: np.ndarray | None = None,
           level: float = 0.95, slope: float | None = None, shrink: bool = True) -> Refined:
    """The reference judge's board estimated from its judged cells and the fast judge's full matrix.

    ``fast``: (M, Q) fast scores, NaN where unanswered. ``reference``: (M, Q) the reference's scores
    on the judged cells, NaN elsewhere; the judged queries must be a random sample of the queries
    (a prefix of ``refinement_order``), or the estimate is biased. ``fast_ci``: (M, 2) percent, the
    fast board's CI, kept for models with fewer than ``MIN_JUDGED`` judged queries (NaN if not
    given). ``slope``: use this slope instead of fitting one (a topic's board takes the whole
    board's, fitted on more pairs). ``shrink``: shrink the models' corrections of the fast board
    towards their mean (``_shrink``).
    """
    f = np.asarray(fast, dtype=np.float64)
    g = np.asarray(reference, dtype=np.float64)
    if f.shape != g.shape:
        raise ValueError(f"fast scores {f.shape} and reference scores {g.shape} differ in shape")
    answered = ~np.isnan(f)
    judged = answered & ~np.isnan(g)
    n, k = answered.sum(1), judged.sum(1)
    fj, gj = np.where(judged, f, np.nan), np.where(judged, g, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # rows with nothing judged: MIN_JUDGED handles them
        f_all = np.nanmean(np.where(answered, f, np.nan), 1)
        f_j, g_j = np.nanmean(fj, 1), np.nanmean(gj, 1)
        dx, dy = fj - f_j[:, None], gj - g_j[:, None]
        if slope is None:
            sxx = np.nansum(dx * dx)
            slope = float(np.clip(np.nansum(dx * dy) / sxx, 0.0, 1.0)) if sxx > 0 else 0.0
        theta = g_j + slope * (f_all - f_j)
        e = gj - slope * fj
        fpc = np.maximum(1.0 / k - 1.0 / n, 0.0)          # the judged subset's sampling noise
        ok = k >= MIN_JUDGED
        if shrink:
            # The models are judged on the same queries: the part of the residual all models share
            # on a query moves every correction alike (it is the mean correction's noise, never
            # shrunk); only the rest decides how far the corrections are pulled together.
            shared = np.nanmean(e, 0, keepdims=True)
            own_var = fpc * _shrunk_var(e - shared, k)
            theta, own_var = _shrink(f_all, theta, own_var, ok)
            q = np.isfinite(shared[0])
            shared_var = np.var(shared[0, q], ddof=1) if q.sum() >= 2 else 0.0
            sample_var = own_var + fpc * shared_var
        else:
            sample_var = fpc * _shrunk_var(e, k)
        theta = np.clip(theta, 0.0, 1.0)                 # a win rate, whatever the correction
        var = _shrunk_var(gj, k) / n + sample_var
        from scipy import stats as sps  # only a refined board pays for importing it (a third of a second)

        half = sps.t.ppf(0.5 + level / 2, np.maximum(k - 1, 1)) * np.sqrt(np.maximum(var, 0.0))
    win = np.where(ok, 100.0 * theta, 100.0 * f_all)
    ci = np.full((len(f), 2), np.nan) if fast_ci is None else np.array(fast_ci, dtype=np.float64)
    ci[ok] = np.stack([win[ok] - 100.0 * half[ok], win[ok] + 100.0 * half[ok]], 1)
    ci = np.clip(ci, 0.0, 100.0)
    return Refined(Summary(win_rate=win, ci=ci, n=n, rank=ci_rank(ci)), judged=k, slope=slope)



def _shrink(f_all: np.ndarray, theta: np.ndarray, var: np.ndarray, ok: np.ndarray):
    """Empirical Bayes (James-Stein) shrinkage of the per-model corrections ``d = theta - f_all``
    towards their mean, with Morris's variance for the shrunk estimates.

    With few judged queries most of the spread of the corrections is the subset's sampling noise
    ``var`` (per model); model i is pulled in by ``B_i = (m - 3) var_i / sum((d - mean d)^2)`` (at
    most 1), which keeps the part of the reference's disagreement with the fast judge that stands
    out of that noise. Only the subset's noise counts: a model whose every query is judged has
    ``var_i = 0`` and is not shrunk, and a complete board is the reference's. Fewer than 4 models:
    no shrinkage.
    """
    m = int(ok.sum())
    if m < 4:
        return theta, var
    d = theta[ok] - f_all[ok]
    spread = float(np.sum((d - d.mean()) ** 2))
    b = np.minimum(1.0, (m - 3) * var[ok] / spread) if spread > 0 else np.ones(m)
    theta, var = theta.copy(), var.copy()
    theta[ok] = f_all[ok] + d.mean() + (1.0 - b) * (d - d.mean())
    var[ok] = var[ok] * (1.0 - (m - 1) / m * b) + 2.0 / (m - 3) * b * b * (d - d.mean()) ** 2
    return theta, var


def _shrunk_var(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Each row's sample variance, pulled towards the variance of all rows (each row centred) with
    the weight of ``PRIOR_QUERIES`` queries: three judged wins out of three is not a zero-width CI.
    Where every judged value of every row is the same, the prior is the largest variance a score in
    [0, 1] with the row's Laplace-smoothed mean can have, ``p (1 - p)``."""
    has = k >= 1
    dof = int(k[has].sum() - has.sum())       # pooled within-row variance: one dof per row's mean
    pooled = 0.0
    if dof > 0:
        pooled = float(np.nansum((x[has] - np.nanmean(x[has], 1, keepdims=True)) ** 2) / dof)
    if not pooled > 0:
        p = (np.nansum(x, 1) + 1.0) / (k + 2.0)
        pooled = p * (1.0 - p)
    own, two = np.zeros(len(k)), k >= 2
    own[two] = np.nanvar(x[two], 1, ddof=1)
    return (np.maximum(k - 1, 0) * own + PRIOR_QUERIES * pooled) / (np.maximum(k - 1, 0) + PRIOR_QUERIES)
