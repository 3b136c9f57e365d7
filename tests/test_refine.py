"""The refinement estimator (usl.leaderboard.refine) on synthetic boards with known answers."""

import numpy as np
import pytest

from usl.leaderboard.refine import (
    MIN_JUDGED,
    PRIOR_QUERIES,
    _shrunk_var,
    refine,
    refinement_order,
)
from usl.leaderboard.stats import win_rates


def boards(m=12, q=200, seed=0, noise=0.15, bias=None):
    """Fast scores f and reference scores g = f + a per-model bias + noise, clipped to [0, 1]."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.2, 0.8, m)[:, None]
    f = np.clip(skill + rng.normal(0, 0.25, (m, q)), 0, 1)
    b = np.zeros((m, 1)) if bias is None else np.asarray(bias, float)[:, None]
    g = np.clip(f + b + rng.normal(0, noise, (m, q)), 0, 1)
    return f, g


def seen(g, cols):
    out = np.full(g.shape, np.nan)
    out[:, cols] = g[:, cols]
    return out


def test_everything_judged_is_the_references_board():
    f, g = boards(bias=np.linspace(0.1, -0.1, 12))
    f[3, 7] = g[3, 7] = np.nan                          # an unanswered query
    r = refine(f, g)
    np.testing.assert_allclose(r.summary.win_rate, win_rates(g)[0])
    assert (r.judged == np.where(np.arange(12) == 3, 199, 200)).all()
    lo, hi = r.summary.ci.T
    assert (lo < r.summary.win_rate).all() and (r.summary.win_rate < hi).all()


def test_nothing_judged_keeps_the_fast_board_and_its_ci():
    f, g = boards()
    fast_ci = np.stack([win_rates(f)[0] - 3, win_rates(f)[0] + 3], 1)
    r = refine(f, np.full(g.shape, np.nan), fast_ci)
    np.testing.assert_allclose(r.summary.win_rate, win_rates(f)[0])
    np.testing.assert_allclose(r.summary.ci, fast_ci)


def test_a_model_with_too_few_judged_queries_keeps_its_fast_estimate():
    f, g = boards()
    part = seen(g, np.arange(20))
    part[0, 1:] = np.nan                               # model 0: one judged query
    r = refine(f, part)
    assert r.judged[0] == 1 < MIN_JUDGED
    assert r.summary.win_rate[0] == pytest.approx(win_rates(f)[0][0])
    assert r.summary.win_rate[1] != pytest.approx(win_rates(f)[0][1])


@pytest.mark.parametrize("k", [10, 20])
def test_the_fast_judge_cuts_the_subset_noise_when_it_predicts_the_reference(k):
    f, g = boards(noise=0.05, bias=np.linspace(0.1, -0.1, 12))
    truth = win_rates(g)[0]
    rng = np.random.default_rng(1)
    err_refined, err_subset, covered = [], [], []
    for _ in range(200):
        cols = rng.choice(200, k, replace=False)
        r = refine(f, seen(g, cols))
        err_refined.append(np.abs(r.summary.win_rate - truth).mean())
        err_subset.append(np.abs(win_rates(g[:, cols])[0] - truth).mean())
        lo, hi = r.summary.ci.T
        covered.append(((lo <= truth) & (truth <= hi)).mean())
    assert r.slope > 0.8
    assert np.mean(err_refined) < 0.4 * np.mean(err_subset)
    assert 0.9 <= np.mean(covered) <= 1.0                 # 95% intervals for the whole board's win rate


def test_a_fast_judge_that_disagrees_gets_no_weight():
    f, _ = boards()
    g = 1.0 - f                                          # the reference reads the criteria the other way
    cols = np.arange(0, 200, 5)
    r = refine(f, seen(g, cols), shrink=False)
    assert r.slope == 0.0
    np.testing.assert_allclose(r.summary.win_rate, win_rates(g[:, cols])[0])


def test_shrinkage_damps_noise_and_keeps_real_disagreement():
    rng = np.random.default_rng(3)
    agree_f, agree_g = boards(noise=0.3)                         # same board, noisy reference
    flip_f, _ = boards()
    flip_g = np.clip(1.0 - flip_f + rng.normal(0, 0.3, flip_f.shape), 0, 1)   # the reversed board
    for f, g, better in ((agree_f, agree_g, True), (flip_f, flip_g, None)):
        truth = win_rates(g)[0]
        err = {True: [], False: []}
        for _ in range(100):
            cols = rng.choice(200, 5, replace=False)
            for shrink in (True, False):
                err[shrink].append(np.abs(refine(f, seen(g, cols), shrink=shrink).summary.win_rate - truth).mean())
        if better:      # corrections that are mostly noise are pulled in: closer to the truth
            assert np.mean(err[True]) < 0.7 * np.mean(err[False])
        else:           # a reversed board stands out of the noise: barely shrunk, no worse
            assert np.mean(err[True]) <= 1.05 * np.mean(err[False])


def test_estimates_stay_win_rates():
    f = np.full((2, 10), 0.0)
    g = np.full((2, 10), np.nan)
    g[:, :2] = 1.0                                       # the judged queries all won, the fast judge says 0
    r = refine(f, g)
    assert (r.summary.win_rate <= 100).all() and (r.summary.ci >= 0).all() and (r.summary.ci <= 100).all()
    assert (r.summary.ci[:, 1] - r.summary.ci[:, 0] > 10).all()   # two wins out of two: not a zero-width CI


def test_shapes_must_match():
    with pytest.raises(ValueError, match="differ in shape"):
        refine(np.zeros((2, 3)), np.zeros((2, 4)))


def test_refinement_order_is_fixed_and_shared_by_every_selection():
    ids = [f"q{i}" for i in range(50)]
    order = refinement_order(ids)
    assert sorted(order) == sorted(ids) and order != ids
    assert refinement_order(list(reversed(ids))) == order
    subset = ids[::3]
    assert refinement_order(subset) == [q for q in order if q in set(subset)]


def test_variances_pool_the_rows_with_one_degree_of_freedom_per_row():
    x = np.array([[0.0, 1.0, np.nan], [1.0, 1.0, 0.0], [np.nan, np.nan, np.nan]])
    k = np.array([2, 3, 0])
    pooled = (0.5 + 6 / 9) / (5 - 2)               # within-row sums of squares / (cells - rows)
    np.testing.assert_allclose(_shrunk_var(x, k), [(0.5 + PRIOR_QUERIES * pooled) / (1 + PRIOR_QUERIES),
                                                   (2 * (1 / 3) + PRIOR_QUERIES * pooled) / (2 + PRIOR_QUERIES),
                                                   pooled])


def test_a_model_judged_on_every_query_is_not_shrunk():
    f, g = boards(noise=0.3)
    part = seen(g, np.arange(5))
    part[4] = g[4]                                   # model 4: every query judged
    r = refine(f, part)
    assert r.summary.win_rate[4] == pytest.approx(win_rates(g)[0][4])


def test_intervals_hold_when_queries_move_every_model_alike():
    """The reference's residuals share a per-query part (a query every model finds easy): it moves
    all corrections together, is not shrunk away, and stays in the intervals."""
    rng = np.random.default_rng(5)
    f, g = boards(noise=0.1)
    g = np.clip(g + rng.normal(0, 0.3, (1, g.shape[1])), 0, 1)     # + a per-query effect
    truth = win_rates(g)[0]
    covered = []
    for _ in range(200):
        lo, hi = refine(f, seen(g, rng.choice(200, 5, replace=False))).summary.ci.T
        covered.append(((lo <= truth) & (truth <= hi)).mean())
    assert np.mean(covered) >= 0.9
