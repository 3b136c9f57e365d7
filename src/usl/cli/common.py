"""What every command shares: the data directory, the store, turning errors into exits, and asking
before work that sends paid requests to an LLM."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Iterator, Optional

import typer

from usl import paths
from usl.console import JUDGE_HELP, user_errors  # noqa: F401  (re-exported for the commands)
from usl.judges.registry import SPEC_LINES

# The epilog that JUDGE_HELP points to: the spec forms stand as a block click never re-wraps ("\b"), whole at
# 80 columns.
JUDGE_EPILOG = "\b\nJudge specs (--judge):\n" + "\n".join("  " + line for line in SPEC_LINES)


@dataclass
class State:
    home: Optional[str] = None

    def store(self):
        from usl.store import Store

        return Store(paths.db_path(self.home))


def confirm_spend(what: str, yes: bool) -> None:
    """Ask before sending ``what`` (e.g. "41,504 requests, ~45.7M prompt tokens ... to URL"): ``--yes``
    answers for a script; without it, a stdin that is no terminal is refused (nobody to ask), and a
    "no" ends the command with status 1, nothing sent."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise ValueError(f"this would send {what}; add --yes to send them (stdin is not a terminal: nobody to ask)")
    if not typer.confirm(f"Send {what}?", default=False):
        typer.echo("error: nothing sent", err=True)
        sys.exit(1)


@contextlib.contextmanager
def llm_failures(resume: str) -> Iterator[None]:
    """A remote judge that fails (unreachable, an HTTP error) ends the command in one line naming the
    endpoint and the status (``LLMJudgeError``'s message, redacted), then ``resume``; exit code 2."""
    from usl.judges.llm_api import LLMJudgeError

    try:
        yield
    except LLMJudgeError as e:
        typer.echo(f"error: {e} ({resume})", err=True)
        sys.exit(2)
