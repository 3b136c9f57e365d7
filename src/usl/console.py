"""How commands report expected failures, and the app that serves a package's commands on its own.

Outside ``usl.cli`` so that ``python -m usl.crm``, ``python -m usl.fast`` and ``python -m usl.evaluation``
(which must not import the whole CLI, the server included) share the same contract."""

from __future__ import annotations

import contextlib
import logging
import sys
from types import SimpleNamespace
from typing import Callable, Iterator, Optional

import typer

from usl.types import DataError

# What every command with --judge says of it: the option's help points to the epilog (``usl.cli.common``)
JUDGE_HELP = "Judge spec (the forms are listed at the end)."


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn expected failures (bad data, bad arguments, a file that cannot be read or written: a
    full disk, a file where a folder should be) into one clear line and exit code 2."""
    try:
        yield
    except (DataError, OSError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)


def command_app(commands: dict[str, Callable[..., None]]) -> typer.Typer:
    """The app of ``python -m <package>``: ``commands`` (name -> typer function) under the ``--home``
    option, for a machine that has the training stack but not the server's (a rented GPU box)."""
    app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root(ctx: typer.Context, home: Optional[str] = typer.Option(None, "--home", envvar="USL_HOME",
                                                                      help="Data directory (caches).")) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        ctx.obj = SimpleNamespace(home=home)

    for name, command in commands.items():
        app.command(name)(command)
    return app
