"""usl.server.heap: the server's settings of glibc's heap, and giving freed memory back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc")

# Frees a 20 MB block three times, with small blocks allocated between, and prints what the process keeps.
FREED = """
import os, sys
if sys.argv[1] == "limit":
    from usl.server.heap import limit_heaps; print(limit_heaps())
import numpy as np
def rss():
    for line in open(f"/proc/{os.getpid()}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
base = rss()
for _ in range(3):
    block = np.ones(20 * 2**20 // 8); small = [bytes(100) for _ in range(1000)]; del block
print(rss() - base)
"""


def _run(*args: str, env: dict | None = None) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"))}
    out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, env=clean | (env or {}))
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")


def test_both_settings_are_made_unless_the_environment_says_otherwise():
    code = "from usl.server.heap import limit_heaps; print(sorted(limit_heaps().items()))"
    assert _run(code)[0] == "[('heaps', True), ('large', True)]"
    assert _run(code, env={"MALLOC_ARENA_MAX": "4"})[0] == "[('heaps', False), ('large', True)]"
    assert _run(code, env={"MALLOC_MMAP_THRESHOLD_": "65536"})[0] == "[('heaps', True), ('large', False)]"


def test_a_large_freed_block_goes_back_to_the_system():
    """glibc's default raises its threshold once a 20 MB block is freed, so the next one stays in the heap
    after it is freed; with the threshold fixed, none stays."""
    kept_default = float(_run(FREED, "default")[0])
    kept_limited = float(_run(FREED, "limit")[1])
    assert kept_default > 15
    assert kept_limited < 5
