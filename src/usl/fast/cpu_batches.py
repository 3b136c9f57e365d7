"""Batches of a small model's forward passes spread over the CPU's cores: one batch a core.

PyTorch's default splits each operation over every core (intra-op threads). A model of SmolLM2's or
MiniLM's size on a short batch issues thousands of small operations a pass: each is a fork and a join
of the cores, the element-wise ones are too small to split well, and Python issues the next one while
the cores wait. Where another process holds a core the join waits for it too, and on the 2-core machine
under a load of 2-3 the substance reader fell from 8 to 2-4 answers/s. Here each worker thread reads
whole batches with one intra-op thread of its own, and the workers overlap each other's Python time
and element-wise passes: on 2 cores at load 2.5, 12 answers/s against 4-5 (``docs/log.md``,
2026-12-02). A batch's result does not depend on the worker that read it.

PyTorch's thread count is per thread once a thread has run an operation, but
``torch.set_num_threads`` also sets the count a new thread starts with; :func:`map_batches` sets it
back when its workers are done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# Readers pad each batch to a multiple of this many tokens. On a CPU, PyTorch's kernels for a matrix shape are
# made on its first use and kept (oneDNN's primitive cache), and batches padded to their longest text bring new
# shapes nearly every batch: a pass over new answers kept 46-124 MB more (the style scorer's first) and
# 74-139 MB more (each of the substance reader's first two). Padded to steps of 32 tokens, the style scorer kept
# nothing after loading and the substance reader's process stayed within 870-920 MB over eight passes; the
# readings move by less than their bfloat16 noise (r 0.9996-0.9998), no slower (``docs/log.md``, 2026-12-03).
SHAPE_STEP = 32


def map_batches(read: Callable[[T], None], batches: Sequence[T], progress: Callable[[int], None] | None = None,
                workers: int | None = None) -> None:
    """``read(batch)`` for each batch, ``workers`` at a time (default: PyTorch's intra-op thread count), each
    worker with one intra-op thread; ``progress(k)`` when k batches are done (under a lock). ``read`` must be
    safe to run concurrently (writing disjoint rows of an output array is). An error (from ``read`` or
    ``progress``) cancels the batches not started and is raised once the running ones end. With one
    worker, or one batch, it runs in the calling thread as it is."""
    import torch

    threads = torch.get_num_threads()
    workers = min(workers or threads, len(batches))
    if workers <= 1:
        for k, b in enumerate(batches, 1):
            read(b)
            if progress:
                progress(k)
        return
    lock, done = threading.Lock(), [0]

    def one(b: T) -> None:
        read(b)
        if progress:
            with lock:
                done[0] += 1
                progress(done[0])

    try:
        with ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
            futures = [pool.submit(one, b) for b in batches]
            try:
                for f in futures:
                    f.result()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    finally:
        torch.set_num_threads(threads)


def cpu_reads_bf16(device) -> bool:
    """Whether a model reads in bfloat16 on ``device``: a CPU with bf16 matrix units (AVX512-BF16, AMX). There a
    decoder reads about twice as fast, its logits moving by at most 0.1 (``scripts/bench_substance_reader.py``),
    and MiniLM about four times as fast, the style scores moving by under 0.2 on a spread of 4-6 (r > 0.9999 on
    483 new answers; ``docs/log.md``, 2026-12-03)."""
    import torch

    return str(device).startswith("cpu") and bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def warm_up_texts(longest: int, per_shape: int) -> list[str]:
    """Made-up texts, ``per_shape`` of each length from one ``SHAPE_STEP`` to ``longest`` tokens or so: read once
    at a server's start, they make the kernels of every batch shape a reader meets (each text about one token a
    word), so that the first requests of new answers find them made."""
    return [" ".join(["word"] * (k * SHAPE_STEP - 8)) for k in range(1, longest // SHAPE_STEP + 1)
            for _ in range(per_shape)]
