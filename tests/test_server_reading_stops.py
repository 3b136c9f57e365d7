"""A board whose quality readings are not stored yet reads them inside the request (at most
``max_new_readings`` pairs), and the reading stops when its client leaves: the default judge calls
the job's progress between batches of readings, which is where an abandoned job is stopped.

Real parts: ``usl serve`` as a subprocess, the real store, engine and default judge. Its quality
reader is an LLM (``default:quality=llm:...``) behind a fake chat-completions server, the edge of
the world, which counts what it is sent: 2 requests a pair, 16 pairs a batch."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from server_real import make_tiny, usl_serve
from test_llm_judge import FakeAPI

PAIRS = 48            # make_tiny: 16 queries x 3 models against the baseline
BATCH = 16            # pairs an LLM reader reads between two progress calls (usl.quality.reader.QualityReading)


@pytest.fixture
def served(tmp_path):
    make_tiny(tmp_path)
    api = FakeAPI(delay=0.25)     # 8 requests in flight: a batch of 16 pairs takes about a second
    judge = f"default:quality=llm:fake,base_url={api.url},api_key_env=,max_retries=0"
    try:
        with usl_serve(tmp_path, "--benchmark", "tiny", "--judge", "length", "--judge", judge,
                       "--refine-with", "none", "--no-import", timeout_s=120) as url:
            yield url, judge, api
    finally:
        api.close()


def abandon(url: str, path: str, started) -> None:
    """Send a GET on a raw socket and close it once ``started()`` is true (the client leaves)."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port)) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        deadline = time.monotonic() + 120
        while not started():
            assert time.monotonic() < deadline, "the reading never started"
            time.sleep(0.05)


def settled(api: FakeAPI, quiet_s: float = 3.0) -> int:
    """The request count once it has not moved for ``quiet_s``."""
    last, since = api.calls, time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.1)
        if api.calls != last:
            last, since = api.calls, time.monotonic()
    return last


def test_leaving_stops_the_quality_reading_and_keeps_what_was_read(served):
    url, judge, api = served
    path = "/api/leaderboard?" + urlencode({"judge": judge, "benchmark": "tiny", "per_criterion": "false"})
    abandon(url, path, started=lambda: api.calls > 0)
    read = settled(api)
    # the batch in flight ends, and the next progress call stops the job: at most two batches were sent
    assert 0 < read <= 2 * (2 * BATCH) < 2 * PAIRS, read

    r = httpx.get(url + path, timeout=120)        # asked again and waited for: the rest is read
    assert r.status_code == 200, r.text
    assert [row["model"] for row in r.json()["leaderboard"]["rows"]]
    assert api.calls == 2 * PAIRS                 # no pair read twice: what the stopped job read was kept
