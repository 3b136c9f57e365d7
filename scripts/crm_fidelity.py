"""Fidelity of the fast path to the full pairwise CRM.

    export (here): AlpacaEval answers of one split -> a compact .json.gz that travels to a GPU box
        python scripts/crm_fidelity.py export --split board --out .carry/fid/board.json.gz
    score (GPU): the full CRM's P(model beats baseline), both orders averaged, per criteria set; saved
        after every set, and a rerun with the same --out resumes where an interrupted one stopped
        python scripts/crm_fidelity.py score --answers board.json.gz --sets configs/criteria_sets.yaml \
            --judge crm:runs/pairwise --n-queries 100 --out $OUT/full_board.npz
    report (here): fast-path leaderboards (or any judge's: --fast length, crm:DIR) against the full
        CRM's, Kendall tau per criteria set; with
        each board's tau with the models' mean answer length (how far a set is read as a length dial)
        and the full CRM's split-half tau (how reproducible its own board is at half the queries)
        python scripts/crm_fidelity.py report --answers board.json.gz --scores full_board.npz
        (--refine-queries 10,20,40: also the refined board's tau after that many queries judged by
        the full CRM, the rest estimated from the fast path, as `usl rank --refine` does)

    refine-live (here): progressive refinement for real (usl rank --refine): the reference judges
        --queries queries per set on this machine; seconds, and the refined board's tau with the
        reference's whole board from the scores file
        python scripts/crm_fidelity.py refine-live --answers board.json.gz --scores full_board.npz \
            --names creative,formal --queries 20 --home $USL_HOME
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import yaml

log = logging.getLogger("crm_fidelity")


def export(args) -> None:
    from usl import paths
    from usl.data.alpaca_eval import load_alpaca_eval

    src = Path(args.source) if args.source else paths.shared_data() / "alpaca_eval"
    imp = load_alpaca_eval(src, split=args.split)
    b = imp.benchmark
    ans = {(r.query_id, r.model): r.text for r in imp.responses}
    out = {"split": args.split, "baseline": b.baseline, "models": [m for m in b.models if m != b.baseline],
           "queries": [{"id": q.id, "text": q.text} for q in b.queries],
           "answers": {m: [ans.get((q.id, m)) for q in b.queries] for m in b.models}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        json.dump(out, f)
    print(f"wrote {args.out}: {len(out['queries'])} queries, {len(b.models)} models")


def _load(path: str) -> dict:
    try:
        with gzip.open(path, "rt") as f:
            data = json.load(f)
    except (OSError, EOFError, ValueError) as e:   # missing, not gzip, not JSON
        raise SystemExit(f"{path}: cannot read an answers export ({e}); make one with "
                         "`python scripts/crm_fidelity.py export`") from None
    missing = [k for k in ("split", "baseline", "models", "queries", "answers") if k not in data]
    if missing:
        raise SystemExit(f"{path}: not an answers export (no field {', '.join(missing)})")
    return data


def _scores(path: str, data: dict, answers_path: str):
    """A scores file, checked against the answers export it is read with: the same models, and the
    same queries at the scored positions (files from before ``query_ids`` was saved: in range)."""
    try:
        z = np.load(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read a scores file ({e})") from None
    absent = [str(m) for m in z["models"] if str(m) not in data["answers"]]
    qidx = z["qidx"]
    if absent or (len(qidx) and qidx.max() >= len(data["queries"])) or (
            "query_ids" in z.files and [str(data["queries"][i]["id"]) for i in qidx] != z["query_ids"].tolist()):
        raise SystemExit(f"{path} was not scored from {answers_path}" +
                         (f" (models it lacks: {', '.join(absent)})" if absent else " (other queries)") +
                         "; pass the --answers file it was scored with")
    if "query_ids" not in z.files:
        log.warning("%s predates saved query ids: only checked that its models and query positions fit %s",
                    path, answers_path)
    return z


def _sets(path: str) -> list[dict]:
    sets = yaml.safe_load(Path(path).read_text())["sets"]
    return [{"name": s["name"], "likes": list(s.get("likes", [])), "avoid": list(s.get("avoid", []))} for s in sets]


def _board(data: dict):
    """The exported answers as the leaderboard engine's ``Answers``, so boards are scored by the
    same job code (``usl.leaderboard.jobs.score``: matrix path or both orders) as the app's."""
    from usl.leaderboard.answers import Answers
    from usl.types import Benchmark, Query

    queries = tuple(Query(str(q["id"]), q["text"]) for q in data["queries"])
    bench = Benchmark(f"export-{data['split']}", queries, tuple(data["models"]) + (data["baseline"],),
                      data["baseline"])
    return Answers(bench, {(q.id, m): t for m, ts in data["answers"].items() for q, t in zip(queries, ts)
                           if t is not None})


def _board_scores(answers, judge, crit, models: list[str], query_ids: list[str]) -> np.ndarray:
    """(models, queries) P(model beats baseline), both orders averaged; NaN where either is missing."""
    from usl.leaderboard.jobs import JobConfig, ScoringJob
    from usl.leaderboard.jobs import score as score_job

    job = ScoringJob(crit, answers.benchmark.baseline, tuple(models), tuple(query_ids))
    # one judge call per set, as many requests as it takes: the judge batches on its own device
    return score_job(answers, judge, job, config=JobConfig(batch_size=1 << 30))


def _scored_sets(z, scores: str, sets_path: str) -> dict[str, dict]:
    """The criteria of every set a scores file holds, from ``sets_path``; a set the file scored
    but the YAML lacks fails here, before anything is written."""
    sets = {s["name"]: s for s in _sets(sets_path)}
    missing = [str(n) for n in z["sets"] if str(n) not in sets]
    if missing:
        raise SystemExit(f"{scores} scored sets that {sets_path} does not define: {', '.join(missing)}; "
                         "pass the --sets file it was scored with")
    return sets


def _complete(z) -> np.ndarray:
    """Which sets a scores file holds; files from before per-set saving hold all of theirs."""
    return z["complete"] if "complete" in z.files else np.ones(len(z["sets"]), bool)


def _subset(n_total: int, n: int | None, seed: int) -> np.ndarray:
    order = np.random.default_rng(seed).permutation(n_total)
    return np.sort(order[:n] if n else order)


def score(args) -> None:
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    data, sets = _load(args.answers), _sets(args.sets)
    try:
        judge = load_judge(args.judge, device=args.device, batch_size=args.batch_size)
    except ValueError as e:
        raise SystemExit(f"--judge: {e}") from None
    qidx = _subset(len(data["queries"]), args.n_queries, args.seed)
    models = data["models"]
    answers, qids = _board(data), [str(data["queries"][qi]["id"]) for qi in qidx]
    names = np.array([s["name"] for s in sets])
    P = np.full((len(sets), len(models), len(qidx)), np.nan, np.float32)
    complete = np.zeros(len(sets), bool)
    out = Path(args.out)
    if out.exists():  # resume: the sets an interrupted run finished are kept, if it scored the same thing
        z = np.load(out)
        same = (str(z["judge"]) == judge.identity and np.array_equal(z["qidx"], qidx)
                and np.array_equal(z["sets"], names) and list(z["models"]) == models
                and ("query_ids" not in z.files or z["query_ids"].tolist() == qids))
        if not same:
            raise SystemExit(f"{out} holds scores of another judge, query subset, set list or model list; "
                             "move it away or name another --out")
        P, complete = z["P"], _complete(z)
        log.info("resuming %s: %d of %d sets already scored", out, int(complete.sum()), len(sets))

    def save() -> None:  # after every set, atomically: a killed run keeps what it finished
        tmp = out.with_name(out.name + ".tmp.npz")
        np.savez(tmp, P=P, qidx=qidx, query_ids=np.array(qids), sets=names, models=np.array(models),
                 judge=np.array(judge.identity), complete=complete)
        tmp.replace(out)

    t0, done = time.time(), 0
    for si, s in enumerate(sets):
        if complete[si]:
            continue
        crit = Criteria(tuple(s["likes"]), tuple(s["avoid"]))
        P[si] = _board_scores(answers, judge, crit, models, qids)
        cells = np.argwhere(~np.isnan(P[si]))
        done += 2 * len(cells)
        complete[si] = True
        save()
        log.info("set %d/%d %s: %d judgments, %.0f/s", si + 1, len(sets), s["name"], 2 * len(cells),
                 done / (time.time() - t0))
    save()
    print(f"wrote {args.out} in {time.time() - t0:.0f} s")


def _split_half_tau(P: np.ndarray, draws: int = 20, seed: int = 0) -> float | None:
    """Mean Kendall tau between the boards of two random halves of the queries: the reference
    board's own reproducibility at half the queries (a ceiling on what any fast path can match)."""
    from scipy.stats import kendalltau

    rng, n = np.random.default_rng(seed), P.shape[1]
    if n < 4:   # too few queries to split
        return None
    taus = []
    for _ in range(draws):
        perm = rng.permutation(n)
        taus.append(kendalltau(np.nanmean(P[:, perm[: n // 2]], 1), np.nanmean(P[:, perm[n // 2:]], 1)).statistic)
    return round(float(np.mean(taus)), 3)


def _refined_taus(boards: list[tuple[np.ndarray, np.ndarray]], ks: list[int], draws: int) -> list[dict]:
    """Progressive refinement (``usl.leaderboard.refine``) replayed on scored boards: the reference's
    scores of ``k`` random queries plus the fast judge's of all, against the reference's whole
    board; per ``k``, the median and mean over sets of the tau averaged over ``draws`` draws."""
    from scipy.stats import kendalltau

    from usl.leaderboard.refine import refine

    out = []
    for k in ks:
        per_set, per_set_unshrunk, per_set_plain, better, covered = [], [], [], 0, []
        for si, (fast, full) in enumerate(boards):
            rng, wf = np.random.default_rng(si), np.nanmean(full, 1)
            taus, unshrunk, plain = [], [], []
            for _ in range(draws):
                seen = np.full(full.shape, np.nan)
                cols = rng.permutation(full.shape[1])[:k]
                seen[:, cols] = full[:, cols]
                est = refine(fast, seen).summary
                taus.append(kendalltau(est.win_rate, wf).statistic)
                covered.append(np.mean((est.ci[:, 0] <= 100 * wf) & (100 * wf <= est.ci[:, 1])))
                unshrunk.append(kendalltau(refine(fast, seen, shrink=False).summary.win_rate, wf).statistic)
                plain.append(kendalltau(np.nanmean(full[:, cols], 1), wf).statistic)
            per_set.append(float(np.mean(taus)))
            per_set_unshrunk.append(float(np.mean(unshrunk)))
            per_set_plain.append(float(np.mean(plain)))
            better += per_set[-1] > kendalltau(np.nanmean(fast, 1), wf).statistic
        out.append({"queries_judged": k, "median_tau": round(float(np.median(per_set)), 3),
                    "mean_tau": round(float(np.mean(per_set)), 3), "min_tau": round(float(np.min(per_set)), 3),
                    "sets_closer_than_fast": f"{int(better)} of {len(boards)}",
                    # share of models whose 95% CI holds the reference's whole-board win rate
                    "ci_coverage": round(float(np.mean(covered)), 3),
                    # without the shrinkage of the corrections, and without the fast judge at all
                    "unshrunk_median_tau": round(float(np.median(per_set_unshrunk)), 3),
                    "judged_only_median_tau": round(float(np.median(per_set_plain)), 3)})
    return out


def _median_or_none(values: list[float | None]) -> float | None:
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return round(float(np.median(finite)), 3) if finite else None


def report(args) -> None:
    from scipy.stats import kendalltau

    from usl.judges.registry import load_judge
    from usl.types import Criteria

    data = _load(args.answers)
    z = _scores(args.scores, data, args.answers)
    sets = _scored_sets(z, args.scores, args.sets)
    try:
        judge = load_judge(args.fast)
    except ValueError as e:
        raise SystemExit(f"--fast: {e}") from None
    models, qidx = list(z["models"]), z["qidx"]
    rows, boards = [], []
    done = _complete(z)
    answers, qids = _board(data), [str(data["queries"][qi]["id"]) for qi in qidx]
    words = np.nanmean(answers.lengths(models, qids), 1)   # each model's mean answer length
    for si, name in enumerate(z["sets"]):
        if not done[si]:
            log.warning("set %s was not scored (interrupted run): left out", name)
            continue
        s = sets[str(name)]
        crit = Criteria(tuple(s["likes"]), tuple(s["avoid"]))
        full = z["P"][si]
        fast = _board_scores(answers, judge, crit, models, qids)
        boards.append((fast, full))
        wf, wq = np.nanmean(full, 1), np.nanmean(fast, 1)
        tau = kendalltau(wf, wq).statistic
        agree = np.nanmean((full > 0.5) == (fast > 0.5))
        rows.append({"set": str(name), "kendall_tau": round(float(tau), 3), "pair_agreement": round(float(agree), 3),
                     # how far each board is a length dial, and how reproducible the reference itself is
                     "full_length_tau": round(float(kendalltau(wf, words).statistic), 3),
                     "fast_length_tau": round(float(kendalltau(wq, words).statistic), 3),
                     "full_split_half_tau": _split_half_tau(full)})
    taus = [r["kendall_tau"] for r in rows]
    refined = _refined_taus(boards, args.refine_queries, args.refine_draws) if args.refine_queries else None
    out = {"fast": judge.identity, "full": str(z["judge"]), "n_sets": len(rows), "n_queries": int(len(qidx)),
           "mean_tau": round(float(np.mean(taus)), 3), "median_tau": round(float(np.median(taus)), 3),
           "min_tau": round(float(np.min(taus)), 3),
           "median_full_split_half_tau": _median_or_none([r["full_split_half_tau"] for r in rows]),
           "sets": rows}
    if refined is not None:
        out["refined"] = refined
    print(json.dumps(out, indent=2))


def refine_live(args) -> None:
    """``LeaderboardService.refine`` for real, on this machine: the reference judges ``--queries``
    queries of each named set (fixed refinement order; cached ones are not judged again), and the
    refined board is compared with the reference's whole board from a scores file."""
    from usl import paths
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.stats import kendall_tau
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.types import Criteria

    data = _load(args.answers)
    z = _scores(args.scores, data, args.answers)
    sets = _scored_sets(z, args.scores, args.sets)
    names = [str(n) for n in z["sets"]]
    unknown = [n for n in args.names if n not in names]
    if unknown:
        raise SystemExit(f"{args.scores} holds no set {', '.join(unknown)}; it holds {', '.join(names)}")
    svc = LeaderboardService(Store(paths.db_path(args.home)), home=args.home)
    try:
        svc.judge(args.reference)
    except (ValueError, OSError) as e:
        raise SystemExit(f"--reference: {e}") from None
    full_models = [str(m) for m in z["models"]]
    rows = []
    for name in args.names:
        s = sets[name]
        spec = LeaderboardSpec(criteria=Criteria(tuple(s["likes"]), tuple(s["avoid"])), benchmark=args.benchmark,
                               per_criterion=False)
        try:
            fast = svc.rank(spec)
            before = svc.refine(spec, args.reference).spec["refinement"]["queries_judged"]
        except (ValueError, LookupError, OSError) as e:     # DataError is a ValueError
            raise SystemExit(f"--home {args.home}: {e}") from None
        t0 = time.perf_counter()
        board = svc.refine(spec, args.reference, queries=args.queries)
        secs = time.perf_counter() - t0
        r = board.spec["refinement"]
        full = dict(zip(full_models, np.nanmean(z["P"][names.index(name)], 1)))

        def tau(lb) -> float:
            return round(kendall_tau({row.model: row.win_rate for row in lb.rows}, full), 3)

        judged_now = r["queries_judged"] - before
        rows.append({"set": name, "queries_judged": r["queries_judged"], "judged_now": judged_now,
                     "seconds": round(secs, 1),
                     "seconds_per_query": round(secs / judged_now, 2) if judged_now else None,
                     "fast_tau": tau(fast), "refined_tau": tau(board), "slope": r["slope"]})
        log.info("%s", rows[-1])
    print(json.dumps({"reference": args.reference, "full": str(z["judge"]), "sets": rows,
                      "median_fast_tau": _median_or_none([r["fast_tau"] for r in rows]),
                      "median_refined_tau": _median_or_none([r["refined_tau"] for r in rows])}, indent=2))


def main(argv=None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--split", default="board", choices=["board", "train"])
    e.add_argument("--source", default=None)
    e.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("--answers", required=True)
    s.add_argument("--sets", default="configs/criteria_sets.yaml")
    s.add_argument("--judge", required=True)
    s.add_argument("--device", default=None)
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--n-queries", type=int, default=None)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--answers", required=True)
    r.add_argument("--scores", required=True)
    r.add_argument("--sets", default="configs/criteria_sets.yaml")
    r.add_argument("--fast", default="default")
    r.add_argument("--refine-queries", type=lambda v: [int(x) for x in v.split(",")], default=None,
                   help="comma-separated query counts, e.g. 10,20,40: also replay progressive refinement with "
                        "the reference's scores of that many random queries (usl rank --refine)")
    r.add_argument("--refine-draws", type=int, default=10, help="random query subsets per count")
    lv = sub.add_parser("refine-live")
    lv.add_argument("--answers", required=True)
    lv.add_argument("--scores", required=True)
    lv.add_argument("--sets", default="configs/criteria_sets.yaml")
    lv.add_argument("--names", type=lambda v: [x for x in v.split(",") if x], required=True,
                    help="comma-separated set names of the scores file")
    lv.add_argument("--home", default=None, help="usl data directory holding the benchmark (default: USL_HOME)")
    lv.add_argument("--benchmark", default="alpaca_eval")
    lv.add_argument("--reference", default="crm")
    lv.add_argument("--queries", type=int, default=20)
    args = ap.parse_args(argv)
    {"export": export, "score": score, "report": report,
     "refine-live": refine_live}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
