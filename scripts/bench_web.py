"""Click-to-table latency of the web page in headless Chromium, for criteria the server has never seen.

For each of ``--runs`` criteria sets (2-4 likes and 0-2 things to avoid drawn from a pool of realistic
criteria, each tagged with a per-run nonce so that neither the judgment cache nor the server's
memory has seen them), the script types the criteria into the page, clicks "Rank models" and waits
until the new table is rendered. Two clocks:

* page: ``performance.now()`` from the click handler to two animation frames after the table's DOM
  was replaced (i.e. painted), as the page records it in ``window.uslLastRenderMs``;
* driver: wall time from Playwright's click to seeing the new table (adds the CDP round trips).

One warm-up set runs first and is reported apart (it pays for loading the judge). Prints every run
and the medians; writes a JSON record to ``artifacts/bench_web.json``.

    .venv/bin/python scripts/bench_web.py                      # starts `usl serve` (default home)
    .venv/bin/python scripts/bench_web.py --url http://127.0.0.1:8000
    .venv/bin/python scripts/bench_web.py --home /tmp/h --benchmark tiny --judge length
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]
LIKES = [
    "The answer is concise and gets to the point quickly.",
    "It includes runnable code examples.",
    "It explains the reasoning step by step.",
    "It uses a friendly, conversational tone.",
    "It cites sources or gives references.",
    "It is well structured with headings and bullet points.",
    "It gives concrete, practical examples.",
    "It is creative and original.",
    "It is formal and professional.",
    "It is accurate and avoids speculation.",
    "It answers in as few words as possible.",
    "It covers edge cases and caveats.",
    "It is suitable for a beginner.",
    "It is detailed and thorough.",
    "It uses simple, plain language.",
    "It is written like an academic paper.",
]
AVOID = [
    "Unnecessary disclaimers and warnings.",
    "Long preambles before the answer.",
    "Bullet point lists.",
    "Jargon without explanation.",
    "Repeating the question back.",
    "Emojis and exclamation marks.",
    "Refusing to answer.",
    "Hedging and vague statements.",
]


def criteria_sets(n: int, seed: int, nonce: bool) -> list[tuple[list[str], list[str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tag = f" (#{secrets.token_hex(3)})" if nonce else ""
        likes = [x + tag for x in rng.sample(LIKES, rng.randint(2, 4))]
        avoid = [x + tag for x in rng.sample(AVOID, rng.randint(0, 2))]
        out.append((likes, avoid))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def started_server(args) -> Iterator[str]:
    if args.url:
        yield args.url.rstrip("/")
        return
    port = free_port()
    cmd = [sys.executable, "-c", "from usl.cli import main; main()"]
    if args.home:
        cmd += ["--home", args.home]
    cmd += ["serve", "--port", str(port), "--benchmark", args.benchmark, "--judge", args.judge]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.start_timeout
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"usl serve exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit("usl serve did not start in time")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def one_run(page, likes: list[str], avoid: list[str], timeout_ms: int) -> tuple[float, float, float | None]:
    page.fill("#likes", "\n".join(likes))
    page.fill("#avoid", "\n".join(avoid))
    seq = page.get_attribute("#leaderboard", "data-render-seq")
    page.evaluate("window.uslLastRenderMs = undefined; window.uslLastBreakdownMs = undefined")
    t0 = time.perf_counter()
    page.click("#rank-btn")
    page.wait_for_function(
        "seq => { const t = document.getElementById('leaderboard');"
        " return t.dataset.view === 'custom' && t.dataset.renderSeq !== seq && window.uslLastRenderMs !== undefined; }",
        arg=seq, timeout=timeout_ms)
    driver_ms = (time.perf_counter() - t0) * 1000
    error = page.inner_text("#form-error") if page.is_visible("#form-error") else ""
    if error:
        raise SystemExit(f"the page shows an error: {error}")
    page_ms = float(page.evaluate("window.uslLastRenderMs"))
    # Let the per-criterion boards finish (untimed) so the next click finds an idle server, as
    # a user reading the table would.
    page.wait_for_selector("#breakdown:not([data-state=pending])", state="attached", timeout=timeout_ms)
    breakdown_ms = page.evaluate("window.uslLastBreakdownMs")
    return page_ms, driver_ms, breakdown_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="Use a running server instead of starting `usl serve`.")
    ap.add_argument("--home", help="Data directory for the started server (default: usl's).")
    ap.add_argument("--benchmark", default="alpaca_eval", help="Benchmark the started server shows.")
    ap.add_argument("--judge", default="default", help="Judge the started server uses.")
    ap.add_argument("--runs", type=int, default=9, help="Criteria sets timed (after one warm-up).")
    ap.add_argument("--seed", type=int, default=0, help="Seed for drawing the criteria sets.")
    ap.add_argument("--no-nonce", action="store_true", help="Do not tag criteria with a fresh nonce "
                                                             "(then repeated runs may hit caches).")
    ap.add_argument("--start-timeout", type=float, default=1800, help="Seconds to wait for the server "
                                                                      "(first start imports and builds topics).")
    ap.add_argument("--timeout", type=float, default=120, help="Seconds to wait for one table.")
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "bench_web.json"), help="JSON record path.")
    ap.add_argument("--screenshot", default=str(ROOT / "artifacts" / "screenshots" / "bench_web.png"),
                    help="Screenshot of the last table.")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    sets = criteria_sets(args.runs + 1, args.seed, nonce=not args.no_nonce)
    with started_server(args) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_selector("#leaderboard[data-view=default][data-render-seq]", timeout=args.timeout * 1000 * 10)
        first_load_s = time.perf_counter() - t0
        cfg = httpx.get(url + "/api/config").json()
        warm = one_run(page, *sets[0], timeout_ms=int(args.timeout * 1000))
        print(f"warm-up: table {warm[0]:.0f} ms (page), {warm[1]:.0f} ms (driver); "
              f"default board loaded in {first_load_s:.1f} s")
        runs = []
        for i, (likes, avoid) in enumerate(sets[1:], 1):
            page_ms, driver_ms, breakdown_ms = one_run(page, likes, avoid, timeout_ms=int(args.timeout * 1000))
            runs.append({"likes": likes, "avoid": avoid, "page_ms": round(page_ms, 1), "driver_ms": round(driver_ms, 1),
                         "breakdown_ms": None if breakdown_ms is None else round(breakdown_ms, 1)})
            extra = "" if breakdown_ms is None else f", per-criterion boards at {breakdown_ms:.0f} ms"
            print(f"run {i}: {len(likes)} likes, {len(avoid)} avoid: table {page_ms:.0f} ms (page), "
                  f"{driver_ms:.0f} ms (driver){extra}")
        Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.screenshot, full_page=True)
        browser.close()

    med_page = statistics.median(r["page_ms"] for r in runs)
    med_driver = statistics.median(r["driver_ms"] for r in runs)
    print(f"median click->rendered table over {len(runs)} uncached criteria sets: "
          f"{med_page:.0f} ms (page clock), {med_driver:.0f} ms (driver clock); "
          f"judge {cfg['judge']}, benchmark {cfg['benchmark']}")
    record = {"median_page_ms": med_page, "median_driver_ms": med_driver, "warmup": {"page_ms": warm[0], "driver_ms": warm[1]},
              "runs": runs, "config": {**vars(args), "server": cfg}, "first_load_s": first_load_s,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "git_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                           text=True).stdout.strip()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
