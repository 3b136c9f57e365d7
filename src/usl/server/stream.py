"""The leaderboard as server-sent events: progress while judging, the table as soon as it exists,
and what is slower to compute after it.

Events, in order: ``progress``* then ``result`` (a LeaderboardResponse) or ``error`` {message};
after a result, ``breakdown`` {criteria_breakdown, criteria_contribution} when there are two or
more criteria, and ``warnings`` {warnings} (the full list) when the contradiction check finished
after the table and found something new.

Why the split: judging each criterion alone costs one pass per criterion, and a sentence embedder
may still be loading for the contradiction check; the user is waiting for the table, not for
those. The stream holds its jobs; when the page closes it (it asked for something newer), jobs
nobody else waits for are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import threading
import time
from typing import AsyncIterator

from fastapi import HTTPException, Request

from usl.judges.llm_api import LLMJudgeError
from usl.leaderboard.types import LeaderboardSpec
from usl.server.boards import USER_ERRORS, Boards, finite, message
from usl.server.jobs import Job, JobCancelled, watch
from usl.server.scheduler import OpenStream, QueueFull
from usl.server.limits import MAX_DETAIL_CHARS, clip

log = logging.getLogger(__name__)


class _Gone(Exception):
    """The client closed the event stream."""


async def leaderboard_events(boards: Boards, request: Request, spec: LeaderboardSpec) -> AsyncIterator[str]:
    t0 = time.perf_counter()
    jobs = boards.jobs
    split = spec.per_criterion and len(spec.criteria.likes) + len(spec.criteria.avoid) >= 2
    first = dataclasses.replace(spec, per_criterion=False) if split else spec
    notes = asyncio.ensure_future(boards.contradictions(spec.criteria, spec.judge))
    late = False
    try:
        with contextlib.ExitStack() as held:
            todo = [held.enter_context(jobs.hold(jobs.submit(boards.default_spec(spec), keep=True))),
                    held.enter_context(jobs.hold(jobs.submit(first)))]
            yield sse("progress", {"done": 0, "total": 0, "elapsed_s": 0.0})
            try:
                async for event in _follow(boards, request, todo, t0):
                    yield event
                default, lb = _outcome(todo)
                late = not notes.done()
                payload = boards.response(spec, lb, default, [] if late else notes.result())
            except _Gone:
                raise
            except Exception as e:  # noqa: BLE001 - the page must learn that it failed
                yield _error_event(e)
                return
            payload["elapsed_s"] = round(time.perf_counter() - t0, 3)
            yield sse("result", payload)
            if split:
                yield await _breakdown(boards, request, held, spec, t0)
        if late:
            more = [w for w in await notes if w not in payload["warnings"]]
            if more:
                yield sse("warnings", {"warnings": [*more, *payload["warnings"]]})
    except _Gone:
        return
    except QueueFull as e:
        yield _error_event(e)
    finally:
        notes.cancel()


async def _breakdown(boards: Boards, request: Request, held: contextlib.ExitStack, spec: LeaderboardSpec,
                     t0: float) -> str:
    """The full board (with the per-criterion boards) reduced to a ``breakdown`` event."""
    full = held.enter_context(boards.jobs.hold(boards.jobs.submit(spec)))
    async for _ in _follow(boards, request, [full], t0):
        pass
    try:
        (board,) = _outcome([full])
    except Exception as e:  # noqa: BLE001 - the table is out already; report, don't abort
        log.warning("per-criterion boards failed: %s", e)
        return sse("breakdown", {"criteria_breakdown": {}, "criteria_contribution": {}, "error": message(e)})
    return sse("breakdown", {"criteria_breakdown": board.criteria_breakdown,
                             "criteria_contribution": board.criteria_contribution,
                             "elapsed_s": round(time.perf_counter() - t0, 3)})


async def _follow(boards: Boards, request: Request, todo: list[Job], t0: float) -> AsyncIterator[str]:
    """Wait for jobs, yielding ``progress`` when their summed progress moves, and at least every
    ``heartbeat_s`` (the page shows the time running; a judge that reports only at the end does
    not look stuck). Raises ``_Gone`` when the client disconnects."""
    cfg = boards.config
    waits = [watch(j.future) for j in todo]
    last, last_sent = None, time.perf_counter()
    try:
        while not all(w.done() for w in waits):
            await asyncio.wait(waits, timeout=cfg.progress_interval_s, return_when=asyncio.ALL_COMPLETED)
            if await request.is_disconnected():
                raise _Gone()
            now = (sum(j.done for j in todo), sum(j.total for j in todo))
            if now != last or time.perf_counter() - last_sent >= cfg.heartbeat_s:
                last, last_sent = now, time.perf_counter()
                yield sse("progress", {"done": now[0], "total": now[1],
                                       "elapsed_s": round(time.perf_counter() - t0, 3)})
    finally:
        for w in waits:     # mark every outcome retrieved; _outcome re-raises from the jobs
            if w.done() and not w.cancelled():
                w.exception()
            else:
                w.cancel()


async def refine_events(boards: Boards, request: Request, spec: LeaderboardSpec,
                        stream: OpenStream | None = None) -> AsyncIterator[str]:
    """``refined`` boards as the reference judges query after query, until all are judged (``done``)
    or the client leaves. Each step is one blocking ``service.refine`` call on a thread; the client
    leaving is noticed between steps, and a step running stops within ``refine.STEP_ITEMS`` judgments
    (cached), so that little work outlives the stream.
    At most ``refine_workers`` steps run at once: concurrent streams take turns step by step, client
    by client, rather than splitting the cores between several copies of the reference model."""
    t0, cfg = time.perf_counter(), boards.config
    try:
        default = await boards.ranked(boards.default_spec(spec), keep=True)
        step, before = 0, -1    # first: the estimate from what is cached already, at once
        while True:
            lb = await _refine_step(boards, spec, step)
            info = lb.spec["refinement"]
            payload = boards.response(spec, lb, default, [])
            payload["elapsed_s"] = round(time.perf_counter() - t0, 3)
            yield sse("refined", payload)
            if info["complete"]:
                yield sse("done", {"queries_judged": info["queries_judged"], "queries": info["queries"],
                                   "elapsed_s": round(time.perf_counter() - t0, 3)})
                return
            if step and info["queries_judged"] <= before:    # e.g. a verdict the reference cannot give
                yield sse("error", {"message": f"refinement stopped at {info['queries_judged']} of "
                                               f"{info['queries']} queries: the reference judged no new one"})
                return
            if await request.is_disconnected():
                return
            step, before = cfg.refine_queries, info["queries_judged"]
    except Exception as e:  # noqa: BLE001 - the page must learn that it failed
        if isinstance(e, HTTPException):
            yield sse("error", {"message": str(e.detail)})
        else:
            yield _error_event(e)
    finally:
        if stream is not None:      # ``StreamLimit.open()``'s handle: the stream's place is free
            stream.close()


async def _refine_step(boards: Boards, spec: LeaderboardSpec, step: int):
    """One ``service.refine`` call on a worker thread. Step 0 judges nothing (the estimate from the
    cache) and runs at once; a judging step waits for its turn on the refinement queue, client by
    client. A stream closed mid-step (its coroutine cancelled) drops its step if it has not
    started; one that has started stops at the reference's next progress report (``refine.STEP_ITEMS``
    judgments, a few seconds of CPU), and what it judged is cached."""
    closed = threading.Event()

    def progress(done: int, total: int) -> None:
        if closed.is_set():
            raise JobCancelled("the refinement stream was closed")

    call = functools.partial(boards.service.refine, spec, boards.config.reference, queries=step, progress=progress)
    if not step:
        return await asyncio.to_thread(call)
    fut = boards.refine_queue.submit(call)
    try:
        return await asyncio.wrap_future(fut)
    finally:
        closed.set()
        fut.cancel()


def _outcome(todo: list[Job]) -> list:
    """The jobs' leaderboards, or the last failure raised."""
    failed = [e for e in (j.future.exception() for j in todo) if e is not None]
    if failed:
        raise failed[-1]
    return [j.future.result() for j in todo]


def _error_event(e: BaseException) -> str:
    if isinstance(e, QueueFull):
        return sse("error", {"message": str(e), "retry_after_s": e.retry_after_s})
    if isinstance(e, LLMJudgeError):      # the upstream's failure, told without a traceback
        log.warning("judge failed: %s", e)
        return sse("error", {"message": clip(f"the judge failed: {e}", MAX_DETAIL_CHARS),
                             "upstream_status": e.status})
    if isinstance(e, USER_ERRORS):
        return sse("error", {"message": message(e)})
    log.error("ranking failed", exc_info=e)
    return sse("error", {"message": f"internal error: {type(e).__name__}"})


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(finite(data), ensure_ascii=False, allow_nan=False)}\n\n"
