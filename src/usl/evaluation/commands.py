"""The ``eval`` command, as a plain typer function.

It lives here, not in ``usl.cli``, so that ``python -m usl.evaluation`` can serve it on a machine with
only the training stack installed (``usl.cli`` imports every command group, the server's included).
``usl.cli.evaluate`` registers it on the main app.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from usl.console import JUDGE_HELP, user_errors


def _home(ctx: typer.Context) -> Optional[str]:
    return getattr(ctx.obj, "home", None)


def eval_command(ctx: typer.Context,
                 judge: str = typer.Option("default", "--judge", "-j", help=JUDGE_HELP),
                 data: List[str] = typer.Option(..., "--data", "-d", help="Paper-format JSONL (repeatable)."),
                 limit: int = typer.Option(0, min=0, help="Judge at most N samples of each file (0 = all): whole groups, "
                                           "seeded random, in file order."),
                 batch_size: int = typer.Option(16, min=1, help="Requests per judge call."),
                 as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
                 out: str = typer.Option("", help="Also write the JSON report to this file."),
                 predictions: str = typer.Option("", help="Also write one JSON line per sample to this file: "
                                                 "the judge's P(A) in each order, its label, and whether it "
                                                 "was right (for error analysis).")) -> None:
    """Accuracy, agreement incl. ties, swap and criteria-flip consistency; per file and per source."""
    from usl.evaluation.report import evaluate
    from usl.judges.registry import load_judge

    with user_errors():
        # where the results go is checked before anything is judged: a long run does not fail at its end
        report_file, predictions_file = _output_file("--out", out), _output_file("--predictions", predictions)
        home = _home(ctx)
        j = load_judge(judge, home=home)
        report = evaluate(j, data, limit=limit, batch_size=batch_size)
        d = report.to_dict()
        if report_file:
            report_file.write_text(json.dumps(d, indent=2))
        if predictions_file:
            predictions_file.write_text("".join(json.dumps(r) + "\n" for r in report.predictions()))
        typer.echo(json.dumps(d, indent=2) if as_json else report.to_text())


def _output_file(option: str, path: str) -> Path | None:
    """``path`` ready to be written (its folder made), None when not asked for; a folder in its place, or
    a folder that cannot be made, is a ValueError naming ``option``."""
    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{option} {path}: is a folder; name a file")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot make its folder ({e})") from e
    return p


def simulate_votes_command(
        ctx: typer.Context,
        benchmark: str = typer.Option("alpaca_eval", "--benchmark", help="The board whose pairs board users vote on."),
        seeds: int = typer.Option(5, "--seeds", help="Repeats (each: a split of the queries, a draw of the votes)."),
        pandalm_pairs: int = typer.Option(0, "--pandalm", help="PandaLM pairs (its 3 annotators as users); 0: none."),
        hh_pairs: int = typer.Option(0, "--hh", help="hh-rlhf helpful-base pairs (one user); 0: none."),
        label_pairs: int = typer.Option(0, "--quality-label", help="AlpacaEval GPT-4-Turbo labelled pairs; 0: none."),
        strength: Optional[float] = typer.Option(None, "--strength", help="The calibration's pull toward the "
                                                 "shipped judge (default: CalibrationConfig's)."),
        out: str = typer.Option("", "--out", help="Also write the curves as JSON to this file.")) -> None:
    """Held-out agreement of the calibrated default judge after 0, 10, 20 and 50 votes of simulated users,
    random and chosen pairs (docs/calibration.md). Pairs outside the board cost the quality reader two
    passes each the first time (about 1.6 pairs a second on 2 busy cores)."""
    import numpy as np

    from usl import paths
    from usl.evaluation.simulated_users import BOARD_USERS, CHECKPOINTS, SimUser, hh_helpful, label_users, pandalm, \
        quality_labels, simulate
    from usl.judges import calibration as cal
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store.db import Store

    home = getattr(ctx.obj, "home", None)
    svc = LeaderboardService(Store(paths.db_path(home)), home=home, auto_topics=False)
    spec = LeaderboardSpec(benchmark=benchmark)
    q, a, b = svc.pair_texts(spec)
    judge = svc.prepare(benchmark, "default", quality=False)
    layout = cal.Layout()
    runs: list[tuple[SimUser, cal.Terms, list[str], object]] = []
    for user in BOARD_USERS:
        runs.append((user, cal.judge_terms(judge, user.criteria, q, a, b, layout), q, None))
    shared = paths.shared_data()
    for name, n, load, where in (("pandalm", pandalm_pairs, pandalm, "human/pandalm_testset_v1.json.gz"),
                                 ("hh", hh_pairs, hh_helpful, "human/hh_rlhf_helpful_base_test.dsp.json.gz"),
                                 ("quality-label", label_pairs, quality_labels, "alpaca_eval")):
        if n:
            pairs = load(shared / where, n, np.random.default_rng(0))
            for user, y in label_users(name, pairs):
                terms = cal.judge_terms(judge, user.criteria, pairs.queries, pairs.first, pairs.second, layout)
                runs.append((user, terms, pairs.queries, y))
    curves = []
    print(f"{'user':58} {'pairs':7} " + " ".join(f"{n:>5}" for n in CHECKPOINTS) + "  held-out")
    for user, terms, groups, y in runs:
        for c in simulate(user, terms, groups, seeds=seeds, strength=strength, labels=y):
            curves.append(c)
            print(f"{c.user[:58]:58} {c.picking:7} " + " ".join(f"{100 * m:5.1f}" for m in c.mean)
                  + f"  {c.held_out}", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump([c.__dict__ for c in curves], f, indent=1)
