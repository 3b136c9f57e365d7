"""`usl serve` as a subprocess (real engine, tiny benchmark, `length` judge): bounds on bodies,
headers and read time, Host/Origin checks, the token, and SIGTERM with a refinement open."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from server_real import free_port, make_tiny, serve_output, server_pid, sigterm_and_wait, usl_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    make_tiny(home)
    with usl_serve(home, "--benchmark", "tiny", "--judge", "length", "--refine-with", "random:3") as url:
        yield home, url


def connect(url: str) -> socket.socket:
    port = int(url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_100_mb_body_is_refused_unread(served):
    _, url = served
    proc = psutil.Process(server_pid(url))
    before = proc.memory_info().rss
    with connect(url) as s:
        s.sendall(b"POST /api/leaderboard HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000000\r\n\r\n")
        sent = 0
        try:
            while sent < 100_000_000:
                s.sendall(b"x" * 1_000_000)
                sent += 1_000_000
        except OSError:
            pass                                # the server answered and closed: the rest is never read
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413") and b"too large" in answer
    assert sent < 100_000_000
    assert proc.memory_info().rss - before < 50 * 2**20


def test_a_chunked_body_over_the_limit_is_refused(served):
    _, url = served
    r = httpx.post(url + "/api/leaderboard", content=iter([b"{" + b" " * 50_000] * 3), timeout=30)
    assert r.status_code == 413 and "at most 65536 bytes" in r.json()["detail"]
    assert httpx.get(url + "/api/health").status_code == 200


def test_long_fields_are_refused_and_quoted_short(served):
    _, url = served
    for field in ("judge", "baseline", "benchmark"):
        r = httpx.post(url + "/api/leaderboard", json={field: "j" * 50_000}, timeout=30)
        assert r.status_code == 422 and field in r.json()["detail"], field
        assert len(r.content) < 2000, (field, len(r.content))
    r = httpx.post(url + "/api/leaderboard", json={"topics": ["t" * 50_000]}, timeout=30)
    assert r.status_code == 422 and len(r.content) < 2000
    r = httpx.post(url + "/api/leaderboard", json={"judge": "j" * 150}, timeout=30)
    assert r.status_code == 422 and "(150 characters)" in r.json()["detail"] and "j" * 100 not in r.json()["detail"]


def test_topics_are_found_in_any_case(served):
    _, url = served
    r = httpx.post(url + "/api/leaderboard", json={"topics": ["CODING"], "per_criterion": False}, timeout=30)
    assert r.status_code == 200 and r.json()["leaderboard"]["spec"]["n_queries"] == 8


def test_a_huge_header_is_refused(served):
    _, url = served
    r = httpx.get(url + "/api/health", headers={"X-Big": "b" * 40_000})
    assert r.status_code in (400, 431)
    assert httpx.get(url + "/api/health").status_code == 200


def test_half_sent_requests_are_closed_within_the_read_timeout(served):
    _, url = served
    socks = [connect(url) for _ in range(30)]
    for i, s in enumerate(socks):
        if i % 3 == 0:
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")       # headers cut short
        elif i % 3 == 1:
            s.sendall(b"POST /api/leaderboard HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        # else: connected, nothing sent
    t0 = time.monotonic()
    closed = 0
    for s in socks:
        s.settimeout(max(0.1, 14 - (time.monotonic() - t0)))
        try:
            while s.recv(4096):
                pass
            closed += 1
        except (TimeoutError, socket.timeout):
            pass
        except ConnectionResetError:
            closed += 1
        s.close()
    assert closed == 30 and time.monotonic() - t0 < 14
    assert httpx.get(url + "/api/health").status_code == 200


@pytest.mark.parametrize("headers,status", [
    ({"Host": "evil.example"}, 421),                                  # DNS rebinding names its own host
    ({"Host": "evil.example:8000"}, 421),
    ({"Origin": "http://evil.example"}, 403),
    ({"Origin": "null"}, 403),
    ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, 403),
    ({"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}, 403),  # another port of this host
    ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, 403),    # a link to an API
])
def test_foreign_hosts_and_pages_cannot_start_work(served, headers, status):
    _, url = served
    r = httpx.get(url + "/api/leaderboard/refine", params={"likes": "foreign"}, headers=headers, timeout=30)
    assert r.status_code == status, r.text
    assert "event:" not in r.text


def test_the_page_itself_and_shared_links_still_work(served):
    _, url = served
    port = url.rsplit(":", 1)[1]
    assert httpx.get(url + "/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}).status_code == 200
    same = {"Origin": url, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
    assert httpx.post(url + "/api/leaderboard", json={}, headers=same, timeout=30).status_code == 200
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert httpx.get(url + "/api/health", headers={"Host": host}).status_code == 200


def test_allowed_hosts_origins_and_the_token(tmp_path):
    make_tiny(tmp_path)
    with usl_serve(tmp_path, "--benchmark", "tiny", "--judge", "length", "--refine-with", "none",
                   "--allow-host", "board.example", "--allow-origin", "https://portal.example",
                   env={"USL_TOKEN": "s3cret"}) as url:
        assert httpx.get(url + "/api/health").status_code == 200                   # no token needed
        assert httpx.get(url + "/api/benchmarks").status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert httpx.get(url + "/api/benchmarks", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url + "/api/benchmarks", headers=bearer).status_code == 200
        assert httpx.get(url + "/api/benchmarks", headers={**bearer, "Host": "board.example"}).status_code == 200
        assert httpx.get(url + "/api/benchmarks", headers={**bearer, "Host": "other.example"}).status_code == 421
        portal = {**bearer, "Origin": "https://portal.example", "Sec-Fetch-Site": "cross-site"}
        assert httpx.get(url + "/api/benchmarks", headers=portal).status_code == 200
        with httpx.Client() as c:                  # the page opened with its token keeps it in a cookie
            page = c.get(url + "/?token=s3cret")
            assert page.status_code == 200 and "HttpOnly" in page.headers["set-cookie"]
            assert c.get(url + "/api/benchmarks").json() == ["tiny"]


def test_serve_warns_when_it_listens_beyond_loopback(tmp_path):
    make_tiny(tmp_path)
    port = free_port()
    cmd = [sys.executable, "-c", "from usl.cli import main; main()", "--home", str(tmp_path), "serve", "--host",
           "0.0.0.0", "--port", str(port), "--benchmark", "tiny", "--judge", "length", "--refine-with", "none"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = ""
        deadline = time.monotonic() + 60
        while "WARNING" not in out and time.monotonic() < deadline and proc.poll() is None:
            out += proc.stdout.readline()
        out += "".join(proc.stdout.readline() for _ in range(3))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert f"at http://0.0.0.0:{port}/" in out and "localhost" not in out
    assert "WARNING: listening on 0.0.0.0" in out and "--token" in out


def test_sigterm_with_refinement_and_reward_work_running_exits_0_within_10_s(tmp_path):
    """The shipped transformer CRM refines (seconds a question) and scores a reward batch on the
    reward queue's thread: SIGTERM mid-step ends the process with status 0 within 10 s (a process
    finalized under a thread inside torch aborted: status 134, "terminate called without an active
    exception"), and the store is intact and serves again."""
    import threading

    make_tiny(tmp_path)
    batch = {"judge": "crm", "items": [{"prompt": "Explain recursion.", "responses": [
        f"Answer {i}: " + "a function that calls itself " * (i + 1) for i in range(16)]}]}
    with usl_serve(tmp_path, "--benchmark", "tiny", "--judge", "length", "--judge", "crm", timeout_s=180) as url:
        pid = server_pid(url)
        rewarding = threading.Thread(target=lambda: _ignore_errors(httpx.post, url + "/api/reward", json=batch,
                                                                   timeout=120), daemon=True)
        with httpx.Client(timeout=120) as c, c.stream("GET", url + "/api/leaderboard/refine",
                                                      params={"likes": "Clear explanations"}) as r:
            lines = r.iter_lines()
            assert any(line.startswith("event: refined") for line in lines)     # the stream is open, judging
            rewarding.start()
            time.sleep(3.0)
            status, took = sigterm_and_wait(pid)
    assert took < 10 and status == 0
    db = sqlite3.connect(tmp_path / "usl.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    log = serve_output(tmp_path)
    assert "terminate called" not in log and "Traceback" not in log
    with usl_serve(tmp_path, "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        assert httpx.post(url + "/api/leaderboard", json={}, timeout=60).status_code == 200
    assert "Traceback" not in serve_output(tmp_path)


def _ignore_errors(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except httpx.HTTPError:
        pass                        # the server went away mid-request: what this test does


def test_a_failing_llm_judge_is_a_json_502_without_secrets(tmp_path):
    from test_llm_judge import FakeAPI

    api = FakeAPI(fail_first=10**6, status=401, echo=True)
    try:
        make_tiny(tmp_path)
        base = api.url.replace("http://", "http://alice:pa55word@")
        judge = f"llm:m,base_url={base},api_key_env=FAKE_KEY,max_retries=0"
        with usl_serve(tmp_path, "--benchmark", "tiny", "--judge", judge, "--refine-with", "none",
                       env={"FAKE_KEY": "sk-live-0123456789abcdef"}) as url:
            config = httpx.get(url + "/api/config").text
            r = httpx.post(url + "/api/leaderboard", json={"likes": ["Short answers"], "per_criterion": False},
                           timeout=60)
            stream = httpx.get(url + "/api/leaderboard/stream", params={"likes": "Long answers"}, timeout=60).text
        log = serve_output(tmp_path)
    finally:
        api.close()
    assert r.status_code == 502 and r.headers["content-type"] == "application/json"
    assert r.json()["upstream_status"] == 401 and "HTTP 401" in r.json()["detail"]
    assert "event: error" in stream and "HTTP 401" in stream
    assert f"base_url={api.url}" in config
    for text in (config, r.text, stream, log):
        for secret in ("sk-live-0123456789abcdef", "pa55word", "alice"):
            assert secret not in text, secret
    assert "Traceback" not in log
