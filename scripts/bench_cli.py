"""Time `usl rank` from the shell with criteria never asked before, as a user types it.

    python scripts/bench_cli.py --home DIR [--runs 5] [--json-out FILE]

DIR is a data directory whose default board has been ranked once (``usl --home DIR rank``). Two ways:

1. ``in-process``: ``usl rank --no-server`` (the command loads the judge, the benchmark and its answer
   vectors itself);
2. ``via serve``: a ``usl --home DIR serve`` is started (and waited for: its default board ranked), and
   ``usl rank`` finds it through the data directory and asks it.

Each run is a fresh process, wall clock from start to exit, with new criteria each time (so no cached
board answers it) and the default options (all topics, CIs, per-criterion breakdown). Target:
<= 2 s. The two ways must give the same rows (checked on the last run). Load average is printed: the
machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


CPU = {"s": 0.0}   # CPU seconds of the last command (user + system): less sensitive to other load than wall time


def rank(home: str, criteria: str, *extra: str) -> tuple[float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "usl.cli", "--home", home, "rank", "--criteria", criteria,
                          "--avoid", "Filler", "--format", "json", *extra], capture_output=True, text=True, env=ENV)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"usl rank failed:\n{out.stderr[-2000:]}")
    return took, json.loads(out.stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    stamp = f"{time.time():.0f}"
    criteria = [f"Answers a busy engineer can act on at once (set {stamp}-{i})" for i in range(2 * args.runs)]

    local, last_local = [], None
    for c in criteria[:args.runs]:
        t, last_local = rank(args.home, c, "--no-server")
        local.append(t)
        print(json.dumps({"way": "in-process", "wall_s": round(t, 2), "cpu_s": round(CPU["s"], 2), "load_avg_1m": round(os.getloadavg()[0], 2)}),
              flush=True)

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "usl.cli", "--home", args.home, "serve", "--port", str(port),
                               "--refine-with", "none"], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while True:     # up, and its default board ranked (the warm-up a user's first visit waits for)
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/leaderboard", timeout=600).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("usl serve did not come up")
            time.sleep(0.5)
        remote, last_remote = [], None
        for c in criteria[args.runs:]:
            t, last_remote = rank(args.home, c)
            remote.append(t)
            print(json.dumps({"way": "via serve", "wall_s": round(t, 2), "cpu_s": round(CPU["s"], 2), "load_avg_1m": round(os.getloadavg()[0], 2)}),
                  flush=True)
        _, same = rank(args.home, criteria[args.runs - 1])       # the last in-process criteria, through the server
        if [r["model"] for r in same["rows"]] != [r["model"] for r in last_local["rows"]] or \
                [r["win_rate"] for r in same["rows"]] != [r["win_rate"] for r in last_local["rows"]]:
            raise SystemExit("the server's board differs from the in-process one")
    finally:
        server.terminate()
        server.wait(timeout=30)
    summary = {"in_process_median_s": round(statistics.median(local), 2),
               "via_serve_median_s": round(statistics.median(remote), 2),
               "via_serve_max_s": round(max(remote), 2), "runs": args.runs, "target_s": 2.0}
    print(json.dumps(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary | {"in_process_s": local, "via_serve_s": remote}, indent=2))


if __name__ == "__main__":
    main()
