"""Test fixtures for the real engine behind the server: a tiny benchmark with known length-judge
answers saved into a real store, and ``usl serve`` started as a subprocess.

Answers (words; baseline ``base`` always 10). The ``length`` judge prefers the longer answer.

    model    coding q0-q3  coding q4-q7  writing q8-q9  writing q10-q15   default  coding  writing
    m_mid         8            12            12              12             75.0    50.0    100.0
    m_code       20            20             5               5             50.0   100.0      0.0
    m_write       5             5             5              20             37.5     0.0     75.0
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx

from usl.store import Store
from usl.store.benchmarks import save_benchmark
from usl.types import Benchmark, Query, Response

DEFAULT_ORDER = ["m_mid", "m_code", "m_write"]
CODING_ORDER = ["m_code", "m_mid", "m_write"]
WIN_RATES = {"default": {"m_mid": 75.0, "m_code": 50.0, "m_write": 37.5},
             "coding": {"m_code": 100.0, "m_mid": 50.0, "m_write": 0.0}}


def _words(model: str, i: int) -> int:
    coding = i < 8
    if model == "base":
        return 10
    if model == "m_mid":
        return 8 if i < 4 else 12
    if model == "m_code":
        return 20 if coding else 5
    return 5 if coding or i < 10 else 20       # m_write


def make_tiny(home: Path) -> None:
    """Save the benchmark ``tiny`` and its two topics into ``home``'s store."""
    from usl.data.topics import Topic, save_topics

    store = Store(home / "usl.sqlite")
    queries = tuple(Query(f"q{i}", f"Write a Python function number {i}" if i < 8 else f"Write a poem number {i}")
                    for i in range(16))
    models = ("base", "m_code", "m_mid", "m_write")
    resp = [Response(q.id, m, " ".join([f"{m}-w"] * _words(m, i))) for i, q in enumerate(queries) for m in models]
    save_benchmark(store, Benchmark("tiny", queries, models, "base"), resp, source="test")
    # Topics are normally clustered from embeddings (usl topics build); here they are fixed so the
    # expected win rates are exact.
    save_topics(store, "tiny", [Topic("coding", "Coding", ("python",), tuple(f"q{i}" for i in range(8))),
                          Topic("writing", "Creative writing", ("poem",), tuple(f"q{i}" for i in range(8, 16)))])
    store.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def usl_serve(home: Path, *args: str, timeout_s: float = 60, env: dict | None = None) -> Iterator[str]:
    """``usl --home HOME serve --port N ARGS`` as a subprocess; yields the base URL once healthy."""
    port = free_port()
    cmd = [sys.executable, "-c", "from usl.cli import main; main()", "--home", str(home), "serve",
           "--port", str(port), *args]
    log = open(home / "serve.log", "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"usl serve exited with {proc.returncode}:\n{log.read()}")
            try:
                if httpx.get(url + "/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("usl serve did not become healthy in time")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def serve_output(home: Path) -> str:
    return (home / "serve.log").read_text()


def server_pid(url: str) -> int:
    """The process listening on ``url``'s port (``usl serve``'s Python, not a wrapper)."""
    import psutil

    port = int(url.rsplit(":", 1)[1])
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            return conn.pid
    raise AssertionError("no process listens on " + url)


def sigterm_and_wait(pid: int, limit_s: float = 10) -> tuple[int, float]:
    """Send ``pid`` SIGTERM; (its exit status, seconds it took to end). Fails the test if it still runs after
    ``limit_s``."""
    import signal

    import psutil
    import pytest

    t0 = time.monotonic()
    psutil.Process(pid).send_signal(signal.SIGTERM)
    try:
        status = psutil.Process(pid).wait(timeout=limit_s)
    except psutil.TimeoutExpired:
        pytest.fail(f"usl serve was still running {limit_s:.0f} s after SIGTERM")
    return status, time.monotonic() - t0


def wait_for_log(home: Path, text: str, timeout_s: float) -> str:
    """``usl serve``'s log once it holds ``text``; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while text not in serve_output(home):
        if time.monotonic() > deadline:
            raise AssertionError(f"usl serve did not log {text!r} within {timeout_s:.0f} s:\n{serve_output(home)}")
        time.sleep(0.5)
    return serve_output(home)


def tiny_alpaca_layout(root: Path, n: int = 24) -> Path:
    """``root/alpaca_eval`` in the shared layout: split.json + outputs/ for base, m1, m2; n queries."""
    import json

    d = root / "alpaca_eval"
    (d / "outputs").mkdir(parents=True)
    topics = ["Write a Python function that", "Give me a recipe for", "Write a short poem about"]
    instr = [f"{topics[i % 3]} item {i}" for i in range(n)]
    for model, words in (("base", 10), ("m1", 12), ("m2", 8)):
        items = [{"dataset": "test", "instruction": q, "output": " ".join(["w"] * (words + i % 2)), "generator": model}
                 for i, q in enumerate(instr)]
        (d / "outputs" / f"{model}.json").write_text(json.dumps(items))
    split = {"baseline": "base", "board_models": ["m1", "m2"], "style_models": [],
             "board": list(range(0, n, 2)) + list(range(1, n, 2))[: n // 4], "train": list(range(1, n, 2))[n // 4:]}
    (d / "split.json").write_text(json.dumps(split))
    return root
