"""One static-embedding table per test process, copied into each data directory that needs one.

The fast CRM embeds answers with a table distilled from MiniLM (``usl.fast.static_embed``), built on
first use in a data directory: 20 s on an idle 2-core CPU, minutes on a busy one. Tests that run the
shipped default judge in fresh data directories build it once here and copy it in.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

_built: Path | None = None


def seed_static_table(home: str | Path) -> None:
    global _built
    from usl.fast.static_embed import _table_path, build_table

    if _built is None:
        path = _table_path(Path(tempfile.mkdtemp(prefix="usl-static-")))
        np.save(path, build_table(show_progress=False))
        _built = path
    dest = _table_path(Path(home) / "cache" / "static")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_built, dest)
