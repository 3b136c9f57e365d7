"""How commands report expected failures. Outside ``usl.cli`` so that ``python -m usl.crm`` (which
must not import the whole CLI, the server included) shares the same contract."""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

import typer

from usl.types import DataError


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn expected failures (bad data, bad arguments, a file that cannot be read or written: a
    full disk, a file where a folder should be) into one clear line and exit code 2."""
    try:
        yield
    except (DataError, OSError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
