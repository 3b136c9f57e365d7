"""Build and measure ``crm-factored`` (``usl.crm.factored``), the transformer CRM read once per answer.

    contexts --out DIR/contexts.json [--k 16]   fixed (query, answer, baseline) contexts the criteria
                                                are read in, drawn from the AlpacaEval *train* split
    vectors  --answers EXPORT --out V.npz       answer-side vectors of every (model, query) pair of an
                                                answers export, in full (2 passes a pair: use a GPU)
    bank     --answers EXPORT --vectors V.npz --out-dir DIR [--fit-basis 64]
                                                the shipped form: basis.npz (fitted when asked) and
                                                bank-<split>.npz (int8 codes keyed by pair digest)
    report   --answers EXPORT --scores S.npz [--judge crm-factored[:DIR]] [--contexts K]
                                                Kendall tau of the judge's boards with crm's scored
                                                boards (scripts/crm_fidelity.py score), per set

EXPORT and S.npz are ``scripts/crm_fidelity.py``'s answers export and scores. Accuracy on
preference files is ``usl eval --judge crm-factored --data FILE``.

Shipped with the CRM (``src/usl/weights/crm-minilm-span/factored``), made by::

    python scripts/crm_fidelity.py export --split board --out board.json.gz
    python scripts/factored_crm.py contexts --out DIR/contexts.json
    python scripts/factored_crm.py vectors --answers board.json.gz --out board_vectors.npz --batch-size 256  # GPU
    python scripts/factored_crm.py bank --answers board.json.gz --vectors board_vectors.npz --out-dir DIR --fit-basis 64
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
log = logging.getLogger("factored_crm")


def _crm(path: str | None, batch_size: int | None):
    from usl.crm.factored import FactoredCRM
    from usl.judges.registry import load_judge

    try:
        judge = load_judge(f"crm:{path}" if path else "crm", batch_size=batch_size)
        return FactoredCRM(judge.scorer)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--crm {path or '(shipped)'}: {e}") from None


def _pairs(data: dict) -> tuple[list[tuple[int, int]], list[tuple[str, str, str]]]:
    """(model, query) positions and (query, answer, baseline) texts of an export's answered
    pairs, as the leaderboard engine lists them (``Answers.pair_texts``)."""
    from crm_fidelity import _board

    answers = _board(data)
    grid = answers.grid(data["baseline"], tuple(data["models"]), tuple(q.id for q in answers.benchmark.queries))
    rows, cols = np.nonzero(grid.answered)
    return list(zip(rows.tolist(), cols.tolist())), list(zip(*answers.pair_texts(grid, data["baseline"])))


def contexts(args) -> None:
    from usl import paths
    from usl.data.alpaca_eval import load_alpaca_eval

    imp = load_alpaca_eval(Path(args.source) if args.source else paths.shared_data() / "alpaca_eval", split="train")
    b = imp.benchmark
    ans = {(r.query_id, r.model): r.text for r in imp.responses}
    rng = np.random.default_rng(args.seed)
    models = [m for m in b.models if m != b.baseline]
    out = []
    for qi in rng.permutation(len(b.queries)):
        q, m = b.queries[qi], models[rng.integers(len(models))]
        if (q.id, m) in ans and (q.id, b.baseline) in ans:
            cut = lambda t: t if not args.max_chars or len(t) <= args.max_chars else \
                t[:args.max_chars].rsplit(" ", 1)[0]
            out.append({"query": cut(q.text), "answer": cut(ans[q.id, m]), "baseline": cut(ans[q.id, b.baseline]),
                        "model": m, "query_id": q.id})
        if len(out) == args.k:
            break
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"source": "alpaca_eval, train split (no board query)", "seed": args.seed,
                                          "max_chars": args.max_chars, "contexts": out}, indent=1) + "\n")
    print(f"wrote {args.out}: {len(out)} contexts")


def vectors(args) -> None:
    from crm_fidelity import _load

    data = _load(args.answers)
    f = _crm(args.crm, args.batch_size)
    cells, pairs = _pairs(data)
    t, done = time.time(), [0]

    def progress(n: int) -> None:
        done[0] += n
        log.info("%d / %d pairs, %.0f s", done[0], len(pairs), time.time() - t)

    v = f.pair_vectors(pairs, progress=progress)
    np.savez(args.out, d_ab=v.d_ab.astype(np.float16), d_ba=v.d_ba.astype(np.float16), q=v.q.astype(np.float16),
             dl=v.dl.astype(np.float32), cells=np.array(cells, np.int32), version=np.array(f.version),
             query_ids=np.array([q["id"] for q in data["queries"]]))
    print(f"wrote {args.out}: {len(pairs)} pairs in {time.time() - t:.0f} s (CRM weights {f.version})")


def bank(args) -> None:
    from crm_fidelity import _load

    from usl.crm.factored import (
        Basis,
        PairBank,
        PairVectors,
        bank_version,
        pair_key,
        weights_version,
    )
    from usl.crm.inference import model_dir_of

    data = _load(args.answers)
    z = np.load(args.vectors)
    cells, pairs = _pairs(data)
    if z["cells"].tolist() != [list(c) for c in cells] or \
            z["query_ids"].tolist() != [str(q["id"]) for q in data["queries"]]:
        raise SystemExit(f"{args.vectors} was not made from {args.answers} (other pairs)")
    from usl.weights import shipped
    from usl.judges.crm import SHIPPED

    version = weights_version(model_dir_of(args.crm or shipped(SHIPPED)))
    if str(z["version"]) != version:
        raise SystemExit(f"{args.vectors} was read with CRM weights {z['version']}, not {version}")
    v = PairVectors(*(z[k].astype(np.float32) for k in ("d_ab", "d_ba", "q", "dl")))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.fit_basis:
        Basis.fit(v, args.fit_basis).save(out / "basis.npz")
    try:
        basis = Basis.load(out / "basis.npz")
    except ValueError as e:
        raise SystemExit(f"{e} (fit one with --fit-basis K)") from None
    b = PairBank.build([pair_key(*p) for p in pairs], [p[0] for p in pairs], v, basis, bank_version(version, basis))
    b.save(out / f"bank-{data['split']}.npz")
    print(f"wrote {out}/bank-{data['split']}.npz: {len(b)} pairs, {basis.components.shape[0]} dimensions")


def report(args) -> None:
    from crm_fidelity import _board, _board_scores, _load, _scored_sets, _scores

    from usl.judges.registry import load_judge
    from usl.leaderboard.stats import kendall_tau
    from usl.types import Criteria

    data = _load(args.answers)
    z = _scores(args.scores, data, args.answers)
    sets = _scored_sets(z, args.scores, args.sets)
    answers = _board(data)
    try:
        judge = load_judge(args.judge, contexts=args.contexts)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--judge {args.judge}: {e}") from None
    qids = [str(data["queries"][i]["id"]) for i in z["qidx"]]
    rows = []
    for si, name in enumerate(str(s) for s in z["sets"]):
        crit = Criteria(tuple(sets[name]["likes"]), tuple(sets[name]["avoid"]))
        t = time.time()
        F = _board_scores(answers, judge, crit, list(data["models"]), qids)
        secs = time.time() - t
        P = z["P"][si]
        ok = np.isfinite(P) & np.isfinite(F)
        lg = lambda x: np.log(np.clip(x, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(x, 1e-6, 1 - 1e-6))
        wr_f, wr_r = (np.nanmean(np.where(ok, x, np.nan), 1) for x in (F, P))
        rows.append({"set": name, "tau": round(kendall_tau(dict(enumerate(wr_f)), dict(enumerate(wr_r))), 3),
                     "pair_logit_r": round(float(np.corrcoef(lg(F[ok]), lg(P[ok]))[0, 1]), 3),
                     "win_rate_mae": round(float(np.mean(np.abs(wr_f - wr_r))), 4), "seconds": round(secs, 2)})
        print(json.dumps(rows[-1]), flush=True)
    taus = [r["tau"] for r in rows]
    print(json.dumps({"judge": judge.identity, "sets": len(rows), "queries": len(qids),
                      "median_tau": round(float(np.median(taus)), 3), "mean_tau": round(float(np.mean(taus)), 3),
                      "min_tau": min(taus), "sets_at_least_0.8": sum(t >= 0.8 for t in taus),
                      "median_pair_logit_r": round(float(np.median([r["pair_logit_r"] for r in rows])), 3)}))


def main(argv=None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("contexts")
    a.add_argument("--out", required=True)
    a.add_argument("--k", type=int, default=16)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--max-chars", type=int, default=0,
                   help="cut each text to this many characters (0: whole; the CRM's own truncation applies)")
    a.add_argument("--source", default=None, help="AlpacaEval folder (default: ../shared/data/alpaca_eval)")
    for name in ("vectors", "bank"):
        s = sub.add_parser(name)
        s.add_argument("--crm", default=None, help="CRM directory (default: the shipped crm)")
        s.add_argument("--answers", required=True)
    sub.choices["vectors"].add_argument("--out", required=True)
    sub.choices["vectors"].add_argument("--batch-size", type=int, default=None)
    sub.choices["bank"].add_argument("--vectors", required=True)
    sub.choices["bank"].add_argument("--out-dir", required=True)
    sub.choices["bank"].add_argument("--fit-basis", type=int, default=0, help="fit a basis of this many dimensions")
    r = sub.add_parser("report")
    r.add_argument("--answers", required=True)
    r.add_argument("--scores", required=True)
    r.add_argument("--sets", default="configs/criteria_sets.yaml")
    r.add_argument("--judge", default="crm-factored")
    r.add_argument("--contexts", type=int, default=None, help="contexts the criteria are read in (default: the judge's)")
    args = p.parse_args(argv)
    {"contexts": contexts, "vectors": vectors, "bank": bank, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
