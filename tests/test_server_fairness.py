"""Work tied to its requester, against a real uvicorn server (fake engine, see server_fake): a
request whose client leaves is cancelled, the job queue is bounded (503 with Retry-After), and
clients take turns, so one client's burst or its refinements do not delay another's."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from server_fake import FakeService, serve_in_thread
from usl.server.app import ServerConfig, create_app


def client(address: str, timeout: float = 30) -> httpx.Client:
    """A client from its own loopback address (the server tells clients apart by address)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=timeout)


def wait_for(condition, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def ready(url: str) -> None:
    """The default board (warmed at start-up) is done, so requests below wait for their own job only."""
    assert httpx.post(url + "/api/leaderboard", json={}, timeout=30).status_code == 200


def test_a_request_whose_client_leaves_is_cancelled():
    svc = FakeService(delay_s=4.0, steps=40)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",)))
    with serve_in_thread(app) as url:
        ready(url)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/api/leaderboard", json={"likes": ["abandoned"]}, timeout=0.3)
        assert wait_for(lambda: app.state.jobs.cancelled == 1, 3)
        time.sleep(0.3)
        started = [s for s in svc.rank_calls if s.criteria.likes == ("abandoned",)]
        assert started and not [s for s in svc.rank_finished if s.criteria.likes == ("abandoned",)]
        assert app.state.jobs.stats()["running"] == 0


def test_abandoned_requests_do_not_delay_the_next_one():
    svc = FakeService(delay_s=1.0, steps=20)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), workers=1, max_waiting=12,
                                       max_waiting_per_client=12))
    with serve_in_thread(app) as url:
        ready(url)

        def abandon(i):
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(url + "/api/leaderboard", json={"likes": [f"large {i}"]}, timeout=0.3)

        threads = [threading.Thread(target=abandon, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t0 = time.perf_counter()
        r = httpx.post(url + "/api/leaderboard", json={"likes": ["small"]}, timeout=30)
        took = time.perf_counter() - t0
    assert r.status_code == 200
    assert took < 2.0, took          # its own 1 s job, not ten abandoned ones before it
    assert not [s for s in svc.rank_finished if s.criteria.likes[0].startswith("large")]   # none ran out


def test_a_full_queue_answers_503_with_retry_after():
    svc = FakeService(delay_s=0.5)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), workers=1, max_waiting=2,
                                       max_waiting_per_client=2))
    with serve_in_thread(app) as url:
        ready(url)
        answers: list[httpx.Response] = []

        def ask(i):
            answers.append(httpx.post(url + "/api/leaderboard", json={"likes": [f"set {i}"]}, timeout=30))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    codes = sorted(r.status_code for r in answers)
    assert codes.count(503) >= 2 and codes.count(200) >= 2 and set(codes) == {200, 503}, codes
    for r in answers:
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) >= 1 and "waiting" in r.json()["detail"]
        else:
            assert r.json()["leaderboard"]["rows"]


def test_one_clients_burst_does_not_delay_another():
    """Client A queues a burst of boards; client B's one board is next in line, not last."""
    svc = FakeService(delay_s=0.5)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), workers=1, max_waiting=4,
                                       max_waiting_per_client=4))
    with serve_in_thread(app) as url:
        ready(url)
        codes: list[int] = []

        def burst(i):
            with client("127.0.0.2") as c:
                codes.append(c.post(url + "/api/leaderboard", json={"likes": [f"burst {i}"]}).status_code)

        threads = [threading.Thread(target=burst, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        assert wait_for(lambda: app.state.queue.stats().waiting == 4, 5)
        with client("127.0.0.3") as c:
            t0 = time.perf_counter()
            r = c.post(url + "/api/leaderboard", json={"likes": ["mine"]})
            took = time.perf_counter() - t0
        for t in threads:
            t.join()
    assert r.status_code == 200
    # at most A's running board and B's own (0.5 s each); in arrival order it would wait for 4 more
    assert took < 1.5, took
    assert codes.count(503) == 1 and codes.count(200) == 4     # B took the place of A's newest


def test_refinement_streams_are_limited_per_client_and_shared_fairly():
    svc = FakeService(refine_delay_s=0.5)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), refine_streams_per_client=2))
    with serve_in_thread(app) as url:
        ready(url)
        opened = threading.Event()
        stop = threading.Event()

        def hog(i):
            with client("127.0.0.2") as c, c.stream("GET", url + "/api/leaderboard/refine",
                                                    params={"likes": f"hog {i}"}) as r:
                for line in r.iter_lines():
                    if line.startswith("event: refined"):
                        opened.set()
                    if stop.is_set():
                        return

        hogs = [threading.Thread(target=hog, args=(i,)) for i in range(2)]
        for t in hogs:
            t.start()
        assert opened.wait(10)
        with client("127.0.0.2") as c:
            third = c.get(url + "/api/leaderboard/refine", params={"likes": "hog 3"})
        assert third.status_code == 429 and "close one first" in third.json()["detail"]
        with client("127.0.0.3") as c:
            t0 = time.perf_counter()
            with c.stream("GET", url + "/api/leaderboard/refine", params={"likes": "other"}) as r:
                firsts = []
                for line in r.iter_lines():
                    if line.startswith("event: refined"):
                        firsts.append(time.perf_counter() - t0)
                    if len(firsts) == 2:
                        break
        stop.set()
        for t in hogs:
            t.join(timeout=20)
    assert firsts[0] < 0.5, firsts          # the cached estimate waits for no turn
    # its first judging step waits for at most the step running and one of A's: turns go client by client
    assert firsts[1] < 1.8, firsts


def test_a_client_leaving_a_shared_board_does_not_fail_the_others():
    """Two clients wait for the same board (queued behind another); one leaves. The other still
    gets it (cancelling the leaver's wait cancelled the shared job: a 500 for everyone else)."""
    svc = FakeService(delay_s=0.8)
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), workers=1))
    with serve_in_thread(app) as url:
        ready(url)
        first = threading.Thread(target=lambda: httpx.post(url + "/api/leaderboard", json={"likes": ["first"]},
                                                           timeout=30))
        first.start()
        assert wait_for(lambda: app.state.queue.stats().running == 1, 5)
        answers: list[int] = []

        def stays():
            with client("127.0.0.3") as c:
                answers.append(c.post(url + "/api/leaderboard", json={"likes": ["shared"]}).status_code)

        stayer = threading.Thread(target=stays)
        stayer.start()
        with client("127.0.0.2", timeout=0.3) as c, pytest.raises(httpx.ReadTimeout):
            c.post(url + "/api/leaderboard", json={"likes": ["shared"]})
        stayer.join()
        first.join()
    assert answers == [200]
