"""The server process's C heap (glibc's malloc; on other C libraries both calls do nothing).

A server runs many threads (uvicorn's, the ranking workers, the warm-up, PyTorch's and ONNX Runtime's), and
glibc gives threads heaps of their own, up to eight a core, each keeping the memory its thread freed. With the
readers of new answers loaded at start, that memory was about 190 MB of a first start's peak
(``scripts/bench_first_start.py``: 1.70 GB with glibc's default, 1.51 GB with two heaps). And glibc raises
its threshold for serving a block from its own pages rather than from the system each time a large block is
freed, up to 32 MB, so that a request's large temporaries (a board's matrices, a transformer's activations)
then stay in the heap after it: a first ``crm-factored`` board of 20 new criteria kept 162 MB that way,
63 MB with the threshold fixed at 256 KiB (``scripts/load_server.py memory``).

``limit_heaps`` caps the heaps at two and fixes that threshold, each unless the environment sets it
(``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``); ``give_back_freed`` returns freed pages to the system
(``malloc_trim``) once a large piece of work is done.
"""

from __future__ import annotations

import ctypes
import gc
import os

HEAPS = 2                 # glibc's M_ARENA_MAX for a server: its threads mostly wait on the GIL anyway
LARGE = 256 * 1024        # glibc's M_MMAP_THRESHOLD, fixed: larger blocks come from the system and go back to it
_M_ARENA_MAX = -8         # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def limit_heaps(n: int = HEAPS, large: int = LARGE) -> dict[str, bool]:
    """Cap glibc's per-thread heaps at ``n`` for the threads started from now on (call it before starting
    any), and serve blocks over ``large`` bytes from the system; a setting in the environment wins
    (``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``). Which of the two this call set."""
    libc = _libc()
    ok = libc is not None and hasattr(libc, "mallopt")
    return {"heaps": ok and not os.environ.get("MALLOC_ARENA_MAX") and bool(libc.mallopt(_M_ARENA_MAX, n)),
            "large": ok and not os.environ.get("MALLOC_MMAP_THRESHOLD_")
            and bool(libc.mallopt(_M_MMAP_THRESHOLD, large))}


def give_back_freed() -> None:
    """Return the heap's freed pages to the system (after a collection), so that what loads next does not
    stack on memory the process no longer uses."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
