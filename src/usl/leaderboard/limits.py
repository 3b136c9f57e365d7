"""The range of every input a board takes, in one place.

``LeaderboardSpec`` checks itself against ``LIMITS`` when it is made (``check_spec``), so the CLI,
the Python API (``usl.load().rank``) and the HTTP API refuse the same inputs with the same words,
before anything loads; the server's request schema (``usl.server.schemas``) is built from the same
numbers, so its OpenAPI document states them. Each bound keeps one board cheap and its page readable:

- criteria: 10 likes and 10 avoid, 300 characters each, each with words (a blank criterion is refused,
  not dropped: every door says so alike), text that UTF-8 can encode (a command-line argument of other
  bytes reaches Python as lone surrogates, which fail deep inside a judge);
- bootstrap resamples: 0 (no interval: the win rate alone) to 10,000. The resampling holds about
  32 bytes per query and resample at once: 10,000 over 483 queries is about 150 MB, and beyond
  1,000 the interval's own Monte Carlo error is already below its rounding;
- the bootstrap seed: 0 to 2**32 - 1 (numpy refuses negative seeds, and only after the judging);
- topics: 200 names; a topic, baseline or benchmark name 200 characters; a judge spec 1,000 (an
  ``llm:`` spec carries its base_url); the use case 500 characters.

A value out of range raises ``InputError`` (a ``ValueError``) naming the field and, for a list, the
item (``criteria.likes[3]``); ``named`` rewrites the field as a command-line option names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Limits:
    max_criteria: int = field(default=10, metadata={"help": "Likes per board, and avoids per board."})
    max_criterion_chars: int = field(default=300, metadata={"help": "Characters in one criterion."})
    max_use_case_chars: int = field(default=500, metadata={"help": "Characters in the use case."})
    max_topics: int = field(default=200, metadata={"help": "Topics one board may name."})
    max_examples: int = field(default=20, metadata={"help": "Examples one request may ask for."})
    max_name_chars: int = field(default=200, metadata={"help": "Characters in a topic, baseline or benchmark "
                                                                "name."})
    max_judge_chars: int = field(default=1000, metadata={"help": "Characters in a judge spec."})
    max_bootstrap: int = field(default=10_000, metadata={"help": "Bootstrap resamples (0: no interval)."})
    min_bootstrap: int = field(default=10, metadata={"help": "Fewest resamples that give an interval (below, a "
                                                            "percentile interval need not hold its own estimate)."})
    max_seed: int = field(default=2**32 - 1, metadata={"help": "Largest bootstrap seed (the least is 0)."})


LIMITS = Limits()


class InputError(ValueError):
    """An input out of its range: ``field`` (``criteria.likes``), ``index`` in a list (0-based) or None."""

    def __init__(self, field: str, problem: str, index: int | None = None):
        self.field, self.problem, self.index = field, problem, index
        super().__init__(f"{field}{'' if index is None else f'[{index}]'}: {problem}")

    def named(self, options: dict[str, str]) -> str:
        """The message with the field as ``options`` names it: ``{"criteria.likes": "--criteria"}``
        gives "--criteria #4: ..." (items counted from 1, as a user counts options)."""
        name = options.get(self.field)
        if name is None:
            return str(self)
        return f"{name}{'' if self.index is None else f' #{self.index + 1}'}: {self.problem}"


def check_text(value: Any, field: str, max_chars: int, index: int | None = None) -> None:
    """``value`` is a string of at most ``max_chars`` characters that UTF-8 can encode."""
    if not isinstance(value, str):
        raise InputError(field, f"expected text, got {type(value).__name__}", index)
    if len(value) > max_chars:
        raise InputError(field, f"{len(value)} characters; at most {max_chars}", index)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(field, f"not valid UTF-8 (undecodable bytes at character {e.start}); write the "
                                "text in UTF-8", index) from None


BLANK_CRITERION = "blank; a criterion needs words"


def check_texts(values: Iterable[Any], field: str, max_items: int, max_chars: int, words: bool = False) -> None:
    """Each of ``values`` a text ``check_text`` takes; ``words``: none of them blank."""
    values = list(values)
    if len(values) > max_items:
        raise InputError(field, f"{len(values)} given; at most {max_items}")
    for i, v in enumerate(values):
        check_text(v, field, max_chars, i)
        if words and not v.strip():
            raise InputError(field, BLANK_CRITERION, i)


def check_int(value: Any, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InputError(field, f"{value} is out of range; it must be from {low} to {high:,}")


def few_resamples(n: int, limits: Limits = LIMITS) -> str:
    return (f"{n} resamples give no usable interval; use 0 (no interval) or {limits.min_bootstrap} to "
            f"{limits.max_bootstrap:,}")


def check_spec(spec: Any, limits: Limits = LIMITS) -> None:
    """Raise ``InputError`` for the first field of ``spec`` (a ``LeaderboardSpec``) out of range."""
    check_texts(spec.criteria.likes, "criteria.likes", limits.max_criteria, limits.max_criterion_chars, words=True)
    check_texts(spec.criteria.avoid, "criteria.avoid", limits.max_criteria, limits.max_criterion_chars, words=True)
    check_texts(spec.topics, "topics", limits.max_topics, limits.max_name_chars)
    check_text(spec.use_case, "use_case", limits.max_use_case_chars)
    check_text(spec.benchmark, "benchmark", limits.max_name_chars)
    check_text(spec.judge, "judge", limits.max_judge_chars)
    check_text(spec.calibration, "calibration", limits.max_name_chars)
    if spec.baseline is not None:
        check_text(spec.baseline, "baseline", limits.max_name_chars)
    check_int(spec.n_bootstrap, "n_bootstrap", 0, limits.max_bootstrap)
    if 0 < spec.n_bootstrap < limits.min_bootstrap:
        raise InputError("n_bootstrap", few_resamples(spec.n_bootstrap, limits))
    check_int(spec.seed, "seed", 0, limits.max_seed)
