"""Test doubles for the server: a duck-typed leaderboard service with known answers, and a real
uvicorn server on a free port in a background thread.

The fake stands in for the engine only where the engine's numbers don't matter (validation,
streaming, escaping, the page's flow); ``test_server_real.py`` runs the real service.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import uvicorn

from usl.leaderboard.service import Example
from usl.leaderboard.types import Leaderboard, LeaderboardSpec, Row
from usl.types import Criteria


@dataclass(frozen=True)
class FakeTopic:
    id: str
    name: str
    n_queries: int
    keywords: tuple[str, ...] = ()


MODELS = ("alpha-7b", "bravo-13b", "charlie-70b", "delta-8x7b", "echo-mini", "foxtrot-pro")
TOPICS = (FakeTopic("coding", "Coding & debugging", 40, ("python", "sql")),
          FakeTopic("writing", "Creative writing", 30, ("story", "poem")),
          FakeTopic("math", "Math", 20, ("algebra",)))
BASELINE = "gpt4-baseline"


class FakeService:
    """Default spec: win rates 80, 70, ..., 30 in MODELS order, CIs +-4 (so ranks 1..6).
    Any other criteria reverse the order; topics and use case shift every rate by -5."""

    def __init__(self, delay_s: float = 0.0, steps: int = 4, contradiction_delay_s: float = 0.0,
                 refine_delay_s: float = 0.0, refine_stuck: bool = False):
        self.delay_s, self.steps, self.contradiction_delay_s = delay_s, steps, contradiction_delay_s
        self.refine_delay_s, self.refine_stuck = refine_delay_s, refine_stuck   # stuck: never judges one
        self.rank_calls: list[LeaderboardSpec] = []
        self.rank_finished: list[LeaderboardSpec] = []    # calls that ran to the end (not cancelled)
        self.refine_calls: list[tuple] = []
        self.refining = self.most_refining = 0        # judging refine calls running now / at most at once
        self.refine_stopped = 0                       # refine calls stopped by their progress callback
        self._judged: dict[tuple, int] = {}
        self._lock = threading.Lock()

    def benchmarks(self) -> list[str]:
        return ["tiny"]

    def data_version(self, benchmark: str) -> str:
        return "v1" if benchmark == "tiny" else ""

    def topics(self, benchmark: str) -> list[FakeTopic]:
        if benchmark != "tiny":
            raise ValueError(f"unknown benchmark {benchmark!r}")
        return list(TOPICS)

    def rank(self, spec: LeaderboardSpec, progress: Callable[[int, int], None] | None = None) -> Leaderboard:
        with self._lock:
            self.rank_calls.append(spec)
        if spec.baseline not in (None, BASELINE):
            raise ValueError(f"unknown baseline {spec.baseline!r}")
        total = self.steps * len(MODELS)
        for i in range(self.steps):
            if progress:
                progress(i * len(MODELS), total)
            time.sleep(self.delay_s / self.steps)
        if progress:
            progress(total, total)
        with self._lock:
            self.rank_finished.append(spec)
        custom = spec.criteria != LeaderboardSpec().criteria
        order = MODELS[::-1] if custom else MODELS
        shift = -5.0 if (spec.topics or spec.use_case) else 0.0
        names = {t.id: t.name for t in TOPICS}
        topic_names = [names[t] for t in spec.topics] or [t.name for t in TOPICS]
        rows = []
        for i, m in enumerate(order):
            wr = 80.0 - 10.0 * i + shift
            rows.append(Row(model=m, rank=i + 1, win_rate=wr, ci=(wr - 4.0, wr + 4.0), n=100 - i,
                            n_missing=i % 2, topics={t: wr + 3.0 * k - 3.0 for k, t in enumerate(topic_names)},
                            avg_length=150.0 + 20 * MODELS.index(m), lc_win_rate=None if custom else wr - 1.5))
        breakdown = ({c: {m: 50.0 + (10.0 if k % 2 else -10.0) * (j - 2.5) for j, m in enumerate(MODELS)}
                      for k, c in enumerate(spec.criteria.as_list())} if spec.per_criterion else {})
        return Leaderboard(spec=spec.to_json() | {"judge_identity": "fake@1"}, rows=tuple(rows),
                           criteria_breakdown=breakdown)

    REFINE_QUERIES = 12

    def refine(self, spec: LeaderboardSpec, reference: str = "crm", queries: int | None = 0,
               seconds: float | None = None, progress: Callable[[int, int], None] | None = None) -> Leaderboard:
        """Judges ``queries`` more of REFINE_QUERIES (remembered per criteria, like the cache); the
        refined board ranks MODELS rotated by one (alpha last), whatever the criteria."""
        key = (reference, spec.criteria.key())
        with self._lock:
            self.refine_calls.append((spec, reference, queries))
            self.refining += queries != 0
            self.most_refining = max(self.most_refining, self.refining)
            judged = self._judged.get(key, 0)
            if not self.refine_stuck:
                judged = min(self.REFINE_QUERIES, judged + (self.REFINE_QUERIES if queries is None else queries))
            self._judged[key] = judged
        try:            # the cached estimate costs nothing; judging reports progress ten times a step
            for _ in range(10 if queries != 0 else 0):
                time.sleep(self.refine_delay_s / 10)
                if progress:
                    progress(0, queries or 0)
        except Exception:
            self.refine_stopped += 1
            raise
        finally:
            with self._lock:
                self.refining -= queries != 0
        order = MODELS[1:] + MODELS[:1]
        rows = tuple(Row(model=m, rank=i + 1, win_rate=75.0 - 10.0 * i, ci=(70.0 - 10.0 * i, 80.0 - 10.0 * i),
                         n=100, avg_length=150.0) for i, m in enumerate(order))
        meta = spec.to_json() | {"refinement": {"reference": reference, "reference_identity": f"{reference}@1",
                                                "queries_judged": judged, "queries": self.REFINE_QUERIES,
                                                "complete": judged == self.REFINE_QUERIES}}
        return Leaderboard(spec=meta, rows=rows, warnings=(f"refined: {judged} judged",))

    def examples(self, spec: LeaderboardSpec, model: str, limit: int = 5) -> list[Example]:
        if model not in MODELS:
            raise KeyError(f"unknown model {model!r}")
        ps = (0.9, 0.2, 0.5, 0.7, 0.1)
        return [Example(query_id=f"q{i}", query=f"Question {i}: write <b>bold</b> code", model=model,
                        model_answer=f"Answer {i} of {model} <img src=x onerror=\"window.__pwned=1\">",
                        baseline=BASELINE, baseline_answer=f"Baseline answer {i}", p_model_wins=ps[i % 5],
                        topic=TOPICS[i % 3].name) for i in range(limit)]

    def contradictions(self, criteria: Criteria, judge: str = "default") -> list[str]:
        time.sleep(self.contradiction_delay_s)
        norm = lambda s: " ".join(s.lower().split())
        avoid = {norm(a): a for a in criteria.avoid}
        return [f"You both like and avoid: {like}" for like in criteria.likes if norm(like) in avoid]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(app, port: int | None = None) -> Iterator[str]:
    """Run ``app`` under a real uvicorn server on localhost; yields its base URL."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
