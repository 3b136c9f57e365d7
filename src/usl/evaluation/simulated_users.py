"""Simulated users: how much a calibration learns from a user's votes, measured on pairs it never saw.

A simulated user states criteria and votes by a rule of their own, which may or may not be what the
criteria say:

- a *hidden rule* (``shorter``, ``longer``, ``lists``): the answer with fewer words, more words, or a
  larger share of list lines wins, whatever the stated criteria; a pair where both answers are equal on
  the rule is a tie;
- ``judge``: votes drawn from the shipped judge's own probabilities under the stated criteria, a user
  whose taste is exactly what the judge reads of the criteria (a calibration should not lose here);
- ``labels``: given labels, such as a human annotator's (PandaLM, hh-rlhf).

The board's pairs are split by query, half to vote on and half held out. After 0, 10, 20 and 50 votes
(random pairs, or pairs chosen by ``usl.judges.calibration.informative`` ten at a time, refitting after
each ten) the calibration is fitted on the votes and its agreement is measured on the held-out pairs the
user decided. Every draw takes a seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from usl.data.io import iter_jsonl, read_json
from usl.data.pairs.human import dsp_human_pairs, pandalm_prompt
from usl.judges import calibration as cal
from usl.leaderboard.types import LeaderboardSpec
from usl.types import Criteria

Rule = Literal["shorter", "longer", "lists", "judge", "labels"]
CHECKPOINTS = (0, 10, 20, 50)


@dataclass(frozen=True)
class SimUser:
    name: str
    criteria: Criteria
    rule: Rule
    matches: bool                     # the votes follow what the stated criteria say

    def votes(self, terms: cal.Terms, rng: np.random.Generator, labels: np.ndarray | None = None) -> np.ndarray:
        """+1 / -1 / 0 (model's answer, baseline's, tie) for every pair of ``terms``."""
        col = lambda name: terms.x[:, terms.names.index(name)]       # noqa: E731
        if self.rule == "shorter":
            return -np.sign(np.round(col(cal.LENGTH), 6))
        if self.rule == "longer":
            return np.sign(np.round(col(cal.LENGTH), 6))
        if self.rule == "lists":
            return np.sign(np.round(col(cal.LISTS), 6))
        if self.rule == "judge":
            p = 1 / (1 + np.exp(-terms.logit()))
            return np.where(rng.random(len(p)) < p, 1.0, -1.0)
        if labels is None:
            raise ValueError(f"user {self.name}: rule 'labels' needs labels")
        return np.asarray(labels, dtype=float)


# Users of the default benchmark's board: three hidden rules, two that match their criteria.
BOARD_USERS = (
    SimUser("says 'warm tone', prefers short answers", Criteria(("A friendly, warm tone",)), "shorter", False),
    SimUser("says 'get to the point', prefers long answers", Criteria(("Get to the point",)), "longer", False),
    SimUser("says 'plain prose', prefers lists", Criteria(("Plain flowing prose",)), "lists", False),
    SimUser("says 'short answers', prefers short answers", Criteria(("Short answers",)), "shorter", True),
    SimUser("votes as the judge reads 'warm tone'", Criteria(("A friendly, warm tone",)), "judge", True),
)


@dataclass(frozen=True)
class Curve:
    """Held-out agreement after each number of votes, over seeds: ``mean[i]`` and ``sd[i]`` at
    ``CHECKPOINTS[i]`` votes."""

    user: str
    picking: Literal["random", "chosen"]
    mean: tuple[float, ...]
    sd: tuple[float, ...]
    held_out: int                     # decided held-out pairs (per seed, on average)

    def gain(self, votes: int) -> float:
        return self.mean[CHECKPOINTS.index(votes)] - self.mean[0]


def agreement(terms: cal.Terms, y: np.ndarray, weights: np.ndarray) -> float:
    decided = y != 0
    return float(np.mean(np.sign(terms.x[decided] @ weights) == y[decided]))


def _curve_run(pool: cal.Terms, y_pool: np.ndarray, test: cal.Terms, y_test: np.ndarray, scale: np.ndarray,
               strength: float, picking: str, rng: np.random.Generator) -> list[float]:
    out = [agreement(test, y_test, pool.shipped)]
    if picking == "random":
        order = rng.permutation(len(pool.x))[:max(CHECKPOINTS)]
        for n in CHECKPOINTS[1:]:
            w = cal.fit(pool.take(order[:n]), y_pool[order[:n]], scale, strength)
            out.append(agreement(test, y_test, w))
        return out
    voted: list[int] = []
    w = pool.shipped.copy()
    while len(voted) < max(CHECKPOINTS):
        seen = pool.take(voted)
        prec = cal.precision(seen, y_pool[voted], w, scale, strength)
        # a user answers from a card of pairs: the pick is among a fresh random draw, as the page offers
        draw = rng.choice(len(pool.x), min(len(pool.x), 2000), replace=False)
        draw = draw[~np.isin(draw, voted)]
        voted += [int(draw[i]) for i in cal.informative(pool.take(draw), prec, 10)]
        w = cal.fit(pool.take(voted), y_pool[voted], scale, strength)
        if len(voted) in CHECKPOINTS:
            out.append(agreement(test, y_test, w))
    return out


def simulate(user: SimUser, terms: cal.Terms, groups: Sequence[str], seeds: int = 5, strength: float | None = None,
             labels: np.ndarray | None = None, max_held_out: int = 3000) -> list[Curve]:
    """Random and chosen curves for ``user`` over ``terms`` (every pair of a board; ``groups``: each pair's
    query, so that held-out pairs never share a query with voted ones)."""
    strength = cal.CalibrationConfig().strength if strength is None else strength
    scale = cal.spread(terms)
    runs: dict[str, list[list[float]]] = {"random": [], "chosen": []}
    held = []
    keys = np.array(sorted(set(groups)))
    gidx = np.searchsorted(keys, np.asarray(groups))
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        y = user.votes(terms, rng, labels)
        test_q = rng.permutation(len(keys))[: len(keys) // 2]
        is_test = np.isin(gidx, test_q)
        test_idx = np.flatnonzero(is_test & (y != 0))
        test_idx = rng.permutation(test_idx)[:max_held_out]
        pool_idx = np.flatnonzero(~is_test)
        held.append(len(test_idx))
        for picking in runs:
            runs[picking].append(_curve_run(terms.take(pool_idx), y[pool_idx], terms.take(test_idx), y[test_idx],
                                            scale, strength, picking, np.random.default_rng([seed, 1])))
    return [Curve(user.name, picking, tuple(np.mean(r, 0).round(4)), tuple(np.std(r, 0).round(4)),
                  int(np.mean(held))) for picking, r in runs.items()]


# ---- users whose votes are labels: human annotators, and GPT-4-Turbo's AlpacaEval labels -------------
@dataclass(frozen=True)
class LabelledPairs:
    """Pairs outside a board, ``labels[user]`` per pair (+1: the first answer, -1: the second, 0: tie)."""
    queries: list[str]
    first: list[str]
    second: list[str]
    labels: dict[str, np.ndarray]


def pandalm(path, limit: int, rng: np.random.Generator) -> LabelledPairs:
    """PandaLM's test set: each of its three annotators is a user."""
    items = [x for x in read_json(path) if str(x["response1"]).strip() and str(x["response2"]).strip()
             and str(x["response1"]) != str(x["response2"])]
    items = [items[i] for i in sorted(rng.permutation(len(items))[:limit])]
    code = {1: 1.0, 2: -1.0, 0: 0.0}
    return LabelledPairs([pandalm_prompt(x) for x in items], [str(x["response1"]) for x in items],
                         [str(x["response2"]) for x in items],
                         {f"PandaLM annotator {k}": np.array([code[int(x[f"annotator{k}"])] for x in items])
                          for k in (1, 2, 3)})


def hh_helpful(path, limit: int, rng: np.random.Generator) -> LabelledPairs:
    """hh-rlhf helpful-base (the DSP repack): its crowd workers as one user; the chosen answer is shown
    first in a random half of the pairs."""

    pairs = dsp_human_pairs(path, source="human/hh_helpful", family="")
    pairs = [pairs[i] for i in sorted(rng.permutation(len(pairs))[:limit])]
    flip = rng.random(len(pairs)) < 0.5
    return LabelledPairs([p.prompt for p in pairs], [p.loser if f else p.winner for p, f in zip(pairs, flip)],
                         [p.winner if f else p.loser for p, f in zip(pairs, flip)],
                         {"hh-rlhf helpful workers": np.where(flip, -1.0, 1.0)})


def quality_labels(alpaca_dir, limit: int, rng: np.random.Generator) -> LabelledPairs:
    """AlpacaEval's GPT-4-Turbo labels (train queries only) of board models against the baseline: a user
    who prefers the answer the quality label prefers (a preference of exactly 1.5 is a tie)."""
    from pathlib import Path


    root = Path(alpaca_dir)
    split = read_json(root / "split.json")
    base = {r["instruction"]: r["output"] for r in read_json(root / "outputs" / f"{split['baseline']}.json.gz")}
    rows = []
    for model in split["board_models"]:
        path = root / "annotations" / "weighted_alpaca_eval_gpt4_turbo" / f"{model}.jsonl.gz"
        if path.exists():
            rows += [r for _, r in iter_jsonl(path) if r.get("instruction") in base and r.get("output_2")]
    rows = [rows[i] for i in sorted(rng.permutation(len(rows))[:limit])]
    return LabelledPairs([r["instruction"] for r in rows], [r["output_2"] for r in rows],
                         [base[r["instruction"]] for r in rows],
                         {"GPT-4-Turbo label": np.sign(np.array([float(r["preference"]) for r in rows]) - 1.5)})


def label_users(name: str, pairs: LabelledPairs) -> list[tuple[SimUser, np.ndarray]]:
    """Users of labelled pairs: human annotators state the shipped general criteria (what they were asked
    to judge); the quality-label user states a tone and votes by the label, a hidden rule."""

    general = LeaderboardSpec().criteria
    if name == "quality-label":
        return [(SimUser(f"says 'warm tone', prefers the {u}", Criteria(("A friendly, warm tone",)), "labels", False), y)
                for u, y in pairs.labels.items()]
    return [(SimUser(u, general, "labels", True), y) for u, y in pairs.labels.items()]

