"""The leaderboard engine's front door: what the CLI and the HTTP server call.

CONTRACT (owned by the leaderboard engine; the server codes against these signatures):

    svc = LeaderboardService(store, home=None)
    svc.benchmarks() -> list[str]
    svc.topics(benchmark) -> list[usl.data.topics.Topic]
    svc.rank(spec: LeaderboardSpec, progress: Callable[[int, int], None] | None = None) -> Leaderboard
    svc.compare(a: LeaderboardSpec, b: LeaderboardSpec) -> Comparison
    svc.examples(spec, model, limit=5) -> list[Example]
    svc.contradictions(criteria) -> list[str]      # human-readable warnings
"""

from __future__ import annotations

from dataclasses import dataclass

from usl.leaderboard.types import Leaderboard


@dataclass(frozen=True)
class Comparison:
    a: Leaderboard
    b: Leaderboard
    kendall_tau: float
    spearman_rho: float
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Example:
    query_id: str
    query: str
    model: str
    model_answer: str
    baseline: str
    baseline_answer: str
    p_model_wins: float          # averaged over both orders
    topic: str = ""
