"""Time the interactive path: first start, new criteria over HTTP and in Python, restart, memory.

    python scripts/bench_fast_path.py                          # fresh temporary home (cold start, minutes)
    python scripts/bench_fast_path.py --home DIR --runs 20 --json-out artifacts/bench_fast_path.json
    python scripts/bench_fast_path.py --home DIR --judge crm-factored [--no-breakdown]

Targets: the first start on a fresh data directory shows a usable leaderboard within 10 min
(import, topics, static-embedding table, answer embedding included); later starts <= 10 s; criteria
never asked before give the full leaderboard (all topics, CIs, per-criterion breakdown) in <= 1 s p50
through the Python API and the HTTP API; peak RSS <= 2 GB.

Steps, each printed when it finishes:
1. cold start: ``usl --home H serve`` as a subprocess, timed until ``GET /api/leaderboard`` (the
   default board) answers; the server's peak RSS (it and any children at once, or its own VmHWM) is sampled throughout.
2. HTTP: ``--runs`` criteria sets never requested before, POSTed one after the other to
   ``/api/leaderboard`` (the server's default: all topics, per-criterion breakdown, comparison with
   the default board, contradiction check); wall time until the whole JSON is read. Sent right after
   the default board answers, while the server's warm-up still loads the readers of new inputs; then
   ``--runs`` more once the log says ``warm-up done`` (``http_after_warm_up_*``).
3. warm restart: the server stopped and started again on the same home, timed the same way.
4. Python API: with the server stopped, a ``LeaderboardService`` in this process: the first
   ``rank()`` (loading) and then ``--runs`` new criteria sets; peak RSS from ``getrusage``.

"Never requested before" holds across invocations on one home: the criteria sets used are appended
to ``bench_fast_path_criteria.txt`` in the home and skipped next time. The machine's load average
is recorded because the timings are wall-clock on a shared CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

LIKES = [
    "Answers are concise and get to the point quickly.",
    "Explains the reasoning step by step.",
    "Uses concrete examples.",
    "Includes working code snippets when relevant.",
    "Uses bullet points and headings to structure the answer.",
    "Friendly, warm and encouraging tone.",
    "Formal, professional tone.",
    "Cites sources or says where facts come from.",
    "Admits uncertainty instead of guessing.",
    "Gives a direct answer first, then details.",
    "Creative and original ideas.",
    "Humorous and playful where appropriate.",
    "Thorough coverage of edge cases.",
    "Plain language a beginner can follow.",
    "Technical depth suitable for an expert.",
    "Practical, actionable advice.",
    "Asks a clarifying question when the request is ambiguous.",
    "Mentions safety considerations.",
    "Answers in short paragraphs.",
    "Provides a summary at the end.",
    "Gives numbered steps for instructions.",
    "Offers several alternatives to choose from.",
    "Accurate facts and correct arithmetic.",
    "Follows the requested format exactly.",
    "Vivid, descriptive writing for stories.",
    "Empathetic to the user's situation.",
    "Shows the math behind any calculation.",
    "Recommends further reading or next steps.",
    "Uses analogies to explain hard concepts.",
    "Keeps answers under a hundred words.",
    "Writes idiomatic, well-commented Python.",
    "Gives a balanced view of both sides of a debate.",
    "Checks its own answer for mistakes.",
    "Tailors the answer to a busy professional.",
    "Compares options in terms of cost and effort.",
    "Quotes the relevant part of the question before answering.",
]
AVOID = [
    "Long-winded answers with filler.",
    "Moralizing or lecturing the user.",
    "Refusing harmless requests.",
    "Excessive disclaimers.",
    "Jargon without explanation.",
    "Overly casual slang.",
    "Repeating the question back.",
    "Making up facts or citations.",
    "Emoji.",
    "Walls of text without structure.",
    "Vague generic advice.",
    "Sycophantic praise of the question.",
    "Unnecessary code.",
    "Markdown tables.",
    "Passive voice and bureaucratic wording.",
    "Assuming things the user did not say.",
    "Answers in a language other than the question's.",
    "Ending with a generic offer to help further.",
]
USED_FILE = "bench_fast_path_criteria.txt"
DEFAULT_BOARD_TIMEOUT_S = 1800.0
WARM_DONE = "warm-up done"       # usl.server.boards logs it once every model a request can use is loaded


# ---- criteria --------------------------------------------------------------------------------------
def criteria_sets(n: int, used: set[str], rng: random.Random) -> list[tuple[list[str], list[str]]]:
    """``n`` distinct (likes, avoid) sets not in ``used``: 1-3 likes, 0-2 avoid.

    Phrases are drawn least-used first, so that most sets bring criteria the process has not
    encoded yet (the judge and the service memoise single criteria; a reused phrase is cheaper).
    """
    count = dict.fromkeys(LIKES + AVOID, 0)

    def pick(pool: list[str], k: int, fresh_first: bool) -> list[str]:
        if not fresh_first:
            return rng.sample(pool, k)
        return sorted(pool, key=lambda p: (count[p], rng.random()))[:k]

    out: list[tuple[list[str], list[str]]] = []
    for attempt in range(100 * n):
        if len(out) == n:
            return out
        fresh_first = attempt < 10 * n
        likes = pick(LIKES, rng.randint(1, 3), fresh_first)
        avoid = pick(AVOID, rng.choice((0, 0, 1, 2)), fresh_first)
        key = criteria_key(likes, avoid)
        if key not in used:
            used.add(key)
            out.append((likes, avoid))
            for p in likes + avoid:
                count[p] += 1
    # the phrase list ran out on this home: fall back to a nonce so the sets stay new
    while len(out) < n:
        likes = rng.sample(LIKES, 2) + [f"Mentions the number {rng.randrange(10**9)} if relevant."]
        used.add(criteria_key(likes, []))
        out.append((likes, []))
    return out


def n_new_phrases(sets: list[tuple[list[str], list[str]]]) -> list[int]:
    """For each set, how many of its phrases no earlier set used (0 = fully memoised criteria)."""
    seen: set[str] = set()
    out = []
    for likes, avoid in sets:
        out.append(len(set(likes + avoid) - seen))
        seen |= set(likes + avoid)
    return out


def criteria_key(likes: list[str], avoid: list[str]) -> str:
    return json.dumps([sorted(likes), sorted(avoid)])


def load_used(home: Path) -> set[str]:
    f = home / USED_FILE
    return set(f.read_text(encoding="utf-8").splitlines()) if f.exists() else set()


def save_used(home: Path, sets: list[tuple[list[str], list[str]]]) -> None:
    with open(home / USED_FILE, "a", encoding="utf-8") as f:
        for likes, avoid in sets:
            f.write(criteria_key(likes, avoid) + "\n")


# ---- memory ----------------------------------------------------------------------------------------
def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        for task in Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}/task").exists() else []:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                pass
    return pids


class RssSampler:
    """Peak RSS of a process tree: the largest sum over the tree of each process's resident memory at one
    sample, or the root's own kernel-kept peak (VmHWM) where that is larger (a spike between samples). Children
    that come and go (the first start's ONNX export) count while they run, not at their peak summed with the
    root's later one."""

    def __init__(self, pid: int, interval_s: float = 0.2):
        self.pid, self.interval_s = pid, interval_s
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        now = sum(_status_kb(p, "VmRSS") for p in _tree(self.pid))
        self.peak_kb = max(self.peak_kb, now, _status_kb(self.pid, "VmHWM"))

    def stop(self) -> float:
        """Stop sampling (take a last sample first); the peak in MB."""
        self.sample()
        self._stop.set()
        self._thread.join()
        return self.peak_kb / 1024


# ---- server ----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``usl --home H serve`` in a subprocess; its output goes to a log file in the home, each line
    (progress-bar updates included) stamped with the seconds since the start, to see the phases."""

    def __init__(self, home: Path, log_name: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / log_name
        usl = Path(sys.executable).with_name("usl")
        cmd = [str(usl) if usl.exists() else "usl", "--home", str(home), "serve", "--port", str(self.port)]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.rss = RssSampler(self.proc.pid)
        self._logger = threading.Thread(target=self._log, daemon=True)
        self._logger.start()

    def _log(self) -> None:
        with open(self.log_path, "w", encoding="utf-8") as f:
            line = b""
            while chunk := self.proc.stdout.read1(4096):
                line += chunk
                *done, line = line.replace(b"\r", b"\n").split(b"\n")
                for d in filter(None, done):
                    f.write(f"[{time.perf_counter() - self.started:7.1f}s] {d.decode(errors='replace')}\n")
                f.flush()

    def wait_log(self, text: str, timeout_s: float) -> float | None:
        """Seconds since the start until the log holds ``text`` (None: not within ``timeout_s``)."""
        while time.perf_counter() < self.started + timeout_s and self.proc.poll() is None:
            if self.log_path.is_file() and text in self.log_path.read_text(encoding="utf-8", errors="replace"):
                return time.perf_counter() - self.started
            time.sleep(0.5)
        return None

    def wait_default_board(self, timeout_s: float) -> tuple[float, float, dict]:
        """Seconds until the server listens and until the default board arrives, and the board."""
        deadline = self.started + timeout_s
        listening = None
        with httpx.Client(base_url=self.url, timeout=timeout_s) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
                try:
                    if listening is None:
                        client.get("/api/health", timeout=5).raise_for_status()
                        listening = time.perf_counter() - self.started
                    r = client.get("/api/leaderboard", timeout=max(1.0, deadline - time.perf_counter()))
                    r.raise_for_status()
                    return listening, time.perf_counter() - self.started, r.json()
                except httpx.TransportError:
                    time.sleep(0.25)
        raise TimeoutError(f"no default board after {timeout_s:.0f}s; see {self.log_path}")

    def stop(self) -> float:
        """Stop the server (SIGINT, then SIGKILL); its peak RSS in MB."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._logger.join(5)
        return self.rss.stop()


def check_full(payload: dict, n_topics: int, likes: list[str], avoid: list[str], breakdown: bool = True) -> None:
    """Raise unless the board has every row's CI, every topic and the per-criterion breakdown."""
    lb = payload["leaderboard"] if "leaderboard" in payload else payload
    rows = lb["rows"]
    if not rows:
        raise AssertionError("empty leaderboard")
    for r in rows:
        if len(r["ci"]) != 2 or not r["ci"][0] <= r["win_rate"] <= r["ci"][1]:
            raise AssertionError(f"bad CI in row {r['model']}: {r['ci']} vs {r['win_rate']}")
    topics = max(len(r["topics"]) for r in rows)
    if n_topics and topics < n_topics:
        raise AssertionError(f"rows have {topics} topic columns, the benchmark has {n_topics}")
    if breakdown and len(likes) + len(avoid) > 1 and len(lb["criteria_breakdown"]) < len(likes) + len(avoid):
        raise AssertionError(f"breakdown has {len(lb['criteria_breakdown'])} criteria, asked {len(likes) + len(avoid)}")


def quantiles(times: list[float], sets: list[tuple[list[str], list[str]]]) -> dict:
    """p50/p90/max over all runs, and p50 over the runs whose phrases were all new to the process."""
    qs = statistics.quantiles(times, n=10, method="inclusive")
    fresh = [t for t, k, (likes, avoid) in zip(times, n_new_phrases(sets), sets) if k == len(set(likes + avoid))]
    return {"p50_s": round(statistics.median(times), 3), "p90_s": round(qs[8], 3), "max_s": round(max(times), 3),
            "p50_all_new_s": round(statistics.median(fresh), 3) if fresh else None, "n_all_new": len(fresh)}


def targets(summary: dict) -> dict:
    """The targets against the measured figures (a start on an existing home is not a cold start)."""
    met = {"warm_start_le_10s": summary["warm_start_s"] <= 10, "http_p50_le_1s": summary["http_p50_s"] <= 1,
           "api_p50_le_1s": summary["api_p50_s"] <= 1,
           "peak_rss_le_2GB": max(summary["peak_rss_serve_mb"], summary["peak_rss_api_mb"]) <= 2048}
    if "cold_start_s" in summary:
        met["cold_start_le_10min"] = summary["cold_start_s"] <= 600
    return met


def source_info() -> dict:
    """Which ``usl`` code ran: its directory, and the commit of the checkout around it (with dirty sources)."""
    import usl

    src = Path(usl.__file__).resolve().parent
    info: dict = {"usl_source": str(src)}
    try:
        git = ["git", "-C", str(src)]
        info["git_commit"] = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                                            text=True, check=True).stdout.strip()
        info["dirty_sources"] = bool(subprocess.run(git + ["status", "--porcelain", "."], capture_output=True,
                                                    text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        info["git_commit"] = None       # not a checkout (e.g. an exported snapshot)
    return info


def show(step: str, text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {step}: {text}", flush=True)


# ---- steps -----------------------------------------------------------------------------------------
def http_runs(server: Server, sets: list[tuple[list[str], list[str]]], n_topics: int, judge: str,
              breakdown: bool) -> list[float]:
    times, new = [], n_new_phrases(sets)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for i, (likes, avoid) in enumerate(sets, 1):
            t = time.perf_counter()
            r = client.post("/api/leaderboard", json={"likes": likes, "avoid": avoid, "judge": judge,
                                                      "per_criterion": breakdown})
            r.raise_for_status()
            payload = r.json()
            times.append(time.perf_counter() - t)
            check_full(payload, n_topics, likes, avoid, breakdown)
            print(f"    http {i:2d}/{len(sets)} {times[-1]:6.3f}s  likes={len(likes)} avoid={len(avoid)} "
                  f"new phrases={new[i - 1]}", flush=True)
    return times


def api_runs(home: Path, sets: list[tuple[list[str], list[str]]], n_topics: int, torch_threads: int | None,
             judge: str, breakdown: bool) -> dict:
    import torch

    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.paths import db_path
    from usl.store import Store
    from usl.types import Criteria

    if torch_threads:
        torch.set_num_threads(torch_threads)
    t = time.perf_counter()
    service = LeaderboardService(Store(db_path(str(home))), home=str(home))
    first = service.rank(LeaderboardSpec(judge=judge))
    load_s = time.perf_counter() - t
    check_full(first.to_json(), n_topics, list(LeaderboardSpec().criteria.likes), [])
    show("api", f"first rank() (load + default board) {load_s:.2f}s")
    times, new = [], n_new_phrases(sets)
    for i, (likes, avoid) in enumerate(sets, 1):
        t = time.perf_counter()
        lb = service.rank(LeaderboardSpec(criteria=Criteria(tuple(likes), tuple(avoid)), judge=judge,
                                          per_criterion=breakdown))
        times.append(time.perf_counter() - t)
        check_full(lb.to_json(), n_topics, likes, avoid, breakdown)
        print(f"    api  {i:2d}/{len(sets)} {times[-1]:6.3f}s  likes={len(likes)} avoid={len(avoid)} "
              f"new phrases={new[i - 1]}", flush=True)
    return {"load_s": load_s, "times": times, "judge": service.judge(judge).identity,
            "torch_threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", help="Data directory; default: a fresh temporary one (cold start).")
    ap.add_argument("--runs", type=int, default=20, help="New criteria sets per API (HTTP and Python).")
    ap.add_argument("--json-out", help="Also write the summary JSON here.")
    ap.add_argument("--seed", type=int, default=None, help="Criteria sampling seed; default: from the clock.")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads for the Python-API step; default: torch's own choice.")
    ap.add_argument("--keep", action="store_true", help="Keep the temporary home (only without --home).")
    ap.add_argument("--judge", default="default",
                    help="Judge of the new-criteria boards (one `usl serve` offers: default, crm-factored).")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="Ask for the board without the per-criterion breakdown (per_criterion=false).")
    args = ap.parse_args()

    temp = args.home is None
    home = Path(args.home or tempfile.mkdtemp(prefix="usl-bench-home-")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    fresh = not any(p.name != USED_FILE for p in home.iterdir())
    load = os.getloadavg()
    machine = {"nproc": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load]}
    show("machine", f"nproc={machine['nproc']} load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
                    f"home {home} ({'fresh' if fresh else 'existing'})")
    rng = random.Random(args.seed if args.seed is not None else time.time_ns())
    used = load_used(home)
    http_sets, api_sets = criteria_sets(args.runs, used, rng), criteria_sets(args.runs, used, rng)
    warm_sets = criteria_sets(args.runs, used, rng)
    source = source_info()
    summary: dict = {"n_runs": args.runs, "judge": args.judge, "breakdown": not args.no_breakdown,
                     "machine": machine, "home_fresh": fresh, **source}
    show("source", json.dumps(source))

    server, ok = None, False
    try:
        # 1. first start
        server = Server(home, "bench_serve_1.log")
        listen_s, board_s, board = server.wait_default_board(DEFAULT_BOARD_TIMEOUT_S)
        n_topics = max(len(r["topics"]) for r in board["leaderboard"]["rows"])
        check_full(board, n_topics, [], [])
        summary |= {"cold_start_s" if fresh else "first_start_s": round(board_s, 2),
                    "first_start_listening_s": round(listen_s, 2), "n_topics": n_topics,
                    "n_models": len(board["leaderboard"]["rows"]),
                    "judge_identity": board["leaderboard"]["spec"].get("judge_identity")}
        show("start 1", f"listening after {listen_s:.1f}s, default board after {board_s:.1f}s "
                        f"({summary['n_models']} models, {n_topics} topics; log {server.log_path})")

        # 2. new criteria over HTTP
        save_used(home, http_sets)
        times = http_runs(server, http_sets, n_topics, args.judge, not args.no_breakdown)
        q = quantiles(times, http_sets)
        summary |= {f"http_{k}": v for k, v in q.items()}
        show("http", f"{len(times)} new criteria sets, right after the default board (the server's warm-up "
                     f"still loading): p50 {q['p50_s']:.3f}s p90 {q['p90_s']:.3f}s max {q['max_s']:.3f}s (all-new "
                     f"phrases: p50 {q['p50_all_new_s']}s over {q['n_all_new']})")

        # 2b. the same once the server's warm-up is done (every model a request can use loaded)
        warm_s = server.wait_log(WARM_DONE, DEFAULT_BOARD_TIMEOUT_S)
        save_used(home, warm_sets)
        q = quantiles(http_runs(server, warm_sets, n_topics, args.judge, not args.no_breakdown), warm_sets)
        summary |= {"warm_up_done_s": warm_s and round(warm_s, 1)} | {f"http_after_warm_up_{k}": v for k, v in q.items()}
        rss1 = server.stop()
        summary["peak_rss_serve_first_mb"] = round(rss1)
        show("http", f"{args.runs} more after `warm-up done` (at {warm_s or float('nan'):.1f}s): p50 {q['p50_s']:.3f}s p90 {q['p90_s']:.3f}s "
                     f"max {q['max_s']:.3f}s; server peak RSS {rss1:.0f} MB")

        # 3. restart on the same home
        server = Server(home, "bench_serve_2.log")
        listen_s, board_s, board = server.wait_default_board(300)
        check_full(board, n_topics, [], [])
        rss2 = server.stop()
        summary |= {"warm_start_s": round(board_s, 2), "warm_start_listening_s": round(listen_s, 2),
                    "peak_rss_serve_restart_mb": round(rss2), "peak_rss_serve_mb": round(max(rss1, rss2))}
        show("start 2", f"listening after {listen_s:.1f}s, default board after {board_s:.1f}s; "
                        f"peak RSS {rss2:.0f} MB")

        # 4. Python API in this process
        save_used(home, api_sets)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        server = None
        api = api_runs(home, api_sets, n_topics, args.torch_threads, args.judge, not args.no_breakdown)
        q = quantiles(api["times"], api_sets)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        summary |= {"api_load_s": round(api["load_s"], 2), **{f"api_{k}": v for k, v in q.items()},
                    "api_torch_threads": api["torch_threads"], "peak_rss_api_mb": round(peak),
                    "rss_before_api_mb": round(before), "api_judge_identity": api["judge"]}
        ok = True
        show("api", f"{len(api['times'])} new criteria sets: p50 {q['p50_s']:.3f}s p90 {q['p90_s']:.3f}s "
                    f"max {q['max_s']:.3f}s (all-new phrases: p50 {q['p50_all_new_s']}s over {q['n_all_new']}); "
                    f"peak RSS {peak:.0f} MB")
    finally:
        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        if server is not None and server.proc.poll() is None:
            server.stop()
        if not ok:
            show("failed", f"home and server logs kept in {home}")
        elif temp and not args.keep:
            shutil.rmtree(home, ignore_errors=True)

    summary["targets_met"] = targets(summary)
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
