"""Leaderboard jobs: one computation per distinct spec, shared by everyone who asks for it.

Ranking can take seconds, so it runs on worker threads while the event loop keeps answering.
Two requests for the same spec (the page and an export, or two tabs) share one job, and the
last ``cache_size`` finished leaderboards are kept so that export, examples and a shared link
do not judge anything twice. Failed jobs are forgotten so that a retry really retries.

A job nobody waits for any more (the user changed the criteria and asked again, closing the
old stream) is cancelled, so stale work does not slow the new request on a small machine: it
is dropped from the queue if it has not started, or stopped at the engine's next progress
report (the progress callback raises ``JobCancelled``). Jobs submitted with ``keep=True`` (the
default leaderboard, which everyone needs) are never cancelled.

A finished board is kept for its spec and the data it was ranked on: once a model is added to or
removed from the benchmark (``usl data add-model`` in another process), the same spec is ranked
anew.

Jobs wait on a ``FairQueue`` (``usl.server.scheduler``): client by client, with a bound on what
may wait; a job the queue turns away raises ``QueueFull`` to its requesters and is forgotten.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from usl.judges.redact import public_judge
from usl.leaderboard.types import Leaderboard, LeaderboardSpec
from usl.server.scheduler import FairQueue, QueueFull

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised inside the engine (through the progress callback) to stop a job nobody wants."""


def spec_key(spec: LeaderboardSpec) -> str:
    """Equal for specs that must give the same leaderboard (criteria order and spacing ignored)."""
    d = spec.to_json()
    c = spec.criteria.canonical()
    d["criteria"] = {"likes": list(c.likes), "avoid": list(c.avoid)}
    d["topics"] = sorted(d["topics"])
    return json.dumps(d, sort_keys=True, ensure_ascii=False)


@dataclass
class Job:
    spec: LeaderboardSpec
    keep: bool = False
    key: str = ""           # spec_key and the data version: where RankJobs keeps it
    future: "Future[Leaderboard]" = field(default_factory=Future)
    done: int = 0
    total: int = 0
    listeners: int = 0
    cancelled: bool = False

    def progress(self, done: int, total: int) -> None:
        # Called from the worker thread; two ints written together are good enough for a
        # progress bar (a reader may see a stale pair, never a crash).
        if self.cancelled:
            raise JobCancelled("nobody is waiting for this leaderboard any more")
        self.done, self.total = int(done), int(total)


def watch(fut: "Future") -> "asyncio.Future":
    """An asyncio future that follows the concurrent ``fut``. Cancelling it (a request that left)
    leaves ``fut`` alone: ``asyncio.wrap_future`` would cancel the shared job for everyone else
    waiting on it; whether a job is dropped is ``RankJobs.hold``'s decision."""
    loop = asyncio.get_running_loop()
    out = loop.create_future()

    def copy(f: Future) -> None:
        if out.done():
            return
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())
        else:
            out.set_result(f.result())

    def done(f: Future) -> None:
        try:
            loop.call_soon_threadsafe(copy, f)
        except RuntimeError:        # the loop closed first (shutdown): nobody waits any more
            pass

    fut.add_done_callback(done)
    return out


class RankJobs:
    """Runs ``rank(spec, progress)`` on a thread pool with in-flight sharing and an LRU of results.

    Callers that wait for a job hold it with ``with jobs.hold(job): ...``; when the last holder
    lets go of an unfinished job that is not ``keep``, it is cancelled.
    """

    def __init__(self, rank: Callable[..., Leaderboard], *, workers: int = 2, cache_size: int = 64,
                 queue: FairQueue | None = None, version: Callable[[LeaderboardSpec], str] | None = None):
        """``version(spec)``: the stored version of the spec's data, part of a finished board's key."""
        self._rank = rank
        self._version = version
        self._pool = queue or FairQueue(workers=workers, name="usl-rank")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size
        self.cancelled = 0          # jobs cancelled so far (for tests and /api/health-like checks)

    def submit(self, spec: LeaderboardSpec, *, keep: bool = False) -> Job:
        key = spec_key(spec) + ("\n" + self._version(spec) if self._version else "")
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not job.cancelled:
                job.keep = job.keep or keep
                self._jobs.move_to_end(key)
                return job
            job = Job(spec, keep=keep, key=key)
            self._jobs[key] = job
            self._evict()
        try:
            self._pool.submit(self._run, key, job, future=job.future)
        except QueueFull:
            with self._lock:
                if self._jobs.get(key) is job:
                    del self._jobs[key]
            raise
        job.future.add_done_callback(lambda f: self._turned_away(key, job, f))
        return job

    def hold(self, job: Job) -> "_Hold":
        return _Hold(self, job)

    def _attach(self, job: Job) -> None:
        with self._lock:
            job.listeners += 1

    def _detach(self, job: Job) -> None:
        with self._lock:
            job.listeners -= 1
            if job.listeners > 0 or job.keep or job.future.done() or job.cancelled:
                return
            job.cancelled = True
            self.cancelled += 1
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]
        log.info("cancelled an abandoned leaderboard job")
        job.future.cancel()     # succeeds only if it has not started; else progress() stops it

    def _run(self, key: str, job: Job) -> Leaderboard:
        """Runs on the queue, which resolves ``job.future`` with the result or the exception."""
        try:
            return self._rank(job.spec, progress=job.progress)
        except BaseException as e:
            with self._lock:
                if self._jobs.get(key) is job:
                    del self._jobs[key]
            if not isinstance(e, JobCancelled):
                log.warning("ranking failed for %s: %s", public_judge(key), e)
            raise

    def _turned_away(self, key: str, job: Job, fut: Future) -> None:
        """A waiting job the queue bumped for another client's: forgotten, so a retry queues anew."""
        if not fut.cancelled() and isinstance(fut.exception(), QueueFull):
            with self._lock:
                if self._jobs.get(key) is job:
                    del self._jobs[key]

    def _evict(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.future.done()]
        for k in finished[: max(0, len(self._jobs) - self._cache_size)]:
            del self._jobs[k]

    def shutdown(self) -> None:
        with self._lock:
            for job in self._jobs.values():
                job.cancelled = True
        self._pool.shutdown()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"jobs": len(self._jobs), "running": sum(not j.future.done() for j in self._jobs.values()),
                    "cancelled": self.cancelled}


class _Hold:
    def __init__(self, jobs: RankJobs, job: Job):
        self.jobs, self.job = jobs, job

    def __enter__(self) -> Job:
        self.jobs._attach(self.job)
        return self.job

    def __exit__(self, *exc) -> None:
        self.jobs._detach(self.job)
