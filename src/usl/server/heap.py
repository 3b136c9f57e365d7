"""The server process's C heap (glibc's malloc; on other C libraries both calls do nothing).

A server runs many threads (uvicorn's, the ranking workers, the warm-up, PyTorch's and ONNX Runtime's), and
glibc gives threads heaps of their own, up to eight a core, each keeping the memory its thread freed. With the
readers of new answers loaded at start, that memory was about 190 MB of a first start's peak
(``scripts/bench_first_start.py``: 1.70 GB with glibc's default, 1.51 GB with two heaps). ``limit_heaps``
caps the heaps at two unless ``MALLOC_ARENA_MAX`` says otherwise; ``give_back_freed`` returns freed pages
to the system (``malloc_trim``) once a large piece of work is done.
"""

from __future__ import annotations

import ctypes
import gc
import os

HEAPS = 2                 # glibc's M_ARENA_MAX for a server: its threads mostly wait on the GIL anyway
_M_ARENA_MAX = -8         # mallopt's parameter number (malloc.h)


def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def limit_heaps(n: int = HEAPS) -> bool:
    """Cap glibc's per-thread heaps at ``n`` for the threads started from now on (call it before starting
    any); a ``MALLOC_ARENA_MAX`` in the environment wins. True where the cap was set."""
    libc = _libc()
    if os.environ.get("MALLOC_ARENA_MAX") or libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, n))


def give_back_freed() -> None:
    """Return the heap's freed pages to the system (after a collection), so that what loads next does not
    stack on memory the process no longer uses."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
