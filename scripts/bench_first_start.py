"""Time the first start: ``usl serve`` on an empty data directory until the default board answers.

    python scripts/bench_first_start.py --runs 3 [--json-out FILE]

Each run starts ``usl --home FRESH serve`` (importing the default benchmark from the shared data,
building its topics, reading every answer of it) in a new temporary home and times it until
``GET /api/leaderboard`` answers and until its log says ``warm-up done`` (the models that read new answers,
loaded after the default board), sampling the server's peak RSS over both. The server's log, each line stamped
with the seconds since the start, shows the phases; the last run's is printed. Medians over runs, with
the load average, because the timings are wall-clock on a shared CPU. (``bench_fast_path.py`` times one
first start among its other steps.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fast_path import DEFAULT_BOARD_TIMEOUT_S, WARM_DONE, Server, source_info  # noqa: E402


def one_start() -> dict:
    home = Path(tempfile.mkdtemp(prefix="usl-first-start-"))
    server = Server(home, "serve.log")
    try:
        listen_s, board_s, board = server.wait_default_board(DEFAULT_BOARD_TIMEOUT_S)
        warm_s = server.wait_log(WARM_DONE, DEFAULT_BOARD_TIMEOUT_S)   # the peak covers the warm-up too
    finally:
        rss = server.stop()
    log = server.log_path.read_text()
    shutil.rmtree(home, ignore_errors=True)
    return {"board_s": round(board_s, 1), "listening_s": round(listen_s, 1),
            "warm_s": None if warm_s is None else round(warm_s, 1), "peak_rss_mb": round(rss),
            "n_models": len(board["leaderboard"]["rows"]), "log": log}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    load_start = os.getloadavg()
    runs = []
    for i in range(args.runs):
        runs.append(one_start())
        r = runs[-1]
        print(f"run {i + 1}: default board after {r['board_s']} s (listening after {r['listening_s']} s, warm-up "
              f"done after {r['warm_s']} s), peak RSS {r['peak_rss_mb']} MB, load average {os.getloadavg()[0]:.2f}",
              flush=True)
    print(runs[-1]["log"])
    summary = {"runs": [{k: v for k, v in r.items() if k != "log"} for r in runs],
               "median_board_s": statistics.median(r["board_s"] for r in runs),
               "median_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
               "median_warm_s": statistics.median(r["warm_s"] or float("nan") for r in runs),
               "loadavg_start": [round(x, 2) for x in load_start],
               "loadavg_end": [round(x, 2) for x in os.getloadavg()], "nproc": os.cpu_count(), **source_info()}
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")


if __name__ == "__main__":
    main()
