"""Length-controlled win rate, in the manner of AlpacaEval-LC (Dubois et al., 2024).

Judges (LLMs and reward models alike) tend to prefer longer answers, so a model can climb a
leaderboard by talking more. For each model m we fit a logistic regression of its per-query
preference on the baseline against the length difference:

    logit P(m beats baseline on q) = theta_m + phi_m * tanh(d_q / sigma)

where ``d_q`` = (words of m's answer) - (words of the baseline's answer) and ``sigma`` is the
standard deviation of d over all answered pairs of all models. The length-controlled win rate is
``100 * sigmoid(theta_m)``: the predicted win rate when the two answers are equally long.
Targets are the soft scores in [0, 1]; a small ridge penalty keeps the fit finite for a model that
wins every query. (AlpacaEval also has an instruction-difficulty term; we leave it out because
our scores come from one judge on one query set, where it mostly cancels.)

When the user's criteria are *about* length ("prefer concise answers", "No walls of text"),
controlling for length would remove the very thing they asked for, so callers turn it off where the
judge reads a length wish in them (``usl.types.CriteriaReading``; a judge that reads no criteria reads none).
"""

from __future__ import annotations

import numpy as np


def length_controlled(scores: np.ndarray, model_len: np.ndarray, base_len: np.ndarray,
                      ridge: float = 1e-3, iters: int = 50) -> np.ndarray:
    """(M,) percent length-controlled win rates.

    scores: (M, Q) in [0, 1] with NaN for missing; model_len: (M, Q) words; base_len: (Q,) words.
    Newton's method on all models at once (two parameters each).
    """
    s = np.asarray(scores, dtype=np.float64)
    ok = ~np.isnan(s)
    d = np.asarray(model_len, float) - np.asarray(base_len, float)[None, :]
    sigma = float(np.std(d[ok])) if ok.any() else 1.0
    x = np.tanh(d / (sigma if sigma > 0 else 1.0))
    x = np.where(ok, x, 0.0)
    y = np.where(ok, s, 0.0)
    w = ok.astype(np.float64)
    theta = np.zeros(s.shape[0])
    phi = np.zeros(s.shape[0])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] + phi[:, None] * x)))
        r = w * (p - y)
        g0 = r.sum(1) + ridge * theta
        g1 = (r * x).sum(1) + ridge * phi
        h = w * p * (1 - p)
        h00 = h.sum(1) + ridge
        h01 = (h * x).sum(1)
        h11 = (h * x * x).sum(1) + ridge
        det = h00 * h11 - h01 * h01
        det = np.where(np.abs(det) < 1e-12, 1e-12, det)
        step0 = (h11 * g0 - h01 * g1) / det
        step1 = (h00 * g1 - h01 * g0) / det
        step0, step1 = np.clip(step0, -5, 5), np.clip(step1, -5, 5)   # damped: no overshoot
        theta -= step0
        phi -= step1
        if max(np.max(np.abs(step0)), np.max(np.abs(step1))) < 1e-9:
            break
    out = 100.0 / (1.0 + np.exp(-theta))
    out[~ok.any(axis=1)] = np.nan
    return out
