"""Top-level `usl` command(s) of this module."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
