"""Records the leaderboard engine takes and returns (the contract the CLI and server use)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from usl.leaderboard.limits import InputError, check_spec
from usl.types import Criteria, CriterionReading


@dataclass(frozen=True)
class LeaderboardSpec:
    """Everything that determines a leaderboard. ``topics`` empty and ``use_case`` empty = all queries."""

    criteria: Criteria = Criteria(("The answer is helpful, accurate and well written.",))
    benchmark: str = "alpaca_eval"
    topics: tuple[str, ...] = ()
    use_case: str = ""
    judge: str = "default"
    baseline: str | None = None       # None = the benchmark's baseline
    n_bootstrap: int = 1000
    seed: int = 0
    per_criterion: bool = True        # also judge each criterion alone
    calibration: str = ""             # a stored calibration of the judge to rank under ('' = the shipped judge)

    def __post_init__(self):
        check_spec(self)              # every field in its range (usl.leaderboard.limits), before any work
        object.__setattr__(self, "criteria", self.criteria.deduplicated())   # each wish counted once

    def to_json(self) -> dict:
        d = asdict(self)
        d["criteria"] = {"likes": list(self.criteria.likes), "avoid": list(self.criteria.avoid)}
        d["topics"] = list(self.topics)             # as JSON reads it back: a board's spec is the same either way
        return d

    @classmethod
    def from_json(cls, d: dict, where: str = "spec") -> "LeaderboardSpec":
        """The spec a board records (``to_json`` and the versions beside it, which are left for
        ``drift``); a field of the wrong type or an unknown one raises ``ValueError`` naming it."""
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected an object")
        unknown = sorted(set(d) - set(cls.__dataclass_fields__) - RECORDED)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
        kw = {}
        for name, kind in (("benchmark", str), ("use_case", str), ("judge", str), ("n_bootstrap", int),
                           ("seed", int), ("per_criterion", bool), ("calibration", str)):
            if name in d:
                if not isinstance(d[name], kind) or (kind is int and isinstance(d[name], bool)):
                    raise ValueError(f"{where}.{name}: expected {kind.__name__}, got {type(d[name]).__name__}")
                kw[name] = d[name]
        if d.get("baseline") is not None:
            if not isinstance(d["baseline"], str):
                raise ValueError(f"{where}.baseline: expected a string or null")
            kw["baseline"] = d["baseline"]
        if "topics" in d:
            kw["topics"] = tuple(_strings(d["topics"], f"{where}.topics"))
        if "criteria" in d:
            kw["criteria"] = Criteria(*map(tuple, recorded_criteria(d["criteria"], f"{where}.criteria")))
        try:
            return cls(**kw)
        except InputError as e:
            raise ValueError(f"{where}.{e}") from None


# what a board's spec records beside the request: the versions that made it, and what the engine decided
RECORDED = frozenset({"benchmark_version", "judge_identity", "n_queries", "query_set", "topic_names", "length_control",
                      "win_rate", "rank", "usl_version", "git_commit", "refinement", "calibration_version",
                      "calibration_weights"})


def drift(recorded: dict, now: dict) -> list[str]:
    """How the board made now from a recorded spec differs in what made it (judge, data, queries)."""
    out = []
    for key, what in (("judge_identity", "judge"), ("benchmark_version", "benchmark data"),
                      ("query_set", "selected queries"), ("calibration_version", "calibration")):
        if recorded.get(key) and now.get(key) and recorded[key] != now[key]:
            out.append(f"the spec was recorded with {what} {recorded[key]}, this board has {now[key]}: "
                       "its figures may differ from the recorded board's")
    return out


def recorded_criteria(c, where: str = "criteria") -> tuple[list[str], list[str]]:
    """The likes and avoid of a spec's recorded ``criteria`` (``{"likes": [...], "avoid": [...]}``), or a
    ``ValueError`` naming the field (``where``, ``where.likes``, ``where.avoid``)."""
    if not isinstance(c, dict) or set(c) - {"likes", "avoid"}:
        raise ValueError(f"{where}: expected {{\"likes\": [...], \"avoid\": [...]}}")
    return _strings(c.get("likes", []), f"{where}.likes"), _strings(c.get("avoid", []), f"{where}.avoid")


def _strings(values, where: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{where}: expected a list of strings")
    return values


@dataclass(frozen=True)
class Row:
    model: str
    rank: int                          # 1 + number of models significantly better (CI-aware)
    win_rate: float                    # percent vs baseline, ties half, query-weighted micro average
    ci: tuple[float, float]            # bootstrap 95% CI over queries, percent
    n: int                             # answered queries counted
    n_missing: int = 0                 # queries without an answer (excluded, never a loss)
    topics: dict[str, float] = field(default_factory=dict)   # topic name -> win rate
    avg_length: float = 0.0            # words
    lc_win_rate: float | None = None   # length-controlled win rate (None when off)
    rating: float | None = None        # optional Bradley-Terry rating


@dataclass(frozen=True)
class Leaderboard:
    spec: dict                         # LeaderboardSpec.to_json() + data/judge versions
    rows: tuple[Row, ...]
    criteria_breakdown: dict[str, dict[str, float]] = field(default_factory=dict)  # criterion -> model -> win rate
    warnings: tuple[str, ...] = ()
    # criterion -> share of the combined board it explains (non-negative weights summing to 1)
    criteria_contribution: dict[str, float] = field(default_factory=dict)
    # how the judge reads each criterion (kind, measured accuracy on that kind); empty for judges that cannot say
    criteria_reading: tuple[CriterionReading, ...] = ()

    @property
    def has_interval(self) -> bool:
        """Whether the board drew bootstrap resamples (``n_bootstrap`` > 0). Without, a row's ``ci`` is its win
        rate twice (each rank its position), and what the board gives out shows no interval: ``null`` in JSON,
        ``None`` in ``records``, blank cells in tables."""
        return self.spec.get("n_bootstrap", 1) > 0

    def records(self) -> list[dict]:
        """The rows as plain dicts, flat: ``ci`` as ``ci_low``/``ci_high`` (None without an interval), each
        topic as ``topic:NAME``."""
        out = []
        for r in self.rows:
            d = asdict(r)
            low, high = d.pop("ci") if self.has_interval else (None, None)
            topics = d.pop("topics")
            out.append(d | {"ci_low": low, "ci_high": high} | {f"topic:{t}": v for t, v in topics.items()})
        return out

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` indexed by model (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("to_pandas needs pandas (pip install pandas); records() gives plain dicts") from e
        return pd.DataFrame.from_records(self.records()).set_index("model")

    def to_json(self) -> dict:
        return {"spec": self.spec, "rows": [_row_json(r, self.has_interval) for r in self.rows],
                "criteria_breakdown": self.criteria_breakdown,
                "criteria_contribution": self.criteria_contribution, "warnings": list(self.warnings),
                "criteria_reading": [asdict(r) for r in self.criteria_reading]}


def _row_json(r: Row, interval: bool = True) -> dict:
    """``asdict(r)`` with the CI as a list (null without an interval), without ``asdict``'s deep copy of every
    number (a board's 43 rows of a dozen topics each took it ~8 ms)."""
    return {f.name: getattr(r, f.name) for f in fields(r)} | {"ci": list(r.ci) if interval else None,
                                                              "topics": dict(r.topics)}


@dataclass(frozen=True)
class Moved:
    """A model's place on the board (1 = highest win rate) and win rate, shipped judge vs calibrated."""

    model: str
    before: int
    after: int
    win_rate_before: float
    win_rate_after: float


@dataclass(frozen=True)
class CalibrationReport:
    """A calibration just fitted (``Calibration.to_json()``) and the models it moved, most moved first."""

    calibration: dict
    moved: tuple[Moved, ...]

    def to_json(self) -> dict:
        return {"calibration": self.calibration, "moved": [asdict(m) for m in self.moved]}


@dataclass(frozen=True)
class Comparison:
    """Two boards and how far their orders agree (over the models on both)."""

    a: Leaderboard
    b: Leaderboard
    kendall_tau: float
    spearman_rho: float
    warnings: tuple[str, ...] = ()
