"""Criteria direction and noise, drawn afresh for every sample in every epoch.

A human preference pair carries the criteria under which the winner wins and (in
``meta["loser_criteria"]``) those under which the loser would win. Per sample and epoch:

* direction ``original``: winner's criteria, winner chosen; ``reverse``: loser's criteria, the
  label flipped; ``random``: one of the two.
* noise ``add``: append ~half as many criteria taken from *other* pairs (never the loser's);
  ``remove``: keep a random half, at least one; ``replace``: overwrite at most half (``n // 2``)
  with the loser's criteria, label unchanged, so the winner's criteria are never outnumbered;
  ``random``: one of none/add/remove/replace.

Fixes over the reference code: ``replace`` on one criterion is a counted no-op instead of a crash;
``remove`` never leaves an empty list; a tie stays a tie (direction and ``replace`` do not apply to
it); the draws depend on ``(seed, epoch, index)`` only, so every epoch sees new noise and a resumed
run sees the same noise as an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from usl.types import Preference, PreferenceSample

NOISES = ("none", "add", "remove", "replace")
_FLIP = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}


@dataclass(frozen=True)
class EpochView:
    """What one sample looks like in one epoch."""

    criteria: tuple[str, ...]
    preference: Preference
    direction: str          # applied: original | reverse
    noise: str              # applied: none | add | remove | replace
    note: str = ""          # why a requested transform did not apply (e.g. "no_loser_criteria")


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), int(index)])


def loser_criteria(sample: PreferenceSample) -> tuple[str, ...]:
    value = sample.meta_value("loser_criteria")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"sample {sample.idx}: loser_criteria must be a list, got {type(value).__name__}")
    return tuple(str(v) for v in value if str(v).strip())


def sample_topic(sample: PreferenceSample) -> str:
    """The topic a sample's criteria belong to: meta 'topic' if given, else its pair (group/idx)."""
    for key in ("criteria_topic", "topic"):
        value = sample.meta_value(key)
        if value is not None:
            return str(value)
    return sample.group or sample.idx


class CriteriaPool:
    """Criteria of the whole training set with their topics, the source of ``add`` noise."""

    def __init__(self, samples: Sequence[PreferenceSample]):
        seen: dict[str, str] = {}
        for s in samples:
            t = sample_topic(s)
            for c in s.criteria + loser_criteria(s):
                seen.setdefault(c, t)
        self.items: list[tuple[str, str]] = sorted((t, c) for c, t in seen.items())

    def draw(self, k: int, *, exclude_topic: str, exclude: set[str], rng: np.random.Generator) -> list[str]:
        """Up to ``k`` distinct criteria from other topics, none of them in ``exclude``."""
        ok = [c for t, c in self.items if t != exclude_topic and c not in exclude]
        if not ok or k <= 0:
            return []
        pick = rng.choice(len(ok), size=min(k, len(ok)), replace=False)
        return [ok[i] for i in sorted(pick)]


def apply_direction(criteria: tuple[str, ...], preference: Preference, loser: tuple[str, ...],
                    direction: str, rng: np.random.Generator) -> tuple[tuple[str, ...], Preference,
                                                                      tuple[str, ...], str, str]:
    """Returns (criteria, preference, criteria of the new loser, applied direction, note)."""
    want = direction if direction != "random" else ("original", "reverse")[int(rng.integers(2))]
    if want == "original":
        return criteria, preference, loser, "original", ""
    if preference == "tie":
        return criteria, preference, loser, "original", "tie_no_direction"
    if not loser:
        return criteria, preference, loser, "original", "no_loser_criteria"
    return loser, _FLIP[preference], criteria, "reverse", ""  # type: ignore[return-value]


def apply_noise(criteria: tuple[str, ...], loser: tuple[str, ...], noise: str, rng: np.random.Generator,
                pool: CriteriaPool | None, topic: str) -> tuple[tuple[str, ...], str, str]:
    """Returns (criteria, applied noise, note). ``criteria`` must be non-empty."""
    if not criteria:
        raise ValueError("a sample needs at least one criterion")
    want = noise if noise != "random" else NOISES[int(rng.integers(len(NOISES)))]
    n = len(criteria)
    if want == "none":
        return criteria, "none", ""
    if want == "remove":
        keep = max(1, (n + 1) // 2)
        idx = sorted(rng.choice(n, size=keep, replace=False))
        return tuple(criteria[i] for i in idx), "remove", ""
    if want == "add":
        extra = pool.draw(max(1, n // 2), exclude_topic=topic, exclude=set(criteria) | set(loser), rng=rng) \
            if pool else []
        if not extra:
            return criteria, "none", "add_no_candidates"
        merged = list(criteria) + extra
        order = rng.permutation(len(merged))
        return tuple(merged[i] for i in order), "add", ""
    if want == "replace":
        candidates = [c for c in loser if c not in criteria]
        k = min(n // 2, len(candidates))
        if k == 0:
            return criteria, "none", "replace_noop" if candidates else "replace_no_loser_criteria"
        slots = rng.choice(n, size=k, replace=False)
        new = rng.choice(len(candidates), size=k, replace=False)
        out = list(criteria)
        for s, c in zip(slots, new):
            out[int(s)] = candidates[int(c)]
        return tuple(out), "replace", ""
    raise ValueError(f"unknown data_noise {noise!r}; expected one of {list(NOISES) + ['random']}")


def epoch_view(sample: PreferenceSample, *, direction: str, noise: str, seed: int, epoch: int, index: int,
               pool: CriteriaPool | None) -> EpochView:
    rng = sample_rng(seed, epoch, index)
    crit, pref, loser, applied_dir, note = apply_direction(
        sample.criteria, sample.preference, loser_criteria(sample), direction, rng)
    if pref == "tie" and noise == "replace":
        return EpochView(crit, pref, applied_dir, "none", "tie_no_replace")
    crit, applied_noise, note2 = apply_noise(crit, () if pref == "tie" else loser, noise, rng, pool,
                                             sample_topic(sample))
    return EpochView(crit, pref, applied_dir, applied_noise, ";".join(x for x in (note, note2) if x))
