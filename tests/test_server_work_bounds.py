"""Work a request can start is bounded and owned by it: reward batches are bounded in pairs, judged
a slice at a time on their fair queue and stopped when their client leaves; a board that would
make the quality reader read more than a bound of new pairs is refused with the command that reads
them. A real uvicorn server over the fake engine (server_fake) with a judge whose cost is known."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from server_fake import FakeService, serve_in_thread
from usl.judges.base import Verdict
from usl.server.app import ServerConfig, create_app
from usl.server.reward import REWARD_LIMITS

SLICE_S = 0.2        # what the judge takes for one slice of a reward batch


class SlowJudge:
    """Prefers the longer response; each ``judge`` call (one slice) takes SLICE_S. Its quality
    reader has read every pair of the benchmark's own baseline and none of another's."""

    name, version, identity, can_tie = "slow", "1", "slow@1", False

    def __init__(self):
        self.calls, self.pairs, self.counted, self.lock = 0, 0, 0, threading.Lock()

    def judge(self, requests):
        time.sleep(SLICE_S)
        with self.lock:
            self.calls += 1
            self.pairs += len(requests) // 2
        return [Verdict(1.0 if len(r.response_a) > len(r.response_b) else 0.0) for r in requests]

    def missing_readings(self, queries, model_answers, baseline_answers) -> int:
        self.counted += 1
        return sum(b.startswith("other") for b in baseline_answers)


class Service(FakeService):
    """FakeService with a judge and the pairs of each board: 40 queries x 6 models."""

    def __init__(self):
        super().__init__()
        self.slow = SlowJudge()

    def judge(self, spec: str):
        return self.slow

    def pair_texts(self, spec):
        if spec.baseline not in (None, "gpt4-baseline", "other"):
            raise ValueError(f"unknown baseline {spec.baseline!r}")
        base = "other answer" if spec.baseline == "other" else "baseline answer"
        n = 40 * 6
        return [f"q{i % 40}" for i in range(n)], [f"answer {i}" for i in range(n)], [base] * n


@pytest.fixture(scope="module")
def served():
    svc = Service()
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("slow",), warm=False))) as url:
        yield svc, url


def batch(prompts: int, responses: int) -> dict:
    return {"items": [{"prompt": f"p{i}", "responses": [f"r{j} " * (j + 1) for j in range(responses)]}
                      for i in range(prompts)]}


def test_a_batch_over_the_pair_bound_is_refused_before_any_judging(served):
    svc, url = served
    before = svc.slow.calls
    r = httpx.post(url + "/api/reward", json=batch(8, 16), timeout=30)        # 8 x 120 pairs: the body
    assert r.status_code == 422
    assert r.json()["detail"] == "items: 960 pairs to judge, more than 256 a request; split the batch"
    prompts = [f"p{i} " for i in range(8) for _ in range(16)]
    r = httpx.post(url + "/get_reward", json={"query": [p + "r" * j for j, p in enumerate(prompts)],
                                              "prompts": prompts}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"].startswith("items: 960 pairs to judge")
    assert svc.slow.calls == before
    assert REWARD_LIMITS.max_pairs == 256


def test_a_batch_is_judged_a_slice_at_a_time_with_the_same_rewards(served):
    svc, url = served
    before_calls, before_pairs = svc.slow.calls, svc.slow.pairs
    r = httpx.post(url + "/api/reward", json=batch(2, 6), timeout=30)         # 2 x 15 pairs: 4 slices of 8
    assert r.status_code == 200
    assert (svc.slow.calls - before_calls, svc.slow.pairs - before_pairs) == (4, 30)
    rewards = r.json()["rewards"]
    assert all(row == sorted(row) for row in rewards)                        # longer responses win


def test_a_reward_request_whose_client_leaves_stops_after_the_slice_running(served):
    svc, url = served
    before = svc.slow.calls
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/api/reward", json=batch(2, 16), timeout=0.5)       # 240 pairs: 30 slices, 6 s
    time.sleep(3 * SLICE_S)
    stopped = svc.slow.calls
    time.sleep(5 * SLICE_S)
    assert svc.slow.calls == stopped                                         # nothing more is judged
    assert stopped - before <= 0.5 / SLICE_S + 2                             # the slices it had time for


def test_a_board_while_reward_batches_run_answers_at_once(served):
    _, url = served
    flood = [threading.Thread(target=lambda: httpx.post(url + "/api/reward", json=batch(1, 16), timeout=30))
             for _ in range(3)]
    for t in flood:
        t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    r = httpx.post(url + "/api/leaderboard", json={"per_criterion": False}, timeout=30)
    assert r.status_code == 200 and time.monotonic() - t0 < 2.0
    for t in flood:
        t.join()


def test_a_board_needing_more_new_quality_readings_than_the_bound_is_refused_with_the_command(served):
    svc, url = served
    calls = len(svc.rank_calls)
    r = httpx.get(url + "/api/leaderboard", params={"baseline": "other"}, timeout=30)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "no quality reading of 240 pairs of this board" in detail and "more than the 64 a request" in detail
    assert "`usl quality fill --benchmark tiny --baseline other --judge slow`" in detail
    assert len(svc.rank_calls) == calls                                      # nothing was started
    counted = svc.slow.counted
    r = httpx.get(url + "/api/leaderboard/stream", params={"baseline": "other"}, timeout=30)
    assert r.status_code == 422 and "usl quality fill" in r.json()["detail"]
    assert svc.slow.counted == counted               # a refusal is remembered a while, not counted again
    assert httpx.get(url + "/api/leaderboard", params={"per_criterion": "false"}, timeout=30).status_code == 200
