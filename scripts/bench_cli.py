"""Time the everyday commands from the shell, as a user types them (issue 47's targets).

    python scripts/bench_cli.py --home DIR [--runs 5] [--json-out FILE]

DIR is a data directory whose default board has been ranked once (``usl --home DIR rank``). Each run is
a fresh process, wall clock from start to exit, with criteria never asked before (so no cached board
answers it) and the default options (all topics, CIs, per-criterion breakdown). Medians of ``--runs``:

1. ``rank --no-server``: the command loads the judge, the benchmark and its answer vectors itself
   (target <= 3 s on 2 idle cores; it must import neither torch nor transformers); the same with
   ``--reference alpaca_eval_2`` (the rank correlation with the published board), and ``compare`` of two
   new criteria sets (<= 3 s each);
2. ``misspelt topic --no-server``: ``usl rank --topics nosuchtopic`` answered with the list of topics;
   the same for ``--reference nosuchboard`` and ``--benchmark nosuchbench`` (targets <= 1 s);
3. a ``usl --home DIR serve`` is started (and waited for: its default board ranked), then the same
   through it: ``rank via serve`` (``usl rank`` finds it through the data directory and asks it),
   ``rank --reference via serve``, ``compare via serve`` (targets <= 0.5 s) and the three misspellings
   (<= 1 s).

The in-process and served boards must have the same rows (checked on the last in-process criteria).
The 1-minute load average is printed with every run: the machine may be shared.
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
TARGETS_S = {"rank --no-server": 3.0, "rank --reference --no-server": 3.0, "compare --no-server": 3.0,
             "misspelt topic --no-server": 1.0, "misspelt reference --no-server": 1.0,
             "misspelt benchmark --no-server": 1.0, "rank via serve": 0.5, "rank --reference via serve": 0.5,
             "compare via serve": 0.5, "misspelt topic via serve": 1.0, "misspelt reference via serve": 1.0,
             "misspelt benchmark via serve": 1.0}


def usl(home: str, *args: str, ok: bool = True) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process, stdout) of ``usl --home HOME ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "usl.cli", "--home", home, *args], capture_output=True, text=True,
                         env=ENV)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if (out.returncode == 0) != ok:
        raise SystemExit(f"usl {' '.join(args)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(way: str, runs: list, home: str, *args: str, ok: bool = True) -> str:
    wall, cpu, stdout = usl(home, *args, ok=ok)
    runs.append(wall)
    print(json.dumps({"way": way, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)
    return stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    stamp = f"{time.time():.0f}"
    fresh = iter(f"Answers a busy engineer can act on at once (set {stamp}-{i})" for i in range(20 * args.runs))
    rank = lambda c, *extra: ("rank", "--criteria", c, "--avoid", "Filler", "--format", "json", *extra)  # noqa: E731
    typo = ("rank", "--topics", "nosuchtopic", "--criteria", "Concise")
    typo_ref = ("rank", "--reference", "nosuchboard", "--criteria", "Concise")
    typo_bench = ("rank", "--benchmark", "nosuchbench", "--criteria", "Concise")
    ref = ("--reference", "alpaca_eval_2")
    took: dict[str, list[float]] = {way: [] for way in TARGETS_S}

    last_local = None
    for _ in range(args.runs):
        last = next(fresh)
        last_local = json.loads(timed("rank --no-server", took["rank --no-server"], args.home, *rank(last, "--no-server")))
        timed("rank --reference --no-server", took["rank --reference --no-server"], args.home,
              *rank(next(fresh), *ref, "--no-server"))
        timed("compare --no-server", took["compare --no-server"], args.home, "compare", "--a-criteria", next(fresh),
              "--b-criteria", next(fresh), "--json", "--no-server")
        timed("misspelt topic --no-server", took["misspelt topic --no-server"], args.home, *typo, "--no-server", ok=False)
        timed("misspelt reference --no-server", took["misspelt reference --no-server"], args.home, *typo_ref,
              "--no-server", ok=False)
        timed("misspelt benchmark --no-server", took["misspelt benchmark --no-server"], args.home, *typo_bench,
              "--no-server", ok=False)

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
        for _ in range(args.runs):
            timed("rank via serve", took["rank via serve"], args.home, *rank(next(fresh)))
            timed("compare via serve", took["compare via serve"], args.home, "compare", "--a-criteria", next(fresh),
                  "--b-criteria", next(fresh), "--json")
            timed("rank --reference via serve", took["rank --reference via serve"], args.home, *rank(next(fresh), *ref))
            timed("misspelt topic via serve", took["misspelt topic via serve"], args.home, *typo, ok=False)
            timed("misspelt reference via serve", took["misspelt reference via serve"], args.home, *typo_ref, ok=False)
            timed("misspelt benchmark via serve", took["misspelt benchmark via serve"], args.home, *typo_bench,
                  ok=False)
        same = json.loads(usl(args.home, *rank(last))[2])       # the last in-process criteria, through the server
        if [(r["model"], r["win_rate"]) for r in same["rows"]] != [(r["model"], r["win_rate"]) for r in last_local["rows"]]:
            raise SystemExit("the server's board differs from the in-process one")
    finally:
        server.terminate()
        server.wait(timeout=30)
    summary = {"medians_s": {way: round(statistics.median(t), 2) for way, t in took.items()},
               "max_s": {way: round(max(t), 2) for way, t in took.items()}, "targets_s": TARGETS_S,
               "runs": args.runs, "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary | {"runs_s": took}, indent=2))


if __name__ == "__main__":
    main()
