"""Shared leaderboard jobs: one computation per spec, LRU of results, cancellation of abandoned work."""

from __future__ import annotations

import time

import httpx
import pytest

from server_fake import FakeService, serve_in_thread
from usl.leaderboard.types import Leaderboard, LeaderboardSpec
from usl.server.app import ServerConfig, create_app
from usl.server.jobs import JobCancelled, RankJobs, spec_key
from usl.types import Criteria


class SlowRank:
    """Reports progress 50 times, 20 ms apart; records how far each spec got."""

    def __init__(self):
        self.steps: dict[str, int] = {}
        self.calls = 0

    def __call__(self, spec, progress=None):
        self.calls += 1
        key = spec.criteria.likes[0]
        for i in range(50):
            self.steps[key] = i
            if progress:
                progress(i, 50)
            time.sleep(0.02)
        return Leaderboard(spec=spec.to_json(), rows=())


def spec(like: str) -> LeaderboardSpec:
    return LeaderboardSpec(criteria=Criteria((like,)), benchmark="tiny", judge="length")


def test_spec_key_ignores_criteria_order_spacing_and_topic_order():
    a = LeaderboardSpec(criteria=Criteria(("b  x", "a")), topics=("t2", "t1"))
    b = LeaderboardSpec(criteria=Criteria(("a", "b x")), topics=("t1", "t2"))
    assert spec_key(a) == spec_key(b)
    assert spec_key(a) != spec_key(LeaderboardSpec(criteria=Criteria(("a",), ("b x",))))


def test_same_spec_shares_one_job_and_result_is_kept():
    rank = SlowRank()
    jobs = RankJobs(rank, workers=2)
    j1, j2 = jobs.submit(spec("x")), jobs.submit(spec("x"))
    assert j1 is j2
    assert j1.future.result(timeout=10).spec["criteria"]["likes"] == ["x"]
    assert jobs.submit(spec("x")) is j1 and rank.calls == 1
    jobs.shutdown()


def test_abandoned_job_is_cancelled_and_a_held_one_is_not():
    rank = SlowRank()
    jobs = RankJobs(rank, workers=2)
    with jobs.hold(jobs.submit(spec("dropped"))) as dropped, jobs.hold(jobs.submit(spec("other"))) as other:
        time.sleep(0.15)
        with jobs.hold(other):      # a second holder comes and goes: the first still holds it
            pass
        assert jobs.stats()["cancelled"] == 0
    # every holder left: both jobs are abandoned...
    with pytest.raises(JobCancelled, match="nobody is waiting"):
        dropped.future.result(timeout=10)
    assert rank.steps["dropped"] < 30 and jobs.stats()["cancelled"] == 2
    # ...and asking again starts afresh rather than handing back the cancelled job
    again = jobs.submit(spec("dropped"))
    assert again is not dropped and len(again.future.result(timeout=10).rows) == 0
    jobs.shutdown()


def test_keep_jobs_survive_their_holders():
    rank = SlowRank()
    jobs = RankJobs(rank, workers=1)
    with jobs.hold(jobs.submit(spec("default"), keep=True)) as job:
        pass
    assert job.future.result(timeout=10) is not None and rank.steps["default"] == 49
    assert jobs.stats()["cancelled"] == 0
    jobs.shutdown()


def test_a_closed_stream_cancels_its_job():
    svc = FakeService(delay_s=1.5, steps=60)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))
    with serve_in_thread(app) as url:
        httpx.get(url + "/api/leaderboard", timeout=30)          # the default board, done and kept
        with httpx.stream("GET", url + "/api/leaderboard/stream", params={"likes": "Abandon me"}, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("event: progress"):
                    break
        deadline = time.monotonic() + 5
        while app.state.jobs.stats()["cancelled"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.state.jobs.stats()["cancelled"] == 1
        # the page asks again with the same criteria: a fresh job runs to the end
        body = httpx.get(url + "/api/leaderboard", params={"likes": "Abandon me"}, timeout=30).json()
        assert body["leaderboard"]["rows"][0]["model"] == "foxtrot-pro"
