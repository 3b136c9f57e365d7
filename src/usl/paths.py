"""Where things live: the user's data directory (store, caches) and the public data sources.

Resolution order for the data directory: explicit argument (the CLI's ``--home``), then the
``USL_HOME`` environment variable, then ``$XDG_DATA_HOME/usl`` (``~/.local/share/usl``).
These only choose *where* results live, never what they are.
"""

from __future__ import annotations

import os
from pathlib import Path

DB_NAME = "usl.sqlite"


def home(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        root = Path(explicit)
    elif os.environ.get("USL_HOME"):
        root = Path(os.environ["USL_HOME"])
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        root = Path(xdg) / "usl"
    if root.exists() and not root.is_dir():
        raise ValueError(f"data home {root}: is a file, not a folder (--home or USL_HOME)")
    root.mkdir(parents=True, exist_ok=True)
    return root


def db_path(explicit_home: str | os.PathLike | None = None) -> Path:
    return home(explicit_home) / DB_NAME


def cache_dir(explicit_home: str | os.PathLike | None = None, *parts: str) -> Path:
    d = home(explicit_home).joinpath("cache", *parts)
    d.mkdir(parents=True, exist_ok=True)
    return d


def shared_data(explicit: str | os.PathLike | None = None) -> Path | None:
    """The local copy of the public data (``../shared/data`` beside a checkout), if any.

    Looks at the explicit path, ``USL_SHARED_DATA``, then ``../shared/data`` from the working
    directory and from the repository that holds this file.
    """
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    if os.environ.get("USL_SHARED_DATA"):
        candidates.append(Path(os.environ["USL_SHARED_DATA"]))
    candidates.append(Path.cwd() / ".." / "shared" / "data")
    repo = Path(__file__).resolve().parents[2]  # src/usl/paths.py -> repo root
    candidates.append(repo.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None
