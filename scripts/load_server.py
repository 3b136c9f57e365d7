"""Bounded load against a running `usl serve` on loopback; prints the hardening figures.

    usl --home H serve --port 8738 &                       # wait until it answers /api/health
    python scripts/load_server.py --url http://127.0.0.1:8738 all

Scenarios (each a fixed number of requests or a fixed duration; loopback addresses only, so one
machine plays several clients: the server tells clients apart by address, and Linux answers on all
of 127.0.0.0/8):

- ``flood``: 20 clients send uncached boards (new criteria each time) continuously for 30 s, from
  one address (one client's burst, ``--flood-from one``) or from 20 (``many``); a separate client
  (127.0.0.2) asks for an uncached board every second. Prints its p50/p95 and every status seen.
  A 503 is the server's deliberate "busy, Retry-After"; the flooding clients wait that long.
- ``abandon``: 60 large boards (10 likes, 10 avoid, per-criterion breakdown) from 60 addresses,
  each given up after 0.5 s, then one small board: its latency.
- ``body``: a 100 MB body (the server's memory before and after), then 500 half-sent requests:
  how long until the server has closed them all.
- ``refine``: 8 refinement streams from one client, then another client's first refined event.
- ``reward``: a reward batch over the pair bound (8 prompts x 16 responses: its status), then 7 large
  reward batches (2 x 16 responses, 240 pairs) from 7 addresses, each given up after 0.5 s, while
  another client asks for a board every second: its latencies, and the server's CPU seconds in the
  30 s after the last client left.
- ``readings``: a board with another model as the baseline (thousands of pairs without a quality
  reading on the default benchmark): its status and time, and the server's CPU seconds in the 10 s after.
- ``votes``: 6 batches of 50 votes from one address without an Origin header: the statuses (at most
  100 a minute are stored; beyond, 429).
- ``memory`` (not part of ``all``; about 15 minutes): every kind of request a client can send (boards with
  new criteria and each option, the event streams, compare, reference, examples, exports, the reward
  routes with the largest bodies under 64 KiB, the judge check's pairs, votes and calibration), each new
  to the server's caches, twice: waited for, and given up after ``--leave-after`` seconds. One JSON line
  each: the server's peak RSS growth (VmRSS sampled every 50 ms and VmHWM, reset before each request),
  what it kept, its CPU seconds while the client waited and after it left (until it idles, at most
  ``--settle`` s). ``--probe``: another client asks a new board a second meanwhile (its slowest answer;
  its CPU then counts in the server's). Run it once the log says ``warm-up done``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx
import psutil


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: str, seconds: float) -> None:
        with self.lock:
            self.statuses[status] += 1
            if status == "200":
                self.latencies.append(seconds)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def client(address: str, timeout: float) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=timeout)


def ask(c: httpx.Client, url: str, body: dict) -> tuple[str, float, float]:
    """(status, seconds, retry_after) of one POST /api/leaderboard; a failure's status is its exception."""
    t0 = time.perf_counter()
    try:
        r = c.post(url + "/api/leaderboard", json=body)
    except httpx.HTTPError as e:
        return type(e).__name__, time.perf_counter() - t0, 0.0
    return str(r.status_code), time.perf_counter() - t0, float(r.headers.get("Retry-After", 0))


def flood(url: str, clients: int, seconds: float, many: bool) -> dict:
    stop = time.monotonic() + seconds
    flooding, probe = Tally(), Tally()

    def flooder(i: int) -> None:
        with client(f"127.0.0.{10 + i}" if many else "127.0.0.1", 60) as c:
            n = 0
            while time.monotonic() < stop:
                n += 1
                status, took, retry = ask(c, url, {"likes": [f"flood {i} set {n}"], "per_criterion": False})
                flooding.add(status, took)
                if status == "503":
                    time.sleep(min(retry, max(0.0, stop - time.monotonic())))

    def prober() -> None:
        with client("127.0.0.2", 60) as c:
            n = 0
            time.sleep(2.0)             # the flood is under way
            while time.monotonic() < stop:
                n += 1
                status, took, _ = ask(c, url, {"likes": [f"probe set {n}"], "per_criterion": False})
                probe.add(status, took)
                time.sleep(max(0.0, 1.0 - took))

    threads = [threading.Thread(target=flooder, args=(i,)) for i in range(clients)] + [threading.Thread(target=prober)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"scenario": f"flood ({clients} clients from {'20 addresses' if many else 'one address'}, {seconds:.0f} s)",
            "probe_p50_s": round(statistics.median(probe.latencies), 3) if probe.latencies else None,
            "probe_p95_s": round(percentile(probe.latencies, 0.95), 3), "probe_statuses": dict(probe.statuses),
            "flood_statuses": dict(flooding.statuses),
            "flood_p50_s": round(statistics.median(flooding.latencies), 3) if flooding.latencies else None,
            "failures": sum(n for s, n in (flooding.statuses + probe.statuses).items() if s not in ("200", "503"))}


def abandon(url: str, n: int = 60) -> dict:
    large = {"likes": [f"large criterion {k}" for k in range(10)], "avoid": [f"avoided {k}" for k in range(10)]}
    outcomes = Counter()

    def give_up(i: int) -> None:
        with client(f"127.0.1.{1 + i}", 0.5) as c:
            status, _, _ = ask(c, url, {**large, "likes": [f"{x} #{i}" for x in large["likes"]]})
            outcomes[status] += 1

    threads = [threading.Thread(target=give_up, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with client("127.0.0.3", 60) as c:
        status, took, _ = ask(c, url, {"likes": [f"one small criterion {time.time_ns()}"], "per_criterion": False})
        time.sleep(5.0)
        _, alone, _ = ask(c, url, {"likes": [f"another small criterion {time.time_ns()}"], "per_criterion": False})
    return {"scenario": f"{n} abandoned large POSTs, then one small one", "abandoned": dict(outcomes),
            "small_status": status, "small_s": round(took, 3), "small_alone_5s_later_s": round(alone, 3)}


def server_process(url: str) -> psutil.Process:
    port = urlparse(url).port
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            return psutil.Process(conn.pid)
    raise SystemExit(f"no process listens on port {port}")


def body(url: str, half_open: int = 500) -> dict:
    host, port = urlparse(url).hostname, urlparse(url).port
    proc = server_process(url)
    before = proc.memory_info().rss
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /api/leaderboard HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000000\r\n\r\n")
        sent = 0
        try:
            while sent < 100_000_000:
                s.sendall(b"x" * 1_000_000)
                sent += 1_000_000
        except OSError:
            pass
        answer = s.recv(200).split(b"\r\n", 1)[0].decode()
    time.sleep(0.5)
    grew = proc.memory_info().rss - before

    socks = []
    for i in range(half_open):
        s = socket.create_connection((host, port), timeout=30)
        s.sendall([b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
                   b"POST /api/leaderboard HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{", b""][i % 3])
        socks.append(s)
    t0 = time.monotonic()
    last, still_open = 0.0, 0
    for s in socks:
        s.settimeout(max(0.1, 30 - (time.monotonic() - t0)))
        try:
            while s.recv(4096):
                pass
            last = time.monotonic() - t0
        except ConnectionResetError:
            last = time.monotonic() - t0
        except (TimeoutError, socket.timeout):
            still_open += 1
        s.close()
    return {"scenario": "100 MB body; 500 half-sent requests", "answer": answer,
            "body_bytes_sent_before_refusal": sent, "server_rss_growth_mb": round(grew / 2**20, 1),
            "half_open_closed_after_s": round(last, 1), "half_open_still_open_after_30s": still_open}


def refine(url: str, streams: int = 8) -> dict:
    statuses, refined = Counter(), Counter()
    stop = threading.Event()

    def hog(i: int) -> None:
        with client("127.0.0.4", 600) as c, c.stream("GET", url + "/api/leaderboard/refine",
                                                     params={"likes": f"refine hog {i}"}) as r:
            statuses[str(r.status_code)] += 1
            for line in r.iter_lines() if r.status_code == 200 else ():
                if line.startswith("event: refined"):
                    refined[i] += 1
                if stop.is_set():
                    return

    threads = [threading.Thread(target=hog, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (statuses and len(refined) >= statuses["200"] and
                                               sum(statuses.values()) == streams):
        time.sleep(0.1)
    time.sleep(2.0)          # the hogs' judging steps are queued and running
    with client("127.0.0.5", 120) as c:
        t0 = time.perf_counter()
        with c.stream("GET", url + "/api/leaderboard/refine", params={"likes": "another user's refine"}) as r:
            first = None
            for line in r.iter_lines():
                if line.startswith("event: refined"):
                    first = time.perf_counter() - t0
                    break
    stop.set()
    for t in threads:
        t.join(timeout=120)
    return {"scenario": f"{streams} refine streams from one client, then another client's",
            "hog_statuses": dict(statuses), "other_first_refined_s": None if first is None else round(first, 3)}


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)


def reward_batch(prompts: int, responses: int, tag: str) -> dict:
    return {"items": [{"prompt": f"Question {tag} {i}: explain recursion.",
                       "responses": [f"Answer {j}: " + "a function that calls itself. " * (j + 1)
                                     for j in range(responses)]} for i in range(prompts)]}


def reward(url: str, n: int = 7) -> dict:
    proc = server_process(url)
    with client("127.0.0.6", 60) as c:
        over = c.post(url + "/api/reward", json=reward_batch(8, 16, "over")).status_code
    outcomes, probe, stop = Counter(), Tally(), threading.Event()

    def give_up(i: int) -> None:
        with client(f"127.0.2.{1 + i}", 0.5) as c:
            try:
                outcomes[str(c.post(url + "/api/reward", json=reward_batch(2, 16, f"{i} {time.time_ns()}")).status_code)] += 1
            except httpx.HTTPError as e:
                outcomes[type(e).__name__] += 1

    def prober() -> None:
        with client("127.0.0.7", 60) as c:
            n = 0
            while not stop.is_set():
                n += 1
                status, took, _ = ask(c, url, {"likes": [f"reward probe {n} {time.time_ns()}"], "per_criterion": False})
                probe.add(status, took)
                time.sleep(max(0.0, 1.0 - took))

    watcher = threading.Thread(target=prober)
    watcher.start()
    threads = [threading.Thread(target=give_up, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu0, rss0 = cpu_seconds(proc), proc.memory_info().rss
    time.sleep(30.0)
    cpu_after, rss_after = cpu_seconds(proc) - cpu0, proc.memory_info().rss
    stop.set()
    watcher.join()
    return {"scenario": f"a reward batch over the bound, then {n} abandoned large reward batches",
            "over_bound_status": over, "abandoned": dict(outcomes),
            "server_cpu_s_30s_after_they_left": round(cpu_after, 1),
            "server_rss_mb": round(rss_after / 2**20), "server_rss_growth_mb": round((rss_after - rss0) / 2**20, 1),
            "board_p50_s": round(statistics.median(probe.latencies), 3) if probe.latencies else None,
            "board_max_s": round(max(probe.latencies), 3) if probe.latencies else None,
            "board_statuses": dict(probe.statuses)}


def readings(url: str) -> dict:
    proc = server_process(url)
    with client("127.0.0.8", 120) as c:
        rows = c.post(url + "/api/leaderboard", json={"per_criterion": False}).json()["leaderboard"]["rows"]
        other = rows[-1]["model"]
        t0 = time.perf_counter()
        r = c.get(url + "/api/leaderboard", params={"baseline": other, "per_criterion": "false"})
        took = time.perf_counter() - t0
    cpu0 = cpu_seconds(proc)
    time.sleep(10.0)
    return {"scenario": f"a board with {other} as the baseline", "status": r.status_code, "s": round(took, 3),
            "detail": r.json().get("detail", "")[:200] if r.status_code != 200 else "",
            "server_cpu_s_10s_after": round(cpu_seconds(proc) - cpu0, 1)}


def votes(url: str, batches: int = 6) -> dict:
    with client("127.0.0.9", 60) as c:
        pairs = c.get(url + "/api/check/pairs", params={"n": 10}).json()
        ballot = [{"query_id": p["query_id"], "model": p["model"], "model_first": p["model_first"], "choice": "left"}
                  for p in pairs]
        batch = (ballot * (50 // max(1, len(ballot)) + 1))[:50]
        statuses = [c.post(url + "/api/check/votes", json={"votes": batch}).status_code for _ in range(batches)]
    return {"scenario": f"{batches} batches of 50 votes from one address, no Origin header", "statuses": statuses}


# ---- memory: each kind of request a client can send, the server's RSS and CPU ---------------------------------

BODY_BUDGET = 64 * 1024 - 256      # the largest body the connection limit lets through, less some slack
WORDS = ("answer clear detailed concise example code python function recipe poem list step explain why "
         "because however careful friendly formal tone short long source table summary data error test").split()


def words(n_chars: int, seed: str) -> str:
    """About ``n_chars`` of varied text (new to the server's caches: ``seed`` is the request's tag)."""
    import random
    rnd, out, size = random.Random(seed), [], 0
    while size < n_chars:
        w = rnd.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def largest(make, budget: int = BODY_BUDGET) -> dict:
    """``make(n)`` with the largest ``n`` whose JSON stays within ``budget`` bytes."""
    lo, hi = 1, budget
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(json.dumps(make(mid)).encode()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return make(lo)


def criteria(tag: str, chars: int = 300) -> dict:
    """The most criteria a request may hold: 10 likes and 10 avoid of ``chars`` characters, new ones."""
    return {"likes": [f"{tag} like {k} " + words(chars - 20, f"{tag}L{k}") for k in range(10)],
            "avoid": [f"{tag} avoid {k} " + words(chars - 20, f"{tag}A{k}") for k in range(10)]}


def status_of(proc: psutil.Process) -> dict[str, int]:
    """VmRSS and VmHWM of ``proc``, bytes."""
    out = {}
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


class Meter:
    """The server's resident memory (sampled every 50 ms, and its kernel-kept peak, VmHWM, reset at the
    start where the kernel allows) and CPU seconds while one request runs and after its client left."""

    def __init__(self, proc: psutil.Process):
        self.proc = proc
        try:                            # "5" resets the peak resident set size (Linux >= 4.0, same user)
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")
            self.hwm_reset = True
        except OSError:
            self.hwm_reset = False
        self.rss0, self.cpu0 = status_of(proc)["VmRSS"], cpu_seconds(proc)
        self.peak, self.stop = self.rss0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, status_of(self.proc)["VmRSS"])

    def left(self) -> None:
        self.cpu_left = cpu_seconds(self.proc)

    def settle(self, cap_s: float, idle_cpu_s: float = 0.05) -> tuple[float, bool]:
        """Wait until the server spends less than ``idle_cpu_s`` CPU in a second, at most ``cap_s``:
        (CPU seconds since the client left, whether it was still busy at the cap)."""
        end, last = time.monotonic() + cap_s, cpu_seconds(self.proc)
        while time.monotonic() < end:
            time.sleep(1.0)
            now = cpu_seconds(self.proc)
            if now - last < idle_cpu_s:
                return now - self.cpu_left, False
            last = now
        return cpu_seconds(self.proc) - self.cpu_left, True

    def done(self) -> dict:
        self.stop.set()
        self.thread.join()
        st = status_of(self.proc)
        peak = max(self.peak, st["VmHWM"]) if self.hwm_reset else self.peak
        return {"peak_growth_mb": round((peak - self.rss0) / 2**20, 1),
                "kept_mb": round((st["VmRSS"] - self.rss0) / 2**20, 1), "rss_mb": round(st["VmRSS"] / 2**20)}


def _post(path: str, body: dict, params: dict | None = None):
    return lambda c, url: c.post(url + path, json=body, params=params)


def _get(path: str, params: dict | list):
    return lambda c, url: c.get(url + path, params=params)


def _stream(path: str, params: dict | list, events: int):
    """GET an event stream and read ``events`` events (0: to its end), then close it."""
    def go(c: httpx.Client, url: str):
        with c.stream("GET", url + path, params=params) as r:
            seen = 0
            for line in r.iter_lines():
                if line.startswith("event: "):
                    seen += 1
                    if events and seen >= events:
                        break
            return r
    return go


def as_query(spec: dict) -> list[tuple[str, str]]:
    return [(k, v) for k, vs in spec.items() for v in (vs if isinstance(vs, list) else [vs])]


def request_kinds(tag: str, topics: list[str], models: list[str]) -> dict:
    """Every kind of request a client can send, each at the largest size the limits allow, new to the
    server's caches (``tag``): name -> function(client, url) -> response."""
    crit = lambda k: criteria(f"{tag}-{k}")
    small = lambda k: criteria(f"{tag}-{k}", 100)       # a URL's criteria: 16 KiB of request line and headers
    reward_long = lambda n: {"criteria": crit("rl"), "items": [{"prompt": words(n, f"{tag}rlp"), "responses": [
        words(n, f"{tag}rl{j}") for j in range(16)]}]}                                   # 120 pairs of long text
    reward_many = lambda n: {"criteria": crit("rm"), "items": [{"prompt": words(n, f"{tag}rmp{i}"), "reference":
        words(n, f"{tag}rmr{i}"), "responses": [words(n, f"{tag}rm{i}.{j}") for j in range(16)]} for i in range(16)]}
    reward_pw = lambda n: {"criteria": crit("rp"), "pairwise": True, "items": [{"prompt": words(n, f"{tag}rpp{i}"),
        "responses": [words(n, f"{tag}rp{i}.{j}") for j in range(16)]} for i in range(2)]}   # 240 pairs
    openrlhf = lambda n: {"prompts": [words(200, f"{tag}op")] * 16,
                          "query": [words(200, f"{tag}op") + words(n, f"{tag}oq{j}") for j in range(16)]}
    kinds = {
        "board: new criteria (20 x 300 chars, per-criterion)": _post("/api/leaderboard", crit("b")),
        "board: 20 criteria of one-token characters": _post("/api/leaderboard", {
            "likes": [f"{tag} {k} " + ("a." * 150)[:280] for k in range(10)],
            "avoid": [f"{tag} {k} " + ("b," * 150)[:280] for k in range(10)]}),
        "board: per_criterion false": _post("/api/leaderboard", {**crit("pc"), "per_criterion": False}),
        "board: all topics": _post("/api/leaderboard", {**crit("t"), "topics": topics}),
        "board: use case (500 chars)": _post("/api/leaderboard", {**crit("u"), "use_case": words(500, tag + "u")}),
        "board: judge crm-factored": _post("/api/leaderboard", {**crit("j"), "judge": "crm-factored"}),
        "board: another baseline": _post("/api/leaderboard", {**crit("bl"), "baseline": models[-1]}),
        "board: GET": _get("/api/leaderboard", as_query(small("g"))),
        "board stream (SSE)": _stream("/api/leaderboard/stream", as_query(small("s")), 0),
        "refine stream (SSE), 3 events": _stream("/api/leaderboard/refine", as_query(small("r")), 3),
        "compare (2 boards)": _post("/api/compare", {"a": crit("ca"), "b": crit("cb")}),
        "reference agreement": _post("/api/reference", crit("ra"), {"name": "alpaca_eval_2"}),
        "examples (20)": _get("/api/examples", [("model", models[0]), ("limit", "20"), *as_query(small("e"))]),
        "export.csv refined": _get("/api/export.csv", [("refined", "true"), *as_query(small("x"))]),
        "export.json": _get("/api/export.json", as_query(small("xj"))),
        "reward: 1 prompt x 16 long responses (120 pairs)": _post("/api/reward", largest(reward_long)),
        "reward: 16 x 16 vs reference (256 pairs)": _post("/api/reward", largest(reward_many)),
        "reward: 2 x 16 pairwise (240 pairs)": _post("/api/reward", largest(reward_pw)),
        "get_reward: 16 long queries (120 pairs)": lambda c, u: c.post(u + "/get_reward", json=largest(openrlhf),
                                                                        params=as_query(criteria(tag + "o", 60))),
        "check: 20 pairs": _get("/api/check/pairs", [("n", "20"), *as_query(small("cp"))]),
    }
    votes_spec = {"likes": crit("v")["likes"][:3], "avoid": crit("v")["avoid"][:2]}

    def vote(c: httpx.Client, u: str):
        pairs = c.get(u + "/api/check/pairs", params=[("n", "20"), *as_query(votes_spec)]).json()
        ballot = [{"query_id": p["query_id"], "model": p["model"], "model_first": p["model_first"],
                   "choice": "left" if k % 3 else "right"} for k, p in enumerate(pairs)]
        return c.post(u + "/api/check/votes", json={"spec": votes_spec, "votes": (ballot * 3)[:50]})

    kinds["check: 50 votes"] = vote
    kinds["check: calibrate"] = _post("/api/check/calibrate", {"spec": votes_spec, "name": f"probe{tag}"})
    kinds["board: calibration"] = _post("/api/leaderboard", {**votes_spec, "calibration": f"probe{tag}"})
    kinds["check: export.jsonl"] = _get("/api/check/export.jsonl", [])
    return kinds


def memory(url: str, leave_after_s: float, settle_s: float, only: str, skip: str, probe: bool,
           address: int = 20) -> list[dict]:
    """Each kind of request twice: waited for to its answer (at most 120 s) and given up after
    ``leave_after_s``; the server's peak RSS growth, its CPU seconds while the client waited and after it
    left (until it idles, at most ``settle_s``), and, with ``probe``, the slowest board another client got
    meanwhile (a new board a second)."""
    proc, rows = server_process(url), []
    with httpx.Client(timeout=60) as c:
        topics = [t["id"] for t in c.get(url + "/api/topics").json()]
        models = [r["model"] for r in c.post(url + "/api/leaderboard", json={"per_criterion": False}).json()
                  ["leaderboard"]["rows"]]
    tag = f"{time.time_ns() % 10**8:x}"
    kinds = {mode: request_kinds(f"{tag}{mode[0]}", topics, models) for mode in ("waited", "left")}
    probe_lat, stop = [], threading.Event()

    def prober() -> None:
        with client("127.0.0.2", 60) as c:
            n = 0
            while not stop.is_set():
                n += 1
                status, took, _ = ask(c, url, {"likes": [f"memory probe {tag} {n}"], "per_criterion": False})
                probe_lat.append((status, took))
                stop.wait(max(0.0, 1.0 - took))

    watcher = threading.Thread(target=prober, daemon=True)
    if probe:
        watcher.start()
    for name in kinds["waited"]:
        if only and not any(part in name for part in only.split(",")) or skip and any(
                part in name for part in skip.split(",")):
            continue
        for mode in ("waited", "left"):
            send = kinds[mode][name]
            address += 1
            time.sleep(0.5)
            del probe_lat[:]
            meter = Meter(proc)
            t0 = time.perf_counter()
            timeout = httpx.Timeout(120.0 if mode == "waited" else leave_after_s, connect=5.0)
            try:
                with client(f"127.0.3.{address % 250 + 1}", 120) as c:
                    c.timeout = timeout
                    r = send(c, url)
                    status = str(r.status_code)
                    detail = "" if r.status_code == 200 else (r.json().get("detail", "") if r.headers.get(
                        "content-type", "").startswith("application/json") else "")
            except httpx.HTTPError as e:
                status, detail = type(e).__name__, ""
            took = time.perf_counter() - t0
            meter.left()
            cpu_after, busy = meter.settle(settle_s)
            row = {"kind": name, "mode": mode, "status": status, "s": round(took, 2),
                   "cpu_s_while_client": round(meter.cpu_left - meter.cpu0, 1),
                   "cpu_s_after_client_left": round(cpu_after, 1), "still_busy_after_s": settle_s if busy else None,
                   **meter.done(), "detail": str(detail)[:160]}
            if probe:
                lat = [t for s, t in probe_lat if s == "200"]
                row["other_board_max_s"] = round(max(lat), 2) if lat else None
                row["other_board_statuses"] = dict(Counter(s for s, _ in probe_lat))
            rows.append(row)
            print(json.dumps(row), flush=True)
    stop.set()
    if probe:
        watcher.join()
    return {"scenario": f"memory: {len(rows)} requests, one JSON line each above", "load_avg": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["flood", "abandon", "body", "refine", "reward", "readings", "votes", "all",
                                             "memory"])
    ap.add_argument("--url", default="http://127.0.0.1:8738")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--flood-from", choices=["one", "many"], default="one")
    ap.add_argument("--leave-after", type=float, default=0.5, help="memory: when a client gives up, seconds")
    ap.add_argument("--settle", type=float, default=40.0, help="memory: longest wait for the server to idle")
    ap.add_argument("--only", default="", help="memory: only the kinds whose name holds one of these "
                                               "(comma-separated)")
    ap.add_argument("--skip", default="", help="memory: not the kinds whose name holds one of these")
    ap.add_argument("--probe", action="store_true", help="memory: another client asks a new board a second "
                                                         "(its CPU counts in the server's)")
    args = ap.parse_args()
    if urlparse(args.url).hostname not in ("127.0.0.1", "localhost"):
        raise SystemExit("this load script runs against a loopback server only")
    runs = {"flood": lambda: flood(args.url, args.clients, args.seconds, args.flood_from == "many"),
            "abandon": lambda: abandon(args.url), "body": lambda: body(args.url), "refine": lambda: refine(args.url),
            "reward": lambda: reward(args.url), "readings": lambda: readings(args.url), "votes": lambda: votes(args.url),
            "memory": lambda: memory(args.url, args.leave_after, args.settle, args.only, args.skip, args.probe)}
    for name in ([n for n in runs if n != "memory"] if args.scenario == "all" else [args.scenario]):
        print(json.dumps(runs[name]()), flush=True)


if __name__ == "__main__":
    main()
