"""Time adding one model to the default board and ranking it: ``usl data add-model`` then ``usl rank``.

    python scripts/bench_add_model.py --home DIR [--models alpaca-7b_concise,...] [--json-out FILE]

DIR is a data directory whose default board has been ranked once with the default judge (``usl --home
DIR rank``), so that the board's 21k answers are already read; each model named here is one never added
before to DIR (AlpacaEval's style variants by default: 805 answers each, 483 of them to board queries).
For each model, as a new user would type them, each a fresh process:

1. ``usl data add-model ../shared/data/alpaca_eval/outputs/MODEL.json.gz`` (match, store, and the
   default judge reading the new answers);
2. ``usl rank --criteria ... --format json`` with criteria never asked before (the board with the new
   model, all topics, CIs, per-criterion breakdown).

Each run is split, in wall and CPU seconds (CPU: every thread of the process, user + system, less
sensitive to other load than wall time): ``store`` (start, match, store), ``embed`` (loading the
judge, and its per-answer features but the style scorers': static embedding, style features,
n-gram registers), ``style`` (the style scorer and register basis: MiniLM passes over each new
answer), ``quality`` (the quality reader over the new (answer, baseline) pairs, with its own progress
bar in add-model) and ``rank``. Target: add-model and rank together, less the quality reader, <= 60 s
on the 2-core CPU; the quality reader's part is allowed on top and reported apart (``total_s``
counts it, ``target_total_s`` does not). The script checks that the new model is on the board and
that the answer cache grew by that model's answers alone; the model is removed again afterwards
(``--keep`` keeps it), so a rerun on the same home times warm caches: pass other models. The
1-minute load average before each command is printed: wall times on a shared machine are inflated
by it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = "alpaca-7b_concise,gpt-3.5-turbo-1106_verbose,Mixtral-8x7B-Instruct-v0.1_concise"


CPU = {"s": 0.0}   # CPU seconds (user + system) of the last command: less sensitive to other load than wall time
ERR = {"s": ""}    # its stderr (the log lines that time the style scorers)


def usl(home: str, *args: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "usl.cli", "--home", home, *args], capture_output=True, text=True,
                         env=env)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ERR["s"] = out.stderr
    if out.returncode != 0:
        raise SystemExit(f"usl {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return took, out.stdout


def cached_answers(home: str) -> int:
    import numpy as np

    n = 0
    for seg in Path(home, "cache", "answers").glob("bank_*/seg_*.npz"):
        with np.load(seg) as z:
            n += len(z["key"])
    return n


SECONDS = r"in ([\d.]+)s \(CPU ([\d.]+)s\)"


def _seconds(pattern: str, text: str) -> tuple[float, float]:
    """(wall, CPU) summed over the lines that match ``pattern`` followed by "in Xs (CPU Ys)"."""
    found = [(float(w), float(c)) for w, c in re.findall(pattern + r".*?" + SECONDS, text)]
    return sum(w for w, _ in found), sum(c for _, c in found)


def split(out: str, err: str, add: tuple[float, float], rank: tuple[float, float]) -> dict[str, float]:
    """Wall and CPU seconds per stage from add-model's report (stdout) and the style scorers' log (stderr)."""
    read = _seconds(r"judge default: answers read", out)
    style = _seconds(r"(?:style_scorer|register_basis): \d+ new answers", err)
    quality = _seconds(r"judge default: quality readings of \d+ pairs", out)
    parts = {"store": (add[0] - read[0] - quality[0], add[1] - read[1] - quality[1]),
             "embed": (read[0] - style[0], read[1] - style[1]), "style": style, "quality": quality, "rank": rank}
    return {f"{k}_{unit}": round(v[j], 1) for k, v in parts.items() for j, unit in enumerate(("s", "cpu_s"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="Comma-separated files of the shared outputs folder.")
    ap.add_argument("--outputs", default=str(ROOT.parent / "shared" / "data" / "alpaca_eval" / "outputs"))
    ap.add_argument("--keep", action="store_true", help="Leave the models on the board.")
    ap.add_argument("--json-out")
    args = ap.parse_args()

    runs = []
    for i, model in enumerate(m.strip() for m in args.models.split(",") if m.strip()):
        before = cached_answers(args.home)
        load = os.getloadavg()[0]
        t_add, out = usl(args.home, "data", "add-model", str(Path(args.outputs) / f"{model}.json.gz"))
        cpu_add, err = CPU["s"], ERR["s"]
        load_rank = os.getloadavg()[0]
        t_rank, board = usl(args.home, "rank", "--criteria", f"Answers that a busy reader can act on, #{time.time():.0f}{i}",
                            "--avoid", "Filler", "--format", "json")
        cpu_rank = CPU["s"]
        rows = {r["model"]: r for r in json.loads(board)["rows"]}
        grew = cached_answers(args.home) - before
        answered = next(int(line.split()[1]) for line in out.splitlines() if "queries answered" in line)
        parts = split(out, err, (t_add, cpu_add), (t_rank, cpu_rank))
        run = {"model": model, "add_s": round(t_add, 1), "add_cpu_s": round(cpu_add, 1),
               "total_s": round(t_add + t_rank, 1),
               "target_total_s": round(t_add + t_rank - parts["quality_s"], 1),
               "target_total_cpu_s": round(cpu_add + cpu_rank - parts["quality_cpu_s"], 1), **parts,
               "answers_added": answered, "answers_embedded": grew,
               "on_board": model in rows, "win_rate": rows.get(model, {}).get("win_rate"),
               "models_on_board": len(rows), "load_avg_1m": [round(load, 2), round(load_rank, 2)]}
        print(json.dumps(run), flush=True)
        # answers the bank holds already (the same text as another model's answer to the query) are not embedded again
        if not run["on_board"] or grew > answered:
            raise SystemExit(f"{model}: not on the board, or {grew} answers embedded for {answered} new ones")
        runs.append(run)
        if not args.keep:
            usl(args.home, "data", "remove-model", model)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k.endswith("_s")}
    summary = {**{f"median_{k}": v for k, v in med.items()}, "runs": runs, "target_s": 60, "cores": os.cpu_count()}
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
