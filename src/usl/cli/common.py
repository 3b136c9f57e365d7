"""What every command shares: the data directory, the store, and turning errors into exits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


from usl import paths
from usl.console import JUDGE_EPILOG, JUDGE_HELP, user_errors  # noqa: F401  (re-exported for the commands)


@dataclass
class State:
    home: Optional[str] = None

    def store(self):
        from usl.store import Store

        return Store(paths.db_path(self.home))
