"""`usl eval`: measure a judge against labelled preference files."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from usl.cli.common import JUDGE_EPILOG
    from usl.evaluation.commands import eval_command, simulate_votes_command

    app.command("eval", epilog=JUDGE_EPILOG)(eval_command)
    app.command("simulate-votes")(simulate_votes_command)
