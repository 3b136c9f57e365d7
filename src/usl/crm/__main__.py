"""``python -m usl.crm {train,eval,train-style}``: the CRM commands without the rest of the CLI.

For machines that have torch/transformers/peft but not the server stack (a rented GPU box)::

    PYTHONPATH=src python3 -m usl.crm train --config configs/crm_smollm2_pairwise.yaml --set backbone=/root/bb
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Optional

import typer

from usl.crm.commands import eval_command, train_command, train_style_command

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _root(ctx: typer.Context, home: Optional[str] = typer.Option(None, "--home", envvar="USL_HOME",
                                                                  help="Data directory (caches).")) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = SimpleNamespace(home=home)


app.command("train")(train_command)
app.command("eval")(eval_command)
app.command("train-style")(train_style_command)

if __name__ == "__main__":
    app()
