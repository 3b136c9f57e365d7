"""Files written so that a reader never sees one half-written.

Caches are shared by processes (``usl serve`` beside a ``usl eval``) and threads, and a run can be
killed mid-write. Each writer writes a temporary file of its own in the target's folder and renames
it over the target, which is atomic: a reader sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def savez(path: str | Path, *, compress: bool = False, **arrays: np.ndarray) -> None:
    """``np.savez`` (``np.savez_compressed`` with ``compress``) to ``path``, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npz")
    os.close(fd)
    try:
        (np.savez_compressed if compress else np.savez)(tmp, **arrays)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a cache is read like any other file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
