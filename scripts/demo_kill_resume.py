"""Kill `usl rank` mid-way with SIGKILL, run it again, and check nothing was lost or duplicated.

    python scripts/demo_kill_resume.py --home DIR [--judge random:11] [--kill-after 8000]

DIR must hold the imported benchmark. The script polls the judgments table, kills the scoring
job once ``--kill-after`` judgments are stored, reruns it to completion, and compares the rows
with an uninterrupted run in a fresh temporary store (same benchmark import).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--judge", default="random:11", help="a judge not yet cached in DIR")
    ap.add_argument("--kill-after", type=int, default=8000)
    args = ap.parse_args()
    cmd = lambda home: ["usl", "--home", home, "rank", "--judge", args.judge, "--no-per-criterion", "--format", "json"]
    db = sqlite3.connect(os.path.join(args.home, "usl.sqlite"))
    name = args.judge.partition(":")[0]

    def count() -> tuple[int, int]:
        return db.execute("SELECT COUNT(*), COUNT(DISTINCT judge||criteria||benchmark||baseline||model||query_id||"
                          "swapped) FROM judgments WHERE judge LIKE ?", (name + "@%",)).fetchone()

    before = count()[0]
    proc = subprocess.Popen(cmd(args.home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while count()[0] - before < args.kill_after and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"after SIGKILL: {count()[0] - before} new judgments stored (rows, distinct keys: {count()})")
    resumed = json.loads(subprocess.run(cmd(args.home), capture_output=True, text=True, check=True).stdout)
    print(f"after rerun: rows, distinct keys = {count()}")
    with tempfile.TemporaryDirectory() as fresh:
        subprocess.run(["usl", "--home", fresh, "data", "import", "alpaca-eval"], capture_output=True, check=True)
        clean = json.loads(subprocess.run(cmd(fresh), capture_output=True, text=True, check=True).stdout)
    print("leaderboard identical to an uninterrupted run in a fresh store:", resumed["rows"] == clean["rows"])


if __name__ == "__main__":
    main()
