"""A personal calibration: a few weights on the terms of a shipped judge's decision, learned from one
user's votes.

The shipped judge decides "the model's answer beats the baseline's" by a logit that sums named terms
(``DecisionTerms``): one per stated criterion, the quality reader's share, the answers' own quality. A
calibration re-weighs them and adds two terms the shipped judge gives no weight of their own, the
difference in length and in list layout of the two answers::

    logit = sum_k w_k * criterion_k + w_q * quality_reading + w_a * answer_quality
            + w_len * (log(1 + words_A) - log(1 + words_B)) + w_list * (list_lines_A - list_lines_B)

The shipped judge is ``w = (1, ..., 1, 1, 1, 0, 0)``. A judge that is not a sum of terms (``length``,
``llm:...``) is one term, the logit of its P(A), with shipped weight 1, beside the same two.
``list_lines`` is the share of an answer's lines that are bullet or numbered items
(``usl.fast.features``).

The weights are fitted by L2-regularised logistic regression *toward the shipped ones*: minimise over w

    sum_i log(1 + exp(-y_i * x_i . w)) + strength / 2 * sum_j (s_j * (w_j - shipped_j))^2

with ``y_i = +1`` when the user preferred the model's answer, ``-1`` for the baseline's (ties are left
out), and ``s_j`` the spread (standard deviation) of term j over the board's pairs, so that the pull
toward the shipped judge is the same for every term on the logit scale. With no vote the calibration
is the shipped judge; each vote moves it as far as the evidence outweighs ``strength``: ten votes a
little, fifty more. There is no intercept: which side the answer was shown on does not enter, and a
judge of model vs baseline stays the mirror of baseline vs model.

Worked example (``tests/test_calibration.py``): votes drawn from weights (1, 1, 1, -2, 0), a user who
likes what the judge likes but also shorter answers, on terms of spread 1. Fitted on 20,000 votes the
weights come back within 0.1; on the first 10, 50 and 500 of them ``w_len`` moves from 0 toward -2 in
that order, never past it.

Agreement before and after is measured by leave-one-out: each vote is predicted by the weights fitted on
the others, never by weights that saw it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Sequence

import numpy as np

from usl.fast.features import FEATURES, style_features
from usl.judges.base import (Decomposable, Judge, JudgeRequest, MatrixJudge, Verdict, read_criteria,
                             verdicts_by_matrix)
from usl.types import Criteria, CriteriaReading, DataError

LENGTH, LISTS, QUALITY, ANSWER, JUDGE = "length", "lists", "quality reading", "answer quality", "judge"
_CRITERION = "criterion: "
_WORDS, _BULLETS, _NUMBERED = (FEATURES.index(f) for f in ("log_words", "bullet_frac", "numbered_frac"))


@dataclass(frozen=True)
class CalibrationConfig:
    """How a calibration is fitted."""

    strength: float = field(default=3.0, metadata={
        "help": "Pull toward the shipped judge, per term on the logit scale (the L2 penalty's weight on "
                "(spread * (w - shipped))^2). Chosen on simulated users: docs/calibration.md."})
    min_votes: int = field(default=1, metadata={"help": "Decided votes (not ties) needed to fit at all."})


@dataclass(frozen=True)
class Calibration:
    """Weights on a judge's terms, fitted on ``votes`` votes of one user under ``criteria`` on ``benchmark``
    (for the judge ``judge``, its identity: another version of the judge reads the terms differently).
    ``before`` / ``after``: the shipped judge's and the calibrated judge's agreement with the votes, the
    latter by leave-one-out; ``None`` without a decided vote."""

    name: str
    judge: str
    benchmark: str
    criteria: Criteria
    terms: tuple[str, ...]
    weights: tuple[float, ...]
    shipped: tuple[float, ...]
    scale: tuple[float, ...]
    votes: int
    before: float | None = None
    after: float | None = None

    @property
    def version(self) -> str:
        """A hash of what decides the board: judge, benchmark, criteria, terms and weights."""
        key = json.dumps([self.judge, self.benchmark, self.criteria.key(), self.terms,
                          [round(w, 6) for w in self.weights]])
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    def weight(self, term: str) -> float:
        """The fitted weight of ``term``; a criterion the votes were not given under keeps weight 1."""
        if term in self.terms:
            return self.weights[self.terms.index(term)]
        if term.startswith(_CRITERION):
            return 1.0
        raise DataError(f"calibration {self.name!r} has no term {term!r}", field="calibration")

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["criteria"] = {"likes": list(self.criteria.likes), "avoid": list(self.criteria.avoid)}
        for k in ("terms", "weights", "shipped", "scale"):
            d[k] = list(d[k])
        d["version"] = self.version
        return d

    @classmethod
    def from_json(cls, d: dict) -> Calibration:
        c = d["criteria"]
        return cls(d["name"], d["judge"], d["benchmark"], Criteria(tuple(c["likes"]), tuple(c["avoid"])),
                   tuple(d["terms"]), tuple(d["weights"]), tuple(d["shipped"]), tuple(d["scale"]), d["votes"],
                   d.get("before"), d.get("after"))


# ---- the terms ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Terms:
    """The calibration's inputs for n pairs (model vs baseline): ``x`` (n, m) by ``names``, and the
    shipped judge's weights on them (``x @ shipped`` is its logit)."""

    names: tuple[str, ...]
    x: np.ndarray
    shipped: np.ndarray

    def logit(self, weights: np.ndarray | None = None) -> np.ndarray:
        return self.x @ (self.shipped if weights is None else weights)

    def take(self, idx) -> Terms:
        return Terms(self.names, self.x[idx], self.shipped)


class Layout:
    """Length and list layout of answers, read once per answer text."""

    def __init__(self):
        self._memo: dict[str, tuple[float, float]] = {}

    def __call__(self, answers: Sequence[str]) -> np.ndarray:
        """(n, 2): log(1 + words), share of lines that are list items."""
        new = list(dict.fromkeys(a for a in answers if a not in self._memo))
        if new:
            f = style_features(new)
            for a, row in zip(new, f):
                self._memo[a] = (float(row[_WORDS]), float(row[_BULLETS] + row[_NUMBERED]))
        return np.array([self._memo[a] for a in answers], dtype=float).reshape(len(answers), 2)


def judge_terms(judge: Judge, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                baseline_answers: Sequence[str], layout: Layout, progress=None) -> Terms:
    """The terms of ``judge``'s decision for each pair, and the two layout terms."""
    if isinstance(judge, Decomposable):
        t = judge.decision_terms(criteria, queries, model_answers, baseline_answers, progress)
        names = tuple(_CRITERION + c for c in t.criteria) + (QUALITY, ANSWER)
        cols = [*t.criteria_rows, t.quality_rows.sum(0), t.answer]
    else:
        p = _p_model(judge, criteria, queries, model_answers, baseline_answers, progress)
        p = np.clip(p, 0.01, 0.99)            # a hard verdict (0 or 1) is a confident logit, not an infinite one
        names, cols = (JUDGE,), [np.log(p / (1 - p))]
    d = layout(model_answers) - layout(baseline_answers)
    x = np.column_stack([*cols, d[:, 0], d[:, 1]]) if len(queries) else np.zeros((0, len(names) + 2))
    shipped = np.r_[np.ones(len(names)), 0.0, 0.0]
    return Terms(names + (LENGTH, LISTS), x, shipped)


def _p_model(judge, criteria, queries, a, b, progress=None) -> np.ndarray:
    if isinstance(judge, MatrixJudge):
        return np.asarray(judge.judge_matrix(criteria, queries, a, b, progress), dtype=float)
    ab = judge.judge([JudgeRequest(criteria, q, x, y) for q, x, y in zip(queries, a, b)])
    ba = judge.judge([JudgeRequest(criteria, q, y, x) for q, x, y in zip(queries, a, b)])
    return np.array([(u.score_a + v.p_b + 0.5 * v.p_tie) / 2 for u, v in zip(ab, ba)])


# ---- the fit ------------------------------------------------------------------------------------
def labels(choices: Sequence[str]) -> np.ndarray:
    """+1 where the model's answer was preferred, -1 the baseline's, 0 a tie (left out of fits)."""
    return np.array([{"model": 1.0, "baseline": -1.0, "tie": 0.0}[c] for c in choices])


def fit(terms: Terms, y: np.ndarray, scale: np.ndarray, strength: float) -> np.ndarray:
    """The weights minimising the module docstring's objective; ``y`` in {-1, 0, +1} (0: left out)."""
    keep = y != 0
    x, yy, w0 = terms.x[keep], y[keep], terms.shipped
    pen = strength * np.square(scale)

    def loss(w):
        m = yy * (x @ w)
        p = 0.5 * (1 - np.tanh(0.5 * m))             # sigmoid(-m), stable
        value = np.logaddexp(0, -m).sum() + 0.5 * (pen * np.square(w - w0)).sum()
        return value, -(x.T @ (yy * p)) + pen * (w - w0)

    if not len(yy):
        return w0.copy()
    from scipy.optimize import minimize   # here, not at import: 0.5 s that a board without a fit never needs

    return minimize(loss, w0, jac=True, method="L-BFGS-B").x


def precision(terms: Terms, y: np.ndarray, weights: np.ndarray, scale: np.ndarray, strength: float) -> np.ndarray:
    """The fit's Hessian at ``weights`` (m, m): how sure it is of each direction (Laplace's approximation)."""
    x = terms.x[y != 0]
    p = 1 / (1 + np.exp(-(x @ weights)))
    return np.diag(strength * np.square(scale)) + (x * (p * (1 - p))[:, None]).T @ x


def leave_one_out(terms: Terms, y: np.ndarray, scale: np.ndarray, strength: float) -> tuple[float | None, float | None]:
    """(the shipped judge's agreement with the decided votes, the calibration's by leave-one-out)."""
    idx = np.flatnonzero(y != 0)
    if not len(idx):
        return None, None
    before = np.mean(np.sign(terms.logit()[idx]) == y[idx])
    hits = []
    for i in idx:
        rest = y.copy()
        rest[i] = 0
        w = fit(terms, rest, scale, strength)
        hits.append(np.sign(terms.x[i] @ w) == y[i])
    return float(before), float(np.mean(hits))


def spread(terms: Terms) -> np.ndarray:
    """Each term's standard deviation over a board's pairs (1 where a term never varies)."""
    s = terms.x.std(0) if len(terms.x) > 1 else np.ones(len(terms.names))
    return np.where(s > 1e-9, s, 1.0)


# ---- pairs worth voting on ---------------------------------------------------------------------
def informative(pool: Terms, prec: np.ndarray, n: int, groups: Sequence | None = None,
                exclude: Sequence[int] = ()) -> list[int]:
    """``n`` rows of ``pool`` whose votes would tell the most about the weights, chosen greedily: the pair
    whose vote would most lower the fit's uncertainty about the verdicts of the whole pool (the summed
    predictive variance ``u' H^-1 u`` over its pairs u; H: ``precision``, the prior's and the votes'), then
    H takes that pair in (as a vote at p = 1/2) so that the next pick looks along another direction. One
    pair per group (query) when ``groups`` is given.

    The sum is over the pool's pairs read by their terms' normal scores (each term's rank mapped to a
    normal of the term's spread), not their values: a term with a few extreme values, as the answers' own
    quality is where substance first fires, would otherwise make those few pairs the sum, and they would
    take the first picks while telling about themselves only (docs/log.md, 2026-12-04). A candidate is
    read by its values: how far a vote on it moves the fit depends on them.

    The judge's own confidence is deliberately left out of the score: weighing by ``p (1 - p)`` picks
    pairs the shipped judge is unsure of, and a user whose taste the judge misreads is told apart on
    pairs the judge is sure of and wrong (docs/log.md, 2026-12-02)."""
    x = pool.x
    if not len(x):
        return []
    u = normal_scores(x)
    spread_of_pool = u.T @ u / len(u)
    h = prec.copy()
    taken = np.zeros(len(x), bool)
    taken[list(exclude)] = True
    g = None if groups is None else np.asarray(groups)
    out = []
    while len(out) < n and not taken.all():
        cov = np.linalg.inv(h)
        lowered = np.einsum("ij,ij->i", x @ (cov @ spread_of_pool @ cov), x)
        gain = lowered / (1 + 0.25 * np.einsum("ij,ij->i", x @ cov, x))
        gain[taken] = -np.inf
        i = int(np.argmax(gain))
        out.append(i)
        taken[i] = True
        if g is not None:
            taken[g == g[i]] = True
        h = h + 0.25 * np.outer(x[i], x[i])
    return out


def normal_scores(x: np.ndarray) -> np.ndarray:
    """Each column of ``x`` (n, m) replaced by its values' ranks mapped to a normal of the column's spread
    (ties share their mean rank): the same order, without the tails."""
    from scipy.special import ndtri

    out = np.zeros_like(x, dtype=float)
    for j in range(x.shape[1]):
        _, inv, counts = np.unique(x[:, j], return_inverse=True, return_counts=True)
        upper = np.cumsum(counts)
        rank = (upper - (counts - 1) / 2)[inv.ravel()]          # 1-based mean rank of each value's ties
        out[:, j] = ndtri(rank / (len(x) + 1)) * x[:, j].std()
    return out


# ---- the calibrated judge ----------------------------------------------------------------------
class CalibratedJudge:
    """``judge`` with a calibration's weights on its terms: a judge of its own identity."""

    can_tie = False
    cacheable = False          # its terms are recomputed from the base judge, which is cheap

    def __init__(self, base: Judge, calibration: Calibration, layout: Layout | None = None):
        if calibration.judge != base.identity:
            raise DataError(f"calibration {calibration.name!r} was fitted for judge {calibration.judge}, "
                            f"but this judge is {base.identity}: fit it again from its votes "
                            f"(usl calibrate {calibration.name})", field="calibration")
        self.base, self.calibration = base, calibration
        self.name = base.name
        self.version = f"{base.version}+cal-{calibration.version}"
        self.layout = layout or Layout()

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def judge_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                     baseline_answers: Sequence[str], progress=None) -> np.ndarray:
        """P(model answer beats baseline answer), shape (n,); ``progress`` goes to the base judge's readings
        (raising from it stops them, as for the base judge alone)."""
        t = judge_terms(self.base, criteria, queries, model_answers, baseline_answers, self.layout, progress)
        w = np.array([self.calibration.weight(name) for name in t.names])
        return 1 / (1 + np.exp(-t.logit(w)))

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return verdicts_by_matrix(self.judge_matrix, requests)

    def read_criteria(self, criteria: Criteria) -> CriteriaReading:
        return read_criteria(self.base, criteria)
