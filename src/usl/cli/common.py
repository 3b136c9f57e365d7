"""What every command shares: the data directory, the store, and turning errors into exits."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Iterator, Optional

import typer

from usl import paths
from usl.types import DataError


@dataclass
class State:
    home: Optional[str] = None

    def store(self):
        from usl.store import Store

        return Store(paths.db_path(self.home))


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn expected failures (bad data, bad arguments) into one clear line and exit code 2."""
    try:
        yield
    except (DataError, FileNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
