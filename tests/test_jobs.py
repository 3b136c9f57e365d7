"""Scoring jobs on a tiny benchmark in a real SQLite store: values by hand, caching, resume after kill."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from dataclasses import dataclass

import numpy as np
import pytest

from usl.judges.base import Verdict
from usl.judges.heuristic import LengthJudge
from usl.leaderboard.answers import Answers
from usl.leaderboard.jobs import JobConfig, ScoringJob, score
from usl.leaderboard.judgments import JudgmentCache
from usl.store import Store
from usl.store.benchmarks import load_benchmark, load_responses, save_benchmark
from usl.types import Benchmark, Criteria, Query, Response

CRIT = Criteria(("helpful",))


def tiny(store, extra_model=False, changed=False):
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(4))
    models = ("base", "long", "short") + (("new",) if extra_model else ())
    resp = []
    for i in range(4):
        resp.append(Response(f"q{i}", "base", "w " * 5))
        resp.append(Response(f"q{i}", "long", "w " * (9 if not (changed and i == 0) else 2)))
        if i != 3:                                        # short misses q3
            resp.append(Response(f"q{i}", "short", "w " * (2 if i else 5)))  # q0: equal length -> tie
        if extra_model:
            resp.append(Response(f"q{i}", "new", "w " * 7))
    save_benchmark(store, Benchmark("tiny", queries, models, "base"), resp, source="test")
    return Answers(load_benchmark(store, "tiny"), load_responses(store, "tiny"))


def job(data, models=("long", "short")):
    return ScoringJob(CRIT, "base", tuple(models), tuple(q.id for q in data.benchmark.queries))


@dataclass
class Counting:
    inner: object
    calls: int = 0
    items: int = 0

    def __post_init__(self):
        self.name, self.version, self.can_tie = self.inner.name, self.inner.version, self.inner.can_tie

    @property
    def identity(self):
        return self.inner.identity

    def judge(self, requests):
        self.calls += 1
        self.items += len(requests)
        return self.inner.judge(requests)


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "s.sqlite")


def test_scores_by_hand_missing_is_nan(store):
    data = tiny(store)
    s = score(data, LengthJudge(), job(data), JudgmentCache(store))
    np.testing.assert_array_equal(s[0], [1, 1, 1, 1])
    np.testing.assert_array_equal(s[1][:3], [0.5, 0, 0])
    assert np.isnan(s[1, 3])


def test_orders_are_averaged(store):
    @dataclass
    class FirstAlwaysWins:
        name: str = "first"
        version: str = "1"
        can_tie: bool = False
        identity: str = "first@1"

        def judge(self, requests):
            return [Verdict(1.0) for _ in requests]

    data = tiny(store)
    s = score(data, FirstAlwaysWins(), job(data), None)   # a pure position bias cancels out
    assert np.nanmax(np.abs(s - 0.5)) == 0


def test_rerun_is_cached_and_new_model_scores_only_new_pairs(store):
    data = tiny(store)
    cache = JudgmentCache(store)
    j1 = Counting(LengthJudge())
    first = score(data, j1, job(data), cache, JobConfig(batch_size=3))
    assert j1.items == 2 * 7 and cache.count() == 14
    j2 = Counting(LengthJudge())
    again = score(data, j2, job(data), cache)
    assert j2.calls == 0
    np.testing.assert_array_equal(first, again)
    data2 = tiny(store, extra_model=True)
    j3 = Counting(LengthJudge())
    s3 = score(data2, j3, job(data2, ("long", "new", "short")), cache)
    assert j3.items == 2 * 4                       # only the new model's 4 pairs, both orders
    np.testing.assert_array_equal(s3[1], [1, 1, 1, 1])
    assert cache.count() == 22


def test_changed_answer_is_judged_afresh(store):
    data = tiny(store)
    cache = JudgmentCache(store)
    score(data, LengthJudge(), job(data), cache)
    data2 = tiny(store, changed=True)              # long's answer to q0 is now 2 words
    j = Counting(LengthJudge())
    s = score(data2, j, job(data2), cache)
    assert j.items == 2 and s[0, 0] == 0.0


def test_uncacheable_judge_skips_the_store_and_matrix_path_is_used(store):
    data = tiny(store)
    cache = JudgmentCache(store)

    class Fast:
        name, version, can_tie, cacheable = "fastx", "1", False, False
        identity = "fastx@1"
        seen = 0

        def judge(self, requests):
            raise AssertionError("judge_matrix must be preferred")

        def judge_matrix(self, criteria, queries, model_answers, baseline_answers, progress=None):
            Fast.seen += len(queries)
            return np.array([len(m.split()) > len(b.split()) for m, b in zip(model_answers, baseline_answers)],
                            float)

    s = score(data, Fast(), job(data), cache)
    assert Fast.seen == 7 and cache.count() == 0
    np.testing.assert_array_equal(s[0], [1, 1, 1, 1])
    Fast.cacheable = True
    score(data, Fast(), job(data), cache)
    assert cache.count() == 7                          # one BOTH_ORDERS row per pair
    score(data, Fast(), job(data), cache)
    assert Fast.seen == 14                             # the third run came from the cache


def test_judge_returning_wrong_count_raises(store):
    data = tiny(store)

    class Short(LengthJudge):
        def judge(self, requests):
            return super().judge(requests)[:-1]

    with pytest.raises(ValueError, match="returned 3 verdicts for 4 requests"):
        score(data, Short(), job(data), JudgmentCache(store), JobConfig(batch_size=4))


CHILD = textwrap.dedent("""
    import sys, time
    from usl.judges.heuristic import LengthJudge
    from usl.leaderboard.answers import Answers
    from usl.leaderboard.jobs import JobConfig, ScoringJob, score
    from usl.leaderboard.judgments import JudgmentCache
    from usl.store import Store
    from usl.store.benchmarks import load_benchmark, load_responses
    from usl.types import Criteria

    class Slow(LengthJudge):
        def judge(self, requests):
            time.sleep(0.2)   # 24 batches take ~5 s: room to kill mid-way even on a busy CPU
            return super().judge(requests)

    store = Store(sys.argv[1])
    data = Answers(load_benchmark(store, "big"), load_responses(store, "big"))
    job = ScoringJob(Criteria(("helpful",)), "base", tuple(m for m in data.benchmark.models if m != "base"),
                     tuple(q.id for q in data.benchmark.queries))
    score(data, Slow(), job, JudgmentCache(store), JobConfig(batch_size=10))
    print("done")
""")


def big(store):
    rng = np.random.default_rng(0)
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(40))
    models = ("base", "m1", "m2", "m3")
    resp = [Response(q.id, m, "w " * int(rng.integers(1, 20))) for q in queries for m in models]
    save_benchmark(store, Benchmark("big", queries, models, "base"), resp, source="test")


def test_killed_job_resumes_without_losing_or_duplicating(tmp_path):
    path = tmp_path / "kill.sqlite"
    st = Store(path)
    big(st)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE)
    cache = JudgmentCache(st)
    deadline = time.time() + 30
    while cache.count() < 40 and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = cache.count()
    assert 0 < partial < 240, partial                 # killed mid-way
    assert partial % 10 == 0                          # whole batches only
    out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "done", out.stderr
    assert cache.count() == 240                        # 3 models x 40 queries x 2 orders, no duplicates
    # identical numbers to an uninterrupted run in a fresh store
    fresh = Store(tmp_path / "fresh.sqlite")
    big(fresh)
    d1 = Answers(load_benchmark(st, "big"), load_responses(st, "big"))
    d2 = Answers(load_benchmark(fresh, "big"), load_responses(fresh, "big"))
    j = ScoringJob(CRIT, "base", ("m1", "m2", "m3"), tuple(q.id for q in d1.benchmark.queries))
    a = score(d1, Counting(LengthJudge()), j, JudgmentCache(st))
    b = score(d2, LengthJudge(), j, JudgmentCache(fresh))
    np.testing.assert_array_equal(a, b)


def test_answer_stats_persist_and_restore(store, tmp_path):
    data = tiny(store)
    path = tmp_path / "stats.npz"
    data.persist(path)
    again = Answers(load_benchmark(store, "tiny"), load_responses(store, "tiny"))
    assert again.restore(path)
    j = job(data)
    np.testing.assert_array_equal(again.grid("base", j.models, j.query_ids).content,
                                  data.grid("base", j.models, j.query_ids).content)
    np.testing.assert_array_equal(again.lengths(["long", "short"], list(j.query_ids)),
                                  data.lengths(["long", "short"], list(j.query_ids)))
    assert not again.restore(tmp_path / "absent.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert not again.restore(tmp_path / "bad.npz")
    (tmp_path / "cut.npz").write_bytes(path.read_bytes()[:200])        # truncated
    assert not again.restore(tmp_path / "cut.npz")


def test_shards_split_pairs_with_both_orders_together():
    from usl.leaderboard.jobs import _shard

    answered = np.ones((2, 3), bool)
    todo = sorted((i, j, o) for i in range(2) for j in range(3) for o in (0, 1))
    parts = [_shard(todo, (r, 2), answered) for r in range(2)]
    assert sorted(parts[0] + parts[1]) == todo and not set(parts[0]) & set(parts[1])
    assert all({(i, j, 0), (i, j, 1)} <= set(p) for p in parts for i, j, _ in p)   # a pair's orders stay together
    assert [len(p) for p in parts] == [6, 6]
    # what is cached already does not move the split: rank 1 keeps its pairs when rank 0's are stored
    assert _shard([t for t in todo if t not in parts[0]], (1, 2), answered) == parts[1]
    with pytest.raises(ValueError, match="0 <= rank < processes"):
        _shard(todo, (2, 2), answered)


DISTRIBUTED = """
import json, sys
import torch.distributed as dist
from usl.judges.heuristic import LengthJudge
from usl.leaderboard.answers import Answers
from usl.leaderboard.jobs import ScoringJob, score_distributed
from usl.leaderboard.judgments import JudgmentCache
from usl.store import Store
from usl.store.benchmarks import load_benchmark, load_responses
from usl.types import Criteria

dist.init_process_group("gloo")
store = Store(sys.argv[1])
data = Answers(load_benchmark(store, "tiny"), load_responses(store, "tiny"))
judged = []
class Recording(LengthJudge):
    def judge(self, requests):
        judged.extend(requests)
        return super().judge(requests)
job = ScoringJob(Criteria(("helpful",)), "base", ("long", "short"), tuple(q.id for q in data.benchmark.queries))
s = score_distributed(data, Recording(), job, JudgmentCache(store))
# a file per process: the two processes' lines on one stdout may interleave
with open(f"{sys.argv[1]}.rank{dist.get_rank()}.json", "w") as f:
    f.write(json.dumps({"rank": dist.get_rank(), "judged": len(judged), "scores": s.tolist()}).replace("NaN", "null"))
dist.destroy_process_group()
"""


def test_two_processes_score_one_board_into_one_store(store, tmp_path):
    """`torchrun --nproc_per_node 2` (one process a GPU; here two CPU processes over gloo): each
    judges half the pairs into the one SQLite store, no verdict twice, and both read back the whole
    matrix, the same as one process scores."""
    import json

    data = tiny(store)
    script = tmp_path / "score.py"
    script.write_text(DISTRIBUTED)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script), str(store.path)], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = [json.loads(Path(f"{store.path}.rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["judged"] for r in out] == [8, 6]             # 7 answered pairs, both orders, split by pair
    cache = JudgmentCache(store)
    assert cache.count() == 14                              # every verdict once
    alone = score(data, LengthJudge(), job(data), None)
    for r in out:
        np.testing.assert_array_equal(np.array(r["scores"], dtype=float), alone)
