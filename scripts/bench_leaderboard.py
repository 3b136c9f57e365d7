"""Time the leaderboard engine: statistics on 43 models x 483 queries, and a cached leaderboard.

    python scripts/bench_leaderboard.py                       # synthetic data in a temporary store
    python scripts/bench_leaderboard.py --home DIR --judge length   # a real store (alpaca_eval imported)

Targets: statistics with 1,000 bootstrap resamples < 0.5 s; a cached leaderboard < 0.2 s.
"A cached leaderboard" is timed three ways: the same service asked again (in-memory memo), the same
service with the memo cleared (every judgment read back from SQLite), and a fresh service (which also
loads the benchmark's ~21k answers from SQLite first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from usl.leaderboard import stats
from usl.leaderboard.length_control import length_controlled
from usl.leaderboard.ratings import elo_ratings
from usl.leaderboard.service import LeaderboardService
from usl.leaderboard.types import LeaderboardSpec
from usl.store import Store
from usl.store.benchmarks import list_benchmarks, save_benchmark
from usl.types import Benchmark, Query, Response


def timeit(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def synthetic_scores(m: int = 43, q: int = 483, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, m)
    s = (rng.random((m, q)) < p[:, None]).astype(float)
    s[rng.random((m, q)) < 0.01] = np.nan
    lengths = rng.integers(20, 600, (m, q)).astype(float)
    return s, lengths, rng.integers(20, 600, q).astype(float)


def bench_stats(n_bootstrap: int) -> None:
    s, mlen, blen = synthetic_scores()
    topics = {f"t{i}": list(range(i, 483, 12)) for i in range(12)}
    t_core = timeit(lambda: stats.summarize(s, n_bootstrap, seed=0))
    t_all = timeit(lambda: (stats.summarize(s, n_bootstrap, seed=0), stats.topic_win_rates(s, topics),
                            length_controlled(s, mlen, blen), elo_ratings(s)))
    print(f"stats 43x483, {n_bootstrap} resamples: win rates + CIs + ranks {t_core * 1000:.1f} ms; "
          f"with 12 topics, LC and Bradley-Terry {t_all * 1000:.1f} ms (target < 500 ms)")


def synthetic_store(path: Path) -> None:
    rng = np.random.default_rng(1)
    vocab = np.array("the a model answer is good clear short long detail example code list".split())
    queries = tuple(Query(f"q{i}", f"question {i}: " + " ".join(rng.choice(vocab, 12))) for i in range(483))
    models = tuple(f"model_{i:02d}" for i in range(43)) + ("baseline",)
    resp = [Response(q.id, m, " ".join(rng.choice(vocab, int(rng.integers(20, 400)))))
            for q in queries for m in models]
    save_benchmark(Store(path), Benchmark("synthetic", queries, models, "baseline"), resp, source="bench")


def bench_cached(home: Path, benchmark: str, judge: str, auto_topics: bool = True) -> None:
    db = home / "usl.sqlite"
    spec = LeaderboardSpec(benchmark=benchmark, judge=judge, per_criterion=False)
    svc = LeaderboardService(Store(db), auto_topics=auto_topics)
    t = time.perf_counter()
    svc.rank(spec)
    print(f"first leaderboard ({benchmark}, judge {judge}; judges whatever is not cached yet): "
          f"{time.perf_counter() - t:.2f} s")
    t_memo = timeit(lambda: svc.rank(spec))

    def from_sqlite():
        svc.scores.clear()
        svc.rank(spec)

    t_sql = timeit(from_sqlite)
    t_fresh = timeit(lambda: LeaderboardService(Store(db), auto_topics=auto_topics).rank(spec), repeat=3)
    print(f"cached leaderboard: same service {t_memo * 1000:.0f} ms; judgments from SQLite {t_sql * 1000:.0f} ms; "
          f"fresh service incl. loading the benchmark {t_fresh * 1000:.0f} ms (target < 200 ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", help="usl data directory with an imported benchmark (default: synthetic data)")
    ap.add_argument("--benchmark", default="alpaca_eval")
    ap.add_argument("--judge", default="length", help="judge spec for the cached-leaderboard timing")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other work inflates these timings)")
    bench_stats(args.n_bootstrap)
    if args.home and args.benchmark in list_benchmarks(Store(Path(args.home) / "usl.sqlite")):
        bench_cached(Path(args.home), args.benchmark, args.judge)
    else:
        with tempfile.TemporaryDirectory() as d:
            synthetic_store(Path(d) / "usl.sqlite")
            bench_cached(Path(d), "synthetic", args.judge, auto_topics=False)


if __name__ == "__main__":
    main()
