"""Your votes teach the judge: the calibration's fit (known answers on planted weights), the pairs it asks
about, its storage beside the votes (deleting them deletes it), and on real data the simulated users of
usl.evaluation.simulated_users: hidden-rule users gain >= 10 points of held-out agreement after 20 chosen
votes, users whose votes match their criteria lose no more than noise, and chosen pairs beat random ones
on average over the hidden rules."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from usl.judges import calibration as cal
from usl.paths import shared_data
from usl.store.db import Store
from usl.store.votes import Vote, delete_votes, load_calibration, save_calibration, save_votes
from usl.types import Criteria, DataError

SHARED = shared_data()
needs_data = pytest.mark.skipif(SHARED is None, reason="no ../shared/data")
NAMES = ("criterion: concise", cal.QUALITY, cal.ANSWER, cal.LENGTH, cal.LISTS)


def planted(n: int, seed: int = 0, true=(1.0, 1.0, 1.0, -2.0, 0.0)) -> tuple[cal.Terms, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, len(NAMES)))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(x @ np.array(true)))), 1.0, -1.0)
    return cal.Terms(NAMES, x, np.array([1.0, 1.0, 1.0, 0.0, 0.0])), y


# ---------------------------------------------------------------------------------------------- the fit
def test_without_votes_the_calibration_is_the_shipped_judge():
    terms, y = planted(30)
    assert np.array_equal(cal.fit(terms, np.zeros(30), np.ones(5), 3.0), terms.shipped)


def test_a_planted_length_weight_is_recovered_and_few_votes_move_it_less_than_many():
    terms, y = planted(20000)
    assert cal.fit(terms, y, np.ones(5), 3.0) == pytest.approx([1, 1, 1, -2, 0], abs=0.1)   # evidence wins
    moved = [cal.fit(terms.take(slice(0, n)), y[:n], np.ones(5), 3.0)[3] for n in (10, 50, 500)]
    assert 0 > moved[0] > moved[1] > moved[2] > -2.2                      # toward -2 as the votes grow


def test_the_pull_toward_the_shipped_weights_is_per_term_spread():
    """A term that varies ten times more is held ten times more firmly in its own units: the same on the
    logit scale."""
    terms, y = planted(40)
    wide = cal.Terms(terms.names, terms.x * np.array([1, 1, 1, 10, 1]), terms.shipped)
    a = cal.fit(terms, y, np.ones(5), 3.0)
    b = cal.fit(wide, y, np.array([1, 1, 1, 10, 1.0]), 3.0)
    assert b[3] * 10 == pytest.approx(a[3], rel=1e-3)


def test_ties_are_left_out_and_leave_one_out_never_sees_the_vote_it_predicts():
    terms, y = planted(40)
    y[:5] = 0
    assert np.allclose(cal.fit(terms, y, np.ones(5), 3.0), cal.fit(terms.take(slice(5, None)), y[5:], np.ones(5), 3.0))
    before, after = cal.leave_one_out(terms, y, np.ones(5), 3.0)
    assert before == pytest.approx(np.mean(np.sign(terms.logit()[5:]) == y[5:]))
    # a vote that goes against every other one is never predicted right by the others' fit
    x = np.zeros((11, 5))
    x[:, 3] = 1.0
    y2 = np.r_[-np.ones(10), 1.0]
    assert cal.leave_one_out(cal.Terms(NAMES, x, terms.shipped), y2, np.ones(5), 3.0)[1] == pytest.approx(10 / 11)


def test_informative_pairs_look_along_new_directions_one_per_query():
    # ten pairs that differ in length, ten in lists: a vote on a length pair tells about the other nine, so
    # the next pick is a lists pair, and the one after goes back to length
    rng = np.random.default_rng(1)
    x = np.zeros((20, 5))
    x[:10, 3] = 2 + 0.1 * rng.random(10)
    x[10:, 4] = 1.5 + 0.1 * rng.random(10)
    pool = cal.Terms(NAMES, x, np.array([1.0, 1, 1, 0, 0]))
    prec = np.eye(5)
    picks = cal.informative(pool, prec, 4)
    assert [i < 10 for i in picks] == [True, False, True, False]
    assert picks[0] == int(np.argmax(x[:10, 3]))                    # the largest length difference first
    groups = [0, 0] + list(range(1, 19))                              # pairs 0 and 1 share a query
    assert len({0, 1} & set(cal.informative(pool, prec, 20, groups=groups))) == 1
    assert sorted(cal.informative(pool, prec, 30)) == list(range(20))  # never more than the pool
    with warnings.catch_warnings():
        warnings.simplefilter("error")                              # an empty draw: no pick, no warning
        assert cal.informative(pool.take([]), prec, 3) == []


def test_a_few_extreme_values_of_one_term_do_not_take_every_pick():
    # 12 of 400 pairs where one term is extreme, as the answers' own quality where substance first fires:
    # chosen by their own variance, 4 of the first 10 picks are among them; by what they tell of the pool, 2
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    x[:12, 2] = 40.0
    picks = cal.informative(cal.Terms(NAMES, x, np.array([1.0, 1, 1, 0, 0])), 3 * np.eye(5), 10)
    assert len(set(picks)) == 10 and sum(i < 12 for i in picks) <= 2, picks


def test_normal_scores_keep_the_order_and_share_ties():
    x = np.array([[0.0, 1], [0, 2], [0, 1000], [5, 3]])
    u = cal.normal_scores(x)
    assert (np.argsort(u[:, 1]) == np.argsort(x[:, 1])).all()
    assert u[0, 0] == u[1, 0] == u[2, 0] < u[3, 0]
    assert u[2, 1] - u[1, 1] < 2 * x[:, 1].std()                  # the tail pulled in


def test_a_calibration_refuses_another_version_of_its_judge():
    class Judge:
        name, version, can_tie = "length", "1", False
        identity = "length@1"

    c = cal.Calibration("mine", "length@0", "tiny", Criteria(("x",)), (cal.JUDGE, cal.LENGTH, cal.LISTS),
                        (1.0, 0.5, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 1.0), 10)
    with pytest.raises(DataError, match="fitted for judge length@0, but this judge is length@1"):
        cal.CalibratedJudge(Judge(), c)
    assert cal.Calibration.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_the_models_that_moved_most_come_first():
    from usl.leaderboard.calibrations import moved

    out = moved(["a", "b", "c", "d"], np.array([70.0, 60.0, 50.0, np.nan]), np.array([40.0, 60.0, 65.0, 10.0]))
    # as far moved, the higher place after first; d has no answers under one of them
    assert [(m.model, m.before, m.after) for m in out] == [("c", 3, 1), ("a", 1, 3), ("b", 2, 2)]
    assert (out[1].win_rate_before, out[1].win_rate_after) == (70.0, 40.0)


# -------------------------------------------------------------------------------------------- the store
def _vote(model: str = "m", choice: str = "model") -> Vote:
    return Vote("tiny", "q0", "Q?", model, "a", "base", "b", Criteria(("x",)), choice, True, "length@1", 0.7)


def test_deleting_the_votes_deletes_the_calibration_and_nothing_else(tmp_path):
    store = Store(tmp_path / "usl.sqlite")
    save_votes(store, [_vote("m"), _vote("m"), _vote("other")])
    save_calibration(store, "mine", "tiny", "length@1", {"name": "mine"}, [1, 2])
    save_calibration(store, "theirs", "tiny", "length@1", {"name": "theirs"}, [3])
    assert load_calibration(store, "mine") == ({"name": "mine"}, [1, 2])
    assert delete_votes(store, model="m") == (2, ["mine"])
    with pytest.raises(DataError, match=r"unknown calibration 'mine' \(stored: theirs\)"):
        load_calibration(store, "mine")
    assert load_calibration(store, "theirs")[1] == [3]
    with store.transaction() as con:                     # the same through SQL: the trigger, not the function
        con.execute("DELETE FROM votes")
    assert store.con.execute("SELECT COUNT(*) FROM calibrations").fetchone() == (0,)


def test_a_calibration_of_votes_no_longer_stored_is_refused_and_the_old_one_kept(tmp_path):
    store = Store(tmp_path / "usl.sqlite")
    save_votes(store, [_vote()])
    save_calibration(store, "mine", "tiny", "length@1", {"v": 1}, [1])
    with pytest.raises(DataError, match="vote 7 is no longer stored"):
        save_calibration(store, "mine", "tiny", "length@1", {"v": 2}, [1, 7])
    assert load_calibration(store, "mine") == ({"v": 1}, [1])


# ------------------------------------------------------------------------------- simulated users, real data
BOARD_QUERIES = 120


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The default judge's terms for every pair of the default benchmark's first 120 board queries (43
    models against the baseline), with each pair's query."""
    from typer.testing import CliRunner

    from usl.cli import app
    from usl.data.io import read_json
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec

    src = SHARED / "alpaca_eval"
    split = read_json(src / "split.json")
    root = tmp_path_factory.mktemp("board") / "alpaca_eval"
    (root / "outputs").mkdir(parents=True)
    base = read_json(src / "outputs" / f"{split['baseline']}.json.gz")
    keep = {base[i]["instruction"] for i in split["board"][:BOARD_QUERIES]}
    for model in [split["baseline"], *split["board_models"]]:
        rows = [r for r in read_json(src / "outputs" / f"{model}.json.gz") if r.get("instruction") in keep]
        (root / "outputs" / f"{model}.json").write_text(json.dumps(rows))
    (root / "split.json").write_text(json.dumps({
        "baseline": split["baseline"], "board_models": split["board_models"], "style_models": [],
        "board": list(range(BOARD_QUERIES)), "train": []}))   # indices into the baseline's rows kept above
    home = root.parent / "home"
    r = CliRunner().invoke(app, ["--home", str(home), "data", "import", "alpaca-eval", "--source", str(root)])
    assert r.exit_code == 0, r.output
    from usl import paths

    svc = LeaderboardService(Store(paths.db_path(home)), home=str(home), auto_topics=False)
    q, a, b = svc.pair_texts(LeaderboardSpec())
    judge = svc.prepare("alpaca_eval", "default", quality=False)
    layout = cal.Layout()
    return lambda criteria: (cal.judge_terms(judge, criteria, q, a, b, layout), q)


@needs_data
def test_simulated_users_learn_hidden_rules_and_keep_what_matches(board):
    from usl.evaluation.simulated_users import BOARD_USERS, simulate

    advantage = []                      # chosen minus random pairs, after 10 and 20 votes, per hidden rule
    for user in BOARD_USERS:
        terms, groups = board(user.criteria)
        random, chosen = simulate(user, terms, groups, seeds=3)
        # noise: two binomial standard errors of a held-out agreement, plus the spread over seeds
        noise = 2 * np.sqrt(0.25 / chosen.held_out) + max(chosen.sd)
        if user.matches:
            assert min(chosen.mean) >= chosen.mean[0] - noise, (user.name, chosen)
            assert min(random.mean) >= random.mean[0] - noise, (user.name, random)
        else:
            assert chosen.gain(20) >= 0.10, (user.name, chosen)
            advantage.append([chosen.mean[1] - random.mean[1], chosen.mean[2] - random.mean[2]])
    # chosen pairs teach faster: on average over the hidden rules, at 10 and at 20 votes (on these 120 queries,
    # measured: +11 and +5 points on average, +1.5 to +22 per user and checkpoint)
    assert (np.mean(advantage, axis=0) > 0.02).all(), advantage
