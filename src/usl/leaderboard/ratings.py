"""Bradley–Terry ratings over all models, from the same per-query scores the win rates use.

Every model is judged only against the baseline, so head-to-head outcomes between two models are
derived per query, as if their two matches against the baseline were independent: on query q,
model i "beats" model j with weight ``S[i, q] * (1 - S[j, q])`` (i won its match, j lost its own)
and loses with weight ``S[j, q] * (1 - S[i, q])``; when both won or both lost, the query says
nothing about their order. With hard 0/1 scores this is "decisive queries only", and the odds it
implies equal the ratio of the two models' odds against the baseline, so the derived games agree
with the direct ones instead of being pulled together by ties. Only queries both answered count.
The baseline joins as one more player whose result against model i on query q is ``1 - S[i, q]``.
The strengths are fitted by Hunter's (2004) MM algorithm
(the textbook fixed point ``p_i = W_i / sum_j N_ij / (p_i + p_j)``) and reported on the Elo scale,
``400 * log10(p_i / p_baseline) + 1000``, so the baseline sits at 1000.
"""

from __future__ import annotations

import numpy as np


def pairwise_wins(scores: np.ndarray) -> np.ndarray:
    """(M+1, M+1) matrix ``W[i, j]`` = (expected) wins of i over j; the last player is the baseline."""
    s = np.asarray(scores, dtype=np.float64)
    m = s.shape[0]
    answered = ~np.isnan(s)
    won = np.where(answered, s, 0.0)
    lost = np.where(answered, 1.0 - s, 0.0)
    w = np.zeros((m + 1, m + 1))
    w[:m, :m] = won @ lost.T          # sums over queries both answered (a missing one is 0 in both)
    np.fill_diagonal(w, 0.0)
    w[:m, m] = won.sum(axis=1)        # model vs baseline: its score
    w[m, :m] = lost.sum(axis=1)       # baseline vs model
    return w


def fit_bradley_terry(wins: np.ndarray, max_iter: int = 10_000, tol: float = 1e-10,
                      prior: float = 0.5) -> np.ndarray:
    """Log-strengths (natural log, mean zero) from a wins matrix ``W[i, j]``.

    ``prior`` adds that many virtual ties between every pair of players who met, which keeps
    the fit finite when a player won (or lost) every comparison.

    Textbook check: two players, A beat B 3 times of 4: p_A / p_B = 3 exactly (prior=0).
    """
    w = np.asarray(wins, dtype=np.float64).copy()
    games = w + w.T
    w = w + prior * 0.5 * (games > 0)
    n = w + w.T
    total_wins = w.sum(axis=1)
    p = np.ones(len(w))
    for _ in range(max_iter):
        denom = (n / (p[:, None] + p[None, :])).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            new = np.where(denom > 0, total_wins / denom, p)
        new = np.maximum(new, 1e-300)
        new /= np.exp(np.mean(np.log(new)))
        if np.max(np.abs(np.log(new) - np.log(p))) < tol:
            p = new
            break
        p = new
    logp = np.log(p)
    return logp - logp.mean()


def elo_ratings(scores: np.ndarray) -> np.ndarray:
    """(M,) Bradley–Terry ratings on the Elo scale, baseline = 1000."""
    logp = fit_bradley_terry(pairwise_wins(scores))
    return 1000.0 + 400.0 / np.log(10.0) * (logp[:-1] - logp[-1])
