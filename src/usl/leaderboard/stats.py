"""Win rates, bootstrap confidence intervals, CI-aware ranks and rank correlations.

Everything works on one score matrix ``S`` of shape (models, queries): ``S[m, q]`` is model m's
share of the win against the baseline on query q, in [0, 1], already averaged over both
presentation orders, ties counting half; ``NaN`` where the model (or the baseline) has no answer.
Missing answers are excluded per model, never counted as a loss.

Worked example (2 models, 3 queries)::

    S = [[1.0, 0.5, nan],      # model 0: one win, one tie, one missing
         [0.0, 0.0, 1.0]]      # model 1
    win_rates(S) -> ([75.0, 33.33], n=[2, 3])

The overall win rate is the query-weighted micro average (the mean over answered queries), as in
the paper's leaderboard; per-topic win rates are the same mean over the topic's queries.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Per-model statistics; every array has one entry per model (row of ``S``)."""

    win_rate: np.ndarray      # (M,) percent; NaN for a model with no answered query
    ci: np.ndarray            # (M, 2) percent, bootstrap percentile interval
    n: np.ndarray             # (M,) answered queries
    rank: np.ndarray          # (M,) 1 + number of models significantly better


def win_rates(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Percent win rate per model (mean over answered queries) and the answered counts."""
    s = np.asarray(scores, dtype=np.float64)
    answered = ~np.isnan(s)
    n = answered.sum(axis=1)
    total = np.where(answered, s, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * total / n, n


def resample_counts(n_queries: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """(B, Q) matrix: how often each query is drawn in each bootstrap resample of the queries.

    Drawn once, seeded, and shared by every model, so the resamples are paired across models.
    """
    return _resample_counts(n_queries, n_bootstrap, seed).copy()


@functools.lru_cache(maxsize=8)
def _resample_counts(n_queries: int, n_bootstrap: int, seed: int, dtype: type = np.int64) -> np.ndarray:
    """``resample_counts`` as ``dtype``, read-only and kept: every board of a selection draws the same ones (the
    draw and the conversion cost a board of 483 queries ~10 ms)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_queries, size=(n_bootstrap, n_queries))
    flat = (idx + np.arange(n_bootstrap)[:, None] * n_queries).ravel()
    counts = np.bincount(flat, minlength=n_bootstrap * n_queries).reshape(n_bootstrap, n_queries).astype(dtype)
    counts.setflags(write=False)
    return counts


def bootstrap_means(scores: np.ndarray, n_bootstrap: int = 1000, seed: int = 0) -> np.ndarray:
    """(B, M) percent win rates, one row per resample of the queries (with replacement).

    Vectorised as two matrix products: resampled sums = C @ S0.T, resampled counts = C @ A.T, with
    ``C`` the (B, Q) draw counts, ``S0`` the scores with NaN as 0 and ``A`` the answered mask.
    """
    s = np.asarray(scores, dtype=np.float64)
    answered = ~np.isnan(s)
    counts = _resample_counts(s.shape[1], n_bootstrap, seed, np.float64)
    sums = counts @ np.where(answered, s, 0.0).T
    dens = counts @ answered.T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * sums / dens


def bootstrap_ci(scores: np.ndarray, n_bootstrap: int = 1000, seed: int = 0,
                 level: float = 0.95) -> np.ndarray:
    """(M, 2) percentile interval of the bootstrap win rates, percent."""
    means = bootstrap_means(scores, n_bootstrap, seed)
    tail = 100.0 * (1.0 - level) / 2.0
    lo_hi = np.full((means.shape[1], 2), np.nan)
    ok = ~np.all(np.isnan(means), axis=0)
    if ok.any():
        lo_hi[ok] = np.nanpercentile(means[:, ok], [tail, 100.0 - tail], axis=0).T
    return lo_hi


def ci_rank(ci: np.ndarray) -> np.ndarray:
    """Rank = 1 + the number of models whose CI lower bound is above this model's upper bound.

    This is LMArena's rule: a model only drops below those it is *significantly* worse than, so
    models with overlapping intervals share a rank. A model without an interval (NaN) ranks last.

    >>> ci_rank(np.array([[60, 70], [55, 65], [40, 50]]))
    array([1, 1, 3])
    """
    lo, hi = ci[:, 0], ci[:, 1]
    with np.errstate(invalid="ignore"):
        better = lo[None, :] > hi[:, None]          # better[i, j]: j significantly better than i
    rank = 1 + better.sum(axis=1)
    rank[np.isnan(hi)] = len(lo)
    return rank


def summarize(scores: np.ndarray, n_bootstrap: int = 1000, seed: int = 0) -> Summary:
    wr, n = win_rates(scores)
    ci = bootstrap_ci(scores, n_bootstrap, seed) if n_bootstrap > 0 else np.stack([wr, wr], axis=1)
    return Summary(win_rate=wr, ci=ci, n=n, rank=ci_rank(ci))


def topic_win_rates(scores: np.ndarray, topic_columns: Mapping[str, Sequence[int]]) -> dict[str, np.ndarray]:
    """Topic name -> (M,) percent win rate over the topic's query columns (NaN if none answered)."""
    s = np.asarray(scores, dtype=np.float64)
    return {name: win_rates(s[:, np.asarray(cols, dtype=int)])[0] for name, cols in topic_columns.items()}


def paired(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The models present (and finite) in both boards, with their two values."""
    common = [m for m in a if m in b and np.isfinite(a[m]) and np.isfinite(b[m])]
    return common, np.array([a[m] for m in common], float), np.array([b[m] for m in common], float)


def _scipy_stats():
    """scipy.stats, imported by the correlations alone: it costs a board ranked in a fresh process a third
    of a second, and a board needs none of it."""
    from scipy import stats

    return stats


def kendall_tau(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Kendall's tau-b between two boards (model -> score), over the models both contain."""
    _, x, y = paired(a, b)
    if len(x) < 2:
        raise ValueError(f"need at least 2 common models to correlate, got {len(x)}")
    return float(_scipy_stats().kendalltau(x, y).statistic)


def spearman_rho(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Spearman's rho between two boards (model -> score), over the models both contain."""
    _, x, y = paired(a, b)
    if len(x) < 2:
        raise ValueError(f"need at least 2 common models to correlate, got {len(x)}")
    return float(_scipy_stats().spearmanr(x, y).statistic)


def agreement(ours: Mapping[str, float], reference: Mapping[str, float]) -> dict:
    """``{n_models, spearman_rho, kendall_tau, models}`` between two boards (model -> score)."""
    common = paired(ours, reference)[0]
    return {"n_models": len(common), "spearman_rho": spearman_rho(ours, reference),
            "kendall_tau": kendall_tau(ours, reference), "models": common}


def correlation_ci(scores: np.ndarray, models: Sequence[str], reference: Mapping[str, float],
                   n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of Spearman's rho and Kendall's tau-b between our board (``scores``:
    models x queries, the rows named by ``models``) and a fixed ``reference`` board, over the same
    paired resamples of the queries as the win rates' intervals. They say how much the agreement
    owes to which queries happened to be asked; the reference's own noise is not in them."""
    idx = [i for i, m in enumerate(models) if m in reference and np.isfinite(reference[m])]
    if len(idx) < 3:
        raise ValueError(f"need at least 3 common models for an interval, got {len(idx)}")
    means = bootstrap_means(np.asarray(scores, dtype=np.float64)[idx], n_bootstrap, seed)
    ref = np.array([reference[models[i]] for i in idx], float)
    whole = np.isfinite(means).all(1)
    rho, tau = list(_spearman_rows(means[whole], ref)), list(_kendall_b_rows(means[whole], ref))
    sps = _scipy_stats()
    for row in means[~whole]:               # a resample without some model's scores (rare): one at a time
        ok = np.isfinite(row)
        if ok.sum() >= 3:
            rho.append(sps.spearmanr(row[ok], ref[ok]).statistic)
            tau.append(sps.kendalltau(row[ok], ref[ok]).statistic)
    tail = 100.0 * (1.0 - level) / 2.0
    interval = lambda v: tuple(float(x) for x in np.nanpercentile(v, [tail, 100.0 - tail]))
    return {"spearman_rho": interval(rho), "kendall_tau": interval(tau)}


def _spearman_rows(rows: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row against ``ref`` (ties at their mean rank), as ``scipy.stats.spearmanr``
    gives it a row at a time: 1,000 resamples of 42 models in milliseconds rather than a third of a second."""
    if not len(rows):
        return np.zeros(0)
    r = _scipy_stats().rankdata(rows, axis=1)
    q = _scipy_stats().rankdata(ref)
    r = r - r.mean(1, keepdims=True)
    q = q - q.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (r @ q) / np.sqrt((r * r).sum(1) * (q @ q))


def _kendall_b_rows(rows: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row against ``ref``, as ``scipy.stats.kendalltau`` gives it a row at a time:
    the sum over pairs of the product of their orders' signs, over the square root of the number of pairs
    untied in each."""
    if not len(rows):
        return np.zeros(0)
    i, j = np.triu_indices(rows.shape[1], 1)
    sx, sy = np.sign(rows[:, i] - rows[:, j]), np.sign(ref[i] - ref[j])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx @ sy) / np.sqrt((sx != 0).sum(1) * (sy != 0).sum())
