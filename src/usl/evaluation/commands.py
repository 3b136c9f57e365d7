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
