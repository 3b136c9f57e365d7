"""The ``usl`` command. Each command group lives in its own module and registers itself here.

Only the CLI configures logging handlers; the library logs through ``logging.getLogger``.
"""

from __future__ import annotations

import logging
from typing import Optional

import typer

from usl.cli import data, evaluate, fast, quality, rank, serve, topics, train
from usl.cli.common import State

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="usl: rank LLMs by how well they answer the way YOU like.")


@app.callback()
def _root(ctx: typer.Context,
          home: Optional[str] = typer.Option(None, "--home", envvar="USL_HOME",
                                             help="Data directory (store, caches). "
                                                  "Default: $XDG_DATA_HOME/usl or ~/.local/share/usl."),
          verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    # httpx logs every request's full URL at INFO; a judge's base_url may hold a key in its query.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)
    ctx.obj = State(home=home)


app.add_typer(data.app, name="data", help="Import benchmarks, show stats, build training data.")
app.add_typer(topics.app, name="topics", help="Cluster queries into named topics.")
app.add_typer(quality.app, name="quality", help="The default judge's quality reading: fit its gate, read pairs.")
for module in (train, fast, evaluate, rank, serve):
    module.register(app)


def main() -> None:
    app()
