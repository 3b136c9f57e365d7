"""Agreement and consistency metrics over judged preference samples.

Every sample is judged twice, in the given order (A, B) and swapped (B, A). The judge's decision is
the label of the order-averaged verdict::

    p_a = (v_ab.p_a + v_ba.p_b) / 2        p_tie = (v_ab.p_tie + v_ba.p_tie) / 2

* accuracy: on samples whose human label is not a tie, the mean credit of the decision: 1 if it
  names the human winner, 0 if it names the loser, 0.5 if it is a tie or undecided (p_a == p_b,
  e.g. a binary judge that flips with the order): what a coin-flip tie-break would score on average;
* agreement: on all samples, ties included, decision == label (meaningful for judges that can tie);
* swap consistency: the A-first and B-first verdicts name the same response (or both say tie);
* criteria-flip consistency: within a ``group`` (the same two responses under different criteria),
  for each two samples whose human winners differ, the judge's winners must differ too
  (``flip_rate``); ``flip_both_correct`` also asks that both decisions be right. Winners are
  compared by response text, so it does not matter in which order a group's samples show them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from typing import Iterable, Sequence

from usl.judges.base import Verdict
from usl.types import PreferenceSample

_FLIP = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}


@dataclass(frozen=True)
class Judged:
    sample: PreferenceSample
    ab: Verdict          # verdict with the sample's order
    ba: Verdict          # verdict with A and B swapped (its p_a is about the sample's B)
    file: str = ""

    @property
    def decision(self) -> Verdict:
        return Verdict((self.ab.p_a + self.ba.p_b) / 2, (self.ab.p_tie + self.ba.p_tie) / 2)

    @property
    def label(self) -> str:
        """model_a | model_b | tie; an exact p_a == p_b is undecided and reported as tie."""
        return _label(self.decision)

    @property
    def swap_consistent(self) -> bool:
        """The same decision in both orders; an undecided 0.5 / 0.5 in both is the same decision
        (two identical answers), not one that flips with the order."""
        return _label(self.ab) == _FLIP[_label(self.ba)]


def _label(v: Verdict) -> str:
    return "tie" if abs(v.p_a - v.p_b) < 1e-9 and v.p_tie <= v.p_a else v.label


def _winner_text(s: PreferenceSample, label: str) -> str | None:
    return s.response_a if label == "model_a" else s.response_b if label == "model_b" else None


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def credit(j: Judged) -> float | None:
    """A sample's share of the accuracy: 1 if the decision names the labelled winner, 0.5 if it is
    undecided (tie), 0 otherwise; None for a sample labelled tie (not counted)."""
    pref = j.sample.preference
    return None if pref == "tie" else 1.0 if j.label == pref else 0.5 if j.label == "tie" else 0.0


def accuracy(items: Sequence[Judged]) -> tuple[float | None, int]:
    credits = [c for c in map(credit, items) if c is not None]
    return (sum(credits) / len(credits) if credits else None), len(credits)


def agreement(items: Sequence[Judged]) -> float | None:
    return _rate(sum(j.label == j.sample.preference for j in items), len(items))


def swap_consistency(items: Sequence[Judged]) -> float | None:
    return _rate(sum(j.swap_consistent for j in items), len(items))


def flip_consistency(items: Iterable[Judged]) -> dict:
    """Over contradictory pairs of samples within each group (see module docstring)."""
    groups: dict[str, list[Judged]] = defaultdict(list)
    for j in items:
        if j.sample.group:
            groups[(j.file, j.sample.group)].append(j)  # type: ignore[index]
    n = flipped = both = skipped = 0
    for members in groups.values():
        for x, y in combinations(members, 2):
            sx, sy = x.sample, y.sample
            if "tie" in (sx.preference, sy.preference):
                continue
            if {sx.response_a, sx.response_b} != {sy.response_a, sy.response_b}:
                skipped += 1                      # not the same two responses: not comparable
                continue
            if _winner_text(sx, sx.preference) == _winner_text(sy, sy.preference):
                continue                          # criteria agree: nothing has to flip
            n += 1
            wx, wy = _winner_text(sx, x.label), _winner_text(sy, y.label)
            flipped += wx is not None and wy is not None and wx != wy
            both += x.label == sx.preference and y.label == sy.preference
    return {"pairs": n, "flip_rate": _rate(flipped, n), "flip_both_correct": _rate(both, n),
            "groups": len(groups), "skipped_pairs": skipped}


def summarize(items: Sequence[Judged]) -> dict:
    acc, n_non_tie = accuracy(items)
    return {"n": len(items), "n_non_tie": n_non_tie, "accuracy": acc, "agreement": agreement(items),
            "swap_consistency": swap_consistency(items), "flip": flip_consistency(items)}
