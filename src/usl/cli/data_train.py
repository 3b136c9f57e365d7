"""`usl data ...` commands that build training data (placeholder until that work lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
