"""usl.server.heap: the server's cap on glibc's heaps, and giving freed memory back."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc")
def test_heaps_are_capped_unless_the_environment_says_otherwise():
    code = "from usl.server.heap import limit_heaps; print(limit_heaps())"
    env = {k: v for k, v in __import__("os").environ.items() if k != "MALLOC_ARENA_MAX"}
    capped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert capped.stdout.strip() == "True", capped.stderr
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env | {"MALLOC_ARENA_MAX": "4"})
    assert theirs.stdout.strip() == "False", theirs.stderr

