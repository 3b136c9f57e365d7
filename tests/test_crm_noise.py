"""Criteria direction/noise: tables of cases, the reference code's defects fixed, per-epoch draws."""

import json

import pytest

from usl.crm.noise import CriteriaPool, apply_direction, apply_noise, epoch_view, loser_criteria, sample_rng
from usl.types import Message, PreferenceSample

W = ("w1", "w2", "w3", "w4")
L = ("l1", "l2", "l3")


def sample(idx="s0", criteria=W, pref="model_a", loser=L, group=""):
    meta = (("loser_criteria", json.dumps(list(loser))),) if loser is not None else ()
    conv = (Message("user", "q"), Message("assistant", "x"))
    return PreferenceSample(idx, "q", conv, conv, tuple(criteria), pref, "t", group, meta)


@pytest.mark.parametrize("direction,pref,loser,exp_crit,exp_pref,exp_dir,note", [
    ("original", "model_a", L, W, "model_a", "original", ""),
    ("reverse", "model_a", L, L, "model_b", "reverse", ""),
    ("reverse", "model_b", L, L, "model_a", "reverse", ""),
    ("reverse", "model_a", (), W, "model_a", "original", "no_loser_criteria"),   # counted, kept original
    ("reverse", "tie", L, W, "tie", "original", "tie_no_direction"),             # a tie stays a tie
])
def test_direction_table(direction, pref, loser, exp_crit, exp_pref, exp_dir, note):
    crit, p, new_loser, applied, n = apply_direction(W, pref, loser, direction, sample_rng(0, 0, 0))
    assert (crit, p, applied, n) == (exp_crit, exp_pref, exp_dir, note)
    if applied == "reverse":
        assert new_loser == W          # the old winner's criteria are the new loser's


def test_random_direction_draws_both():
    seen = {apply_direction(W, "model_a", L, "random", sample_rng(0, 0, i))[3] for i in range(40)}
    assert seen == {"original", "reverse"}


@pytest.mark.parametrize("n,noise,expected_len", [
    (1, "remove", 1), (2, "remove", 1), (3, "remove", 2), (4, "remove", 2),   # never empty
    (1, "replace", 1), (2, "replace", 2), (4, "replace", 4),                  # length unchanged
    (1, "none", 1), (4, "none", 4),
])
def test_noise_lengths(n, noise, expected_len):
    crit = W[:n]
    for i in range(10):
        out, applied, note = apply_noise(crit, L, noise, sample_rng(1, 0, i), None, "t")
        assert len(out) == expected_len
        assert set(out) <= set(crit) | set(L)


def test_replace_one_criterion_is_a_counted_noop():
    # the reference code computes int(1 * 0.5) - 1 = -1 and crashes in random.sample
    out, applied, note = apply_noise(("only",), L, "replace", sample_rng(0, 0, 0), None, "t")
    assert (out, applied, note) == (("only",), "none", "replace_noop")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_replace_never_outnumbers_the_winner(n):
    for i in range(20):
        out, applied, _ = apply_noise(W[:n], L, "replace", sample_rng(2, 0, i), None, "t")
        replaced = sum(c in L for c in out)
        assert applied == "replace" and replaced == n // 2 and n - replaced >= replaced


def test_replace_with_fewer_loser_criteria_than_slots():
    out, applied, _ = apply_noise(W, ("l1",), "replace", sample_rng(0, 0, 0), None, "t")
    assert sum(c == "l1" for c in out) == 1 and len(out) == 4


def test_add_takes_other_topics_and_never_the_loser():
    pool = CriteriaPool([sample("a", ("a1", "a2"), group="ga", loser=("la",)),
                         sample("b", ("b1", "b2", "b3"), group="gb", loser=("lb",)),
                         sample("c", W, group="gc", loser=L)])
    for i in range(20):
        out, applied, _ = apply_noise(W, L, "add", sample_rng(0, 0, i), pool, "gc")
        assert applied == "add" and len(out) == 6 and set(W) <= set(out)
        assert not set(out) & set(L)


def test_add_without_candidates_is_reported():
    pool = CriteriaPool([sample("c", W, group="gc")])
    out, applied, note = apply_noise(W, L, "add", sample_rng(0, 0, 0), pool, "gc")
    assert (out, applied, note) == (W, "none", "add_no_candidates")


def test_empty_criteria_and_unknown_noise_raise():
    with pytest.raises(ValueError, match="at least one criterion"):
        apply_noise((), L, "none", sample_rng(0, 0, 0), None, "t")
    with pytest.raises(ValueError, match="unknown data_noise"):
        apply_noise(W, L, "shuffle", sample_rng(0, 0, 0), None, "t")


def test_tie_is_never_replaced_or_reversed():
    v = epoch_view(sample(pref="tie"), direction="random", noise="replace", seed=0, epoch=0, index=0, pool=None)
    assert v.preference == "tie" and v.criteria == W and v.noise == "none"


def test_views_are_redrawn_per_epoch_and_reproducible():
    s = sample()
    views = [epoch_view(s, direction="random", noise="random", seed=7, epoch=e, index=3, pool=None)
             for e in range(12)]
    assert len({(v.criteria, v.preference) for v in views}) > 2          # new draws per epoch
    again = [epoch_view(s, direction="random", noise="random", seed=7, epoch=e, index=3, pool=None)
             for e in range(12)]
    assert views == again                                                 # same (seed, epoch, idx) -> same


def test_loser_criteria_from_meta():
    assert loser_criteria(sample()) == L
    assert loser_criteria(sample(loser=None)) == ()
