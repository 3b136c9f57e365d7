"""The one SQLite file (WAL mode) holding benchmarks, topics and judgments.

Every write that belongs together goes through ``Store.transaction()``: an import that fails
half-way rolls back and leaves the file as it was.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from importlib import resources
from pathlib import Path
from typing import Iterator


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # executescript() commits any open transaction first, so the script carries its own.
        schema = resources.files("usl.store").joinpath("schema.sql").read_text()
        self.con.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")

    @property
    def con(self) -> sqlite3.Connection:
        """One connection per thread (sqlite3 connections must not cross threads)."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                  check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
        return con

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        else:
            con.execute("COMMIT")

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
