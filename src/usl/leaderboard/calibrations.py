"""Boards under a user's calibration: fitting one from stored votes, checking that it fits the board it
is asked for, and the pairs worth voting on next. The maths is ``usl.judges.calibration``'s; this is
the bookkeeping between it, the store and the board.

A calibration belongs to one benchmark, one version of one judge, and one set of criteria (the votes'):
a board of another is refused with a message that says what to do, never silently ranked by weights
that read other terms. It is fitted on every stored vote of its benchmark under its criteria.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from usl.judges import calibration as cal
from usl.judges.base import Judge
from usl.leaderboard.types import LeaderboardSpec, Moved
from usl.store.db import Store
from usl.store.votes import Vote, load_calibration, load_votes
from usl.types import Criteria, DataError


def stored(store: Store, name: str) -> cal.Calibration:
    return cal.Calibration.from_json(load_calibration(store, name)[0])


def under(store: Store, spec: LeaderboardSpec, criteria_given: bool) -> LeaderboardSpec:
    """``spec`` under its calibration's criteria when the caller gave none (``usl rank --calibration NAME``)."""
    if not spec.calibration or criteria_given:
        return spec
    return dataclasses.replace(spec, criteria=stored(store, spec.calibration).criteria)


def check_fits(c: cal.Calibration, spec: LeaderboardSpec) -> None:
    """Refuse a board ``c`` was not fitted for (the judge's version is checked by ``CalibratedJudge``)."""
    if c.benchmark != spec.benchmark:
        raise DataError(f"calibration {c.name!r} was fitted on votes of benchmark {c.benchmark!r}, not "
                        f"{spec.benchmark!r}: vote on {spec.benchmark!r} and calibrate there", field="calibration")
    if c.criteria.key() != spec.criteria.key():
        raise DataError(f"calibration {c.name!r} was fitted under the criteria {_said(c.criteria)}, not "
                        f"{_said(spec.criteria)}: rank under its criteria, or vote and calibrate under these",
                        field="calibration")


def stored_votes(store: Store, spec: LeaderboardSpec) -> list[tuple[int, Vote]]:
    """(id, vote) of the stored votes of ``spec``'s benchmark under its criteria."""
    key = spec.criteria.key()
    return [(i, v) for i, v in load_votes(store) if v.benchmark == spec.benchmark and v.criteria.key() == key]


def votes_for(store: Store, spec: LeaderboardSpec, models: Sequence[str]) -> list[tuple[int, Vote]]:
    """``stored_votes``, refused when there is none or when one names a model the benchmark no longer has
    (its answers are gone from the board it would calibrate)."""
    votes = stored_votes(store, spec)
    if not votes:
        raise DataError(f"no stored votes on benchmark {spec.benchmark!r} under the criteria "
                        f"{_said(spec.criteria)}: vote first (the page's 'Check the judge')", field="votes")
    gone = sorted({v.model for _, v in votes} - set(models))
    if gone:
        raise DataError(f"votes name model(s) no longer on benchmark {spec.benchmark!r}: {', '.join(gone)}; "
                        f"delete their votes (usl data delete-votes --model {gone[0]}) or add the model back",
                        field="votes")
    return votes


def fit_votes(name: str, base: Judge, spec: LeaderboardSpec, votes: Sequence[Vote], board: cal.Terms,
              layout: cal.Layout, config: cal.CalibrationConfig) -> cal.Calibration:
    """Fit ``name`` on ``votes``; ``board``: the terms of every pair of the benchmark (their spread)."""
    terms = cal.judge_terms(base, spec.criteria, [v.query for v in votes], [v.model_answer for v in votes],
                            [v.baseline_answer for v in votes], layout)
    y = cal.labels([v.choice for v in votes])
    if int((y != 0).sum()) < config.min_votes:
        raise DataError(f"calibration {name!r}: {int((y != 0).sum())} decided vote(s) (ties are left out); "
                        f"it needs {config.min_votes}", field="votes")
    scale = cal.spread(board)
    w = cal.fit(terms, y, scale, config.strength)
    before, after = cal.leave_one_out(terms, y, scale, config.strength)
    return cal.Calibration(name, base.identity, spec.benchmark, spec.criteria.canonical(), terms.names,
                           tuple(float(x) for x in w), tuple(float(x) for x in terms.shipped),
                           tuple(float(x) for x in scale),
                           len(votes), before, after)


def choose(pool: cal.Terms, groups: Sequence[str], voted: cal.Terms, y: np.ndarray, n: int,
           rng: np.random.Generator, config: cal.CalibrationConfig, draw: int = 2000) -> list[int]:
    """``n`` pairs of ``pool`` worth voting on next (one per query), given the votes so far: the most
    informative of a random draw of ``draw`` pairs, so that two cards do not show the same pairs."""
    scale = cal.spread(pool)
    w = cal.fit(voted, y, scale, config.strength)
    prec = cal.precision(voted, y, w, scale, config.strength)
    idx = rng.permutation(len(pool.x))[:draw]
    picked = cal.informative(pool.take(idx), prec, n, groups=[groups[i] for i in idx])
    return [int(idx[i]) for i in picked]


def moved(models: Sequence[str], before: np.ndarray, after: np.ndarray) -> tuple[Moved, ...]:
    """Each model's place by win rate (percent) under the shipped judge and the calibrated one, the models
    that moved most first; ``before``/``after``: win rates by model, NaN for a model without answers."""
    ok = [i for i in range(len(models)) if np.isfinite(before[i]) and np.isfinite(after[i])]
    place_before = {i: k + 1 for k, i in enumerate(sorted(ok, key=lambda i: -before[i]))}
    place_after = {i: k + 1 for k, i in enumerate(sorted(ok, key=lambda i: -after[i]))}
    rows = [Moved(models[i], place_before[i], place_after[i], round(float(before[i]), 2), round(float(after[i]), 2))
            for i in ok]
    return tuple(sorted(rows, key=lambda r: (-abs(r.before - r.after), r.after)))


def _said(c: Criteria) -> str:
    return "[" + ", ".join(repr(x) for x in c.canonical().as_list()) + "]"
