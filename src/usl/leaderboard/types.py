"""Records the leaderboard engine takes and returns (the contract the CLI and server use)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from usl.types import Criteria


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

    def to_json(self) -> dict:
        d = asdict(self)
        d["criteria"] = {"likes": list(self.criteria.likes), "avoid": list(self.criteria.avoid)}
        return d


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

    def to_json(self) -> dict:
        return {"spec": self.spec, "rows": [asdict(r) | {"ci": list(r.ci)} for r in self.rows],
                "criteria_breakdown": self.criteria_breakdown,
                "criteria_contribution": self.criteria_contribution, "warnings": list(self.warnings)}
