"""Known answers for win rates, bootstrap CIs, CI-aware ranks, rank correlation, BT and LC."""

import numpy as np
import pytest
from scipy import stats as sps

from usl.leaderboard import length_control, ratings, stats

NAN = np.nan


def test_win_rates_by_hand_ties_half_missing_excluded():
    s = np.array([[1.0, 0.5, NAN],
                  [0.0, 0.0, 1.0],
                  [NAN, NAN, NAN]])
    wr, n = stats.win_rates(s)
    assert wr[0] == pytest.approx(75.0)
    assert wr[1] == pytest.approx(100 / 3)
    assert np.isnan(wr[2])
    assert n.tolist() == [2, 3, 0]


def test_topic_win_rates_are_means_over_topic_columns():
    s = np.array([[1.0, 0.0, 0.5, 1.0]])
    out = stats.topic_win_rates(s, {"a": [0, 1], "b": [2, 3], "c": [3]})
    assert out["a"][0] == pytest.approx(50.0)
    assert out["b"][0] == pytest.approx(75.0)
    assert out["c"][0] == pytest.approx(100.0)


def test_resample_counts_sum_to_q_and_are_seeded():
    c1 = stats.resample_counts(7, 50, seed=3)
    c2 = stats.resample_counts(7, 50, seed=3)
    c3 = stats.resample_counts(7, 50, seed=4)
    assert c1.shape == (50, 7) and (c1.sum(axis=1) == 7).all()
    assert (c1 == c2).all() and not (c1 == c3).all()


def test_bootstrap_means_match_a_naive_loop():
    rng = np.random.default_rng(0)
    s = rng.random((3, 20))
    s[1, 5] = NAN
    fast = stats.bootstrap_means(s, 30, seed=1)
    idx = np.random.default_rng(1).integers(0, 20, size=(30, 20))
    naive = np.array([[100 * np.nanmean(s[m, idx[b]]) for m in range(3)] for b in range(30)])
    np.testing.assert_allclose(fast, naive, rtol=1e-12)


def test_bootstrap_ci_covers_planted_rate_and_has_right_width():
    rng = np.random.default_rng(42)
    p = np.array([0.2, 0.5, 0.8])
    s = (rng.random((3, 2000)) < p[:, None]).astype(float)
    ci = stats.bootstrap_ci(s, 1000, seed=0)
    assert ((ci[:, 0] < 100 * p) & (100 * p < ci[:, 1])).all()
    se = 100 * np.sqrt(p * (1 - p) / 2000)
    np.testing.assert_allclose(ci[:, 1] - ci[:, 0], 2 * 1.96 * se, rtol=0.15)
    np.testing.assert_array_equal(ci, stats.bootstrap_ci(s, 1000, seed=0))


def test_ci_rank_hand_example():
    ci = np.array([[60, 70], [55, 65], [40, 50], [30, 56], [NAN, NAN]], float)
    # model 2: below 0 and 1 (lo 60, 55 > hi 50) -> 3; model 3: below 0 only (60 > 56) -> 2
    assert stats.ci_rank(ci).tolist() == [1, 1, 3, 2, 5]


def test_kendall_and_spearman_hand_values_and_scipy():
    a = {"m1": 1.0, "m2": 2.0, "m3": 3.0, "m4": 4.0}
    b = {"m1": 4.0, "m2": 3.0, "m3": 2.0, "m4": 1.0, "other": 9.0}
    assert stats.kendall_tau(a, b) == pytest.approx(-1.0)
    assert stats.spearman_rho(a, a) == pytest.approx(1.0)
    c = {"m1": 1.0, "m2": 3.0, "m3": 2.0, "m4": 4.0}   # one discordant pair of 6: tau = (5-1)/6
    assert stats.kendall_tau(a, c) == pytest.approx(4 / 6)
    assert stats.spearman_rho(a, c) == pytest.approx(1 - 6 * 2 / (4 * 15))
    rng = np.random.default_rng(0)
    x, y = rng.random(30), rng.random(30)
    da, db = {str(i): x[i] for i in range(30)}, {str(i): y[i] for i in range(30)}
    assert stats.kendall_tau(da, db) == pytest.approx(sps.kendalltau(x, y).statistic)
    with pytest.raises(ValueError, match="at least 2 common models"):
        stats.kendall_tau({"a": 1.0}, {"b": 1.0})


def test_bradley_terry_textbook_two_players():
    logp = ratings.fit_bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]), prior=0.0)
    assert np.exp(logp[0] - logp[1]) == pytest.approx(3.0, rel=1e-6)


def test_bradley_terry_recovers_planted_strengths():
    rng = np.random.default_rng(7)
    true = np.array([-1.0, -0.3, 0.0, 0.4, 1.2])
    w = np.zeros((5, 5))
    for i in range(5):
        for j in range(5):
            if i < j:
                p = 1 / (1 + np.exp(-(true[i] - true[j])))
                k = rng.binomial(4000, p)
                w[i, j], w[j, i] = k, 4000 - k
    est = ratings.fit_bradley_terry(w)
    np.testing.assert_allclose(est, true - true.mean(), atol=0.06)


def test_elo_ratings_order_follows_win_rates_and_baseline_is_1000():
    rng = np.random.default_rng(1)
    p = np.array([0.2, 0.5, 0.8])
    s = (rng.random((3, 300)) < p[:, None]).astype(float)
    r = ratings.elo_ratings(s)
    assert r[0] < r[1] < r[2]
    assert abs(r[1] - 1000) < 60     # a 50% model is about level with the baseline


def test_length_control_removes_pure_length_effect():
    rng = np.random.default_rng(3)
    q = 400
    base = rng.integers(100, 300, q).astype(float)
    # model 0 wins exactly when it is longer; model 1 is equally long always and wins 70%
    mlen = np.stack([base + rng.normal(0, 80, q), base])
    s = np.stack([(mlen[0] > base).astype(float) * 0.98 + 0.01, (rng.random(q) < 0.7).astype(float)])
    lc = length_control.length_controlled(s, mlen, base)
    wr, _ = stats.win_rates(s)
    assert lc[1] == pytest.approx(wr[1], abs=1.0)   # no length difference: unchanged
    assert abs(lc[0] - 50) < 12                     # all of its wins came from length


def test_correlation_ci_brackets_the_agreement_and_narrows_with_more_queries():
    rng = np.random.default_rng(0)
    p = np.array([0.2, 0.35, 0.5, 0.65, 0.8, 0.5])          # the last model has no reference entry
    models = ["a", "b", "c", "d", "e", "x"]
    ref = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}

    def ci(n_queries):
        scores = (rng.random((6, n_queries)) < p[:, None]).astype(float)
        return stats.correlation_ci(scores, models, ref, n_bootstrap=400, seed=1)

    few, many = ci(20), ci(2000)
    assert few["spearman_rho"][0] < 0.9 <= few["spearman_rho"][1] <= 1.0
    assert many["spearman_rho"] == pytest.approx((1.0, 1.0)) and many["kendall_tau"] == pytest.approx((1.0, 1.0))
    against = np.array([0.8, 0.65, 0.5, 0.35, 0.2, 0.5])
    lo, hi = stats.correlation_ci((rng.random((6, 2000)) < against[:, None]).astype(float), models,
                                  ref, n_bootstrap=200)["kendall_tau"]
    assert lo <= hi < 0                                      # an order against the reference stays against it
    with pytest.raises(ValueError, match="at least 3 common models"):
        stats.correlation_ci(np.ones((2, 5)), ["a", "zz"], ref)


def test_the_intervals_correlations_are_scipys_row_by_row_ties_included():
    """``correlation_ci`` computes every resample's rho and tau-b at once; each is scipy's for that row."""
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    rows = rng.integers(0, 12, (200, 30)).astype(float)     # many ties within a row
    ref = rng.integers(0, 9, 30).astype(float)              # and in the reference
    assert np.allclose(stats._spearman_rows(rows, ref), [sps.spearmanr(r, ref).statistic for r in rows], atol=1e-12)
    assert np.allclose(stats._kendall_b_rows(rows, ref), [sps.kendalltau(r, ref).statistic for r in rows], atol=1e-12)
