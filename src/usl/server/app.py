"""The HTTP API and the page: ``create_app(service)`` wraps a leaderboard service in FastAPI.

The service is anything with the ``LeaderboardService`` methods (``benchmarks``, ``topics``,
``rank``, ``examples``, ``contradictions``); the server adds validation, sharing of running
jobs, progress streaming and export, and never decides a result itself.

Every leaderboard request is a ``SpecIn``: as a JSON body (``POST /api/leaderboard``) or as URL
query parameters (``likes=..&likes=..&topics=..``), the same parameters the page keeps in its
own address so that a copied link reproduces the ranking.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, AsyncIterator, Optional
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError

from usl.leaderboard.types import Leaderboard, LeaderboardSpec
from usl.server import views
from usl.server.jobs import RankJobs, spec_key
from usl.server.schemas import (LIMITS, ConfigOut, ExamplesResponse, Health, LeaderboardResponse,
                                SpecIn, TopicOut)
from usl.types import Criteria, DataError

log = logging.getLogger(__name__)

_USER_ERRORS = (DataError, ValueError, KeyError, LookupError)
_SECURITY_HEADERS = {
    # No inline script, no foreign origin: even a criterion that slipped into the DOM as markup
    # could not run. The page builds everything with textContent / createElementNS anyway.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class ServerConfig:
    benchmark: str = field(default="alpaca_eval", metadata={"help": "Benchmark shown by default."})
    judges: tuple[str, ...] = field(default=("default",),
                                    metadata={"help": "Judges a request may name; the first is the default."})
    workers: int = field(default=2, metadata={"help": "Threads that rank leaderboards."})
    cache_size: int = field(default=64, metadata={"help": "Finished leaderboards kept in memory."})
    warm: bool = field(default=True, metadata={"help": "Rank the default leaderboard at start-up."})
    progress_interval_s: float = field(default=0.1, metadata={"help": "How often progress is streamed."})


def create_app(service: Any, config: ServerConfig | None = None) -> FastAPI:
    """A FastAPI app serving ``service``; see the module docstring for the duck-typed contract."""
    cfg = config or ServerConfig()
    if not cfg.judges:
        raise ValueError("ServerConfig.judges must name at least one judge")
    jobs = RankJobs(service.rank, workers=cfg.workers, cache_size=cfg.cache_size)
    topic_cache: dict[str, list[TopicOut]] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if cfg.warm:
            try:
                if cfg.benchmark in await asyncio.to_thread(service.benchmarks):
                    jobs.submit(_default_spec(cfg.benchmark, cfg.judges[0], None), keep=True)
            except Exception as e:  # noqa: BLE001 - a failed warm-up must not stop the server
                log.warning("warm-up failed: %s", e)
            # Loads whatever the contradiction check needs (a sentence embedder) before the
            # first user waits for it.
            asyncio.get_running_loop().run_in_executor(None, _warm_contradictions, service)
        yield
        jobs.shutdown()

    app = FastAPI(title="usl: user-centric subjective leaderboard", version="1",
                  description="Rank LLMs by how well they answer the way you like.", lifespan=lifespan)
    app.state.service, app.state.jobs, app.state.config = service, jobs, cfg

    app.add_middleware(_SecurityHeaders)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        msgs = []
        for e in errors:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query"))
            msgs.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        return JSONResponse({"detail": "; ".join(msgs),
                             "errors": [{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in errors]},
                            status_code=422)

    # ---- helpers bound to this app -------------------------------------------------------

    async def topics_of(benchmark: str) -> list[TopicOut]:
        if benchmark not in topic_cache:
            found = [_topic_out(t) for t in await asyncio.to_thread(service.topics, benchmark)]
            if not found:
                return found            # not built yet: ask again next time
            topic_cache[benchmark] = found
        return topic_cache[benchmark]

    async def resolve(s: SpecIn) -> LeaderboardSpec:
        """Check a request against what exists and build the engine's spec (422 on anything unknown)."""
        benchmark = s.benchmark or cfg.benchmark
        known = await asyncio.to_thread(service.benchmarks)
        if benchmark not in known:
            raise HTTPException(422, f"unknown benchmark {benchmark!r}; known: {', '.join(known) or 'none'}")
        judge = s.judge or cfg.judges[0]
        if judge not in cfg.judges:
            raise HTTPException(422, f"judge {judge!r} is not served here; choose one of: {', '.join(cfg.judges)}")
        if s.topics and s.use_case.strip():
            raise HTTPException(422, "choose topics or describe your use case, not both")
        topic_ids = await _topic_ids(s.topics, await topics_of(benchmark))
        likes, avoid = _clean(s.likes), _clean(s.avoid)
        criteria = Criteria(likes, avoid) if likes or avoid else LeaderboardSpec().criteria
        return LeaderboardSpec(criteria=criteria, benchmark=benchmark, topics=topic_ids,
                               use_case=" ".join(s.use_case.split()), judge=judge,
                               baseline=s.baseline or None)

    async def _topic_ids(requested: list[str], known: list[TopicOut]) -> tuple[str, ...]:
        by_id = {t.id: t.id for t in known} | {t.name: t.id for t in known}
        ids = []
        for t in requested:
            t = t.strip()
            if not t:
                continue
            if t not in by_id:
                raise HTTPException(422, f"unknown topic {t!r}; GET /api/topics lists the known ones")
            ids.append(by_id[t])
        return tuple(sorted(set(ids)))

    async def ranked(spec: LeaderboardSpec, keep: bool = False) -> Leaderboard:
        try:
            with jobs.hold(jobs.submit(spec, keep=keep)) as job:
                return await asyncio.wrap_future(job.future)
        except _USER_ERRORS as e:
            raise HTTPException(422, _message(e)) from e

    async def contradictions(criteria: Criteria) -> list[str]:
        """The service's (possibly embedding-based) check; runs beside the ranking, never fails it."""
        if criteria == LeaderboardSpec().criteria:
            return []
        try:
            return list(await asyncio.to_thread(service.contradictions, criteria))
        except Exception as e:  # noqa: BLE001 - a warning that cannot be computed is no reason to fail
            log.warning("contradiction check failed: %s", e)
            return []

    def response_for(spec: LeaderboardSpec, lb: Leaderboard, default: Leaderboard, notes: list[str]) -> dict:
        dspec = _default_spec(spec.benchmark, spec.judge, spec.baseline)
        return _finite({"leaderboard": lb.to_json(), "comparison": views.compare(lb, default),
                        "is_default": spec_key(spec) == spec_key(dspec),
                        "warnings": list(dict.fromkeys([*notes, *lb.warnings])), "query": _query_string(spec)})

    async def full(spec: LeaderboardSpec) -> dict:
        dspec = _default_spec(spec.benchmark, spec.judge, spec.baseline)
        default, lb, notes = await asyncio.gather(ranked(dspec, keep=True), ranked(spec),
                                                  contradictions(spec.criteria))
        return response_for(spec, lb, default, notes)

    # ---- routes --------------------------------------------------------------------------

    @app.get("/api/health", response_model=Health, tags=["meta"])
    async def health() -> dict:
        return {"status": "ok", "benchmarks": len(await asyncio.to_thread(service.benchmarks))}

    @app.get("/api/config", response_model=ConfigOut, tags=["meta"],
             summary="Defaults and input limits the page uses")
    async def config_() -> dict:
        return {"benchmark": cfg.benchmark, "benchmarks": await asyncio.to_thread(service.benchmarks),
                "judge": cfg.judges[0], "judges": list(cfg.judges),
                "default_criteria": LeaderboardSpec().criteria.as_list(),
                "limits": dataclasses.asdict(LIMITS)}

    @app.get("/api/benchmarks", response_model=list[str], tags=["data"])
    async def benchmarks() -> list[str]:
        return await asyncio.to_thread(service.benchmarks)

    @app.get("/api/topics", response_model=list[TopicOut], tags=["data"])
    async def topics(benchmark: Optional[str] = None) -> list[TopicOut]:
        name = benchmark or cfg.benchmark
        if name not in await asyncio.to_thread(service.benchmarks):
            raise HTTPException(404, f"unknown benchmark {name!r}")
        return await topics_of(name)

    @app.post("/api/leaderboard", response_model=LeaderboardResponse, tags=["leaderboard"],
              summary="Rank the models for one user's criteria and topics")
    async def leaderboard(body: SpecIn) -> dict:
        return await full(await resolve(body))

    @app.get("/api/leaderboard", response_model=LeaderboardResponse, tags=["leaderboard"],
             summary="The same as POST, with the spec as query parameters")
    async def leaderboard_get(s: SpecIn = Depends(_spec_query)) -> dict:
        return await full(await resolve(s))

    @app.get("/api/leaderboard/stream", tags=["leaderboard"],
             summary="Server-sent events: `progress` {done, total} while judging, then `result` "
                     "(a LeaderboardResponse) or `error` {message}. With two or more criteria, `breakdown` "
                     "{criteria_breakdown, criteria_contribution} follows the result; a late `warnings` "
                     "{warnings} follows when the contradiction check finishes after the ranking",
             response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})
    async def leaderboard_stream(request: Request, s: SpecIn = Depends(_spec_query)) -> StreamingResponse:
        spec = await resolve(s)     # a bad request is a plain 422 before any event is sent
        return StreamingResponse(_events(request, spec), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def _events(request: Request, spec: LeaderboardSpec) -> AsyncIterator[str]:
        """progress* result [breakdown] [warnings] | progress* error.

        With two or more criteria the table is ranked first without the per-criterion boards
        (``result``), and those follow as a ``breakdown`` event: judging each criterion alone
        costs one pass per criterion, and the user is waiting for the table, not for them.
        The stream holds its jobs; when the page closes it (a newer request), they are cancelled.
        """
        t0 = time.perf_counter()
        dspec = _default_spec(spec.benchmark, spec.judge, spec.baseline)
        split = spec.per_criterion and len(spec.criteria.likes) + len(spec.criteria.avoid) >= 2
        first = dataclasses.replace(spec, per_criterion=False) if split else spec
        notes = asyncio.ensure_future(contradictions(spec.criteria))
        with contextlib.ExitStack() as held:
            todo = [held.enter_context(jobs.hold(jobs.submit(dspec, keep=True))),
                    held.enter_context(jobs.hold(jobs.submit(first)))]
            yield _sse("progress", {"done": 0, "total": 0, "elapsed_s": 0.0})
            try:
                async for event in _follow(request, todo, t0):
                    yield event
                default, lb = _outcome(todo)
                # Neither does the table wait for the contradiction check (it may still be loading
                # a sentence embedder): what is known now goes with it, the rest comes later.
                late = not notes.done()
                payload = response_for(spec, lb, default, [] if late else notes.result())
            except _Gone:
                notes.cancel()
                return
            except Exception as e:  # noqa: BLE001 - the page must learn that it failed
                notes.cancel()
                yield _error_event(e)
                return
            payload["elapsed_s"] = round(time.perf_counter() - t0, 3)
            yield _sse("result", payload)
            if split:
                full = held.enter_context(jobs.hold(jobs.submit(spec)))
                try:
                    async for _ in _follow(request, [full], t0):
                        pass
                    (board,) = _outcome([full])
                    yield _sse("breakdown", {"criteria_breakdown": board.criteria_breakdown,
                                             "criteria_contribution": board.criteria_contribution,
                                             "elapsed_s": round(time.perf_counter() - t0, 3)})
                except _Gone:
                    notes.cancel()
                    return
                except Exception as e:  # noqa: BLE001 - the table is out; report, don't abort
                    log.warning("per-criterion boards failed: %s", e)
                    yield _sse("breakdown", {"criteria_breakdown": {}, "criteria_contribution": {},
                                             "error": _message(e)})
        if late:
            more = await notes
            yield _sse("warnings", {"warnings": list(dict.fromkeys([*more, *payload["warnings"]]))})

    async def _follow(request: Request, todo: list, t0: float) -> AsyncIterator[str]:
        """Wait for jobs, yielding a ``progress`` event whenever their summed progress moves."""
        waits = [asyncio.wrap_future(j.future) for j in todo]
        last, last_sent = None, time.perf_counter()
        try:
            while not all(w.done() for w in waits):
                await asyncio.wait(waits, timeout=cfg.progress_interval_s, return_when=asyncio.ALL_COMPLETED)
                if await request.is_disconnected():
                    raise _Gone()
                now = (sum(j.done for j in todo), sum(j.total for j in todo))
                # Also once a second when nothing moved: the page shows the time running, and a
                # judge that reports progress only at the end does not look stuck.
                if now != last or time.perf_counter() - last_sent >= 1.0:
                    last, last_sent = now, time.perf_counter()
                    yield _sse("progress", {"done": now[0], "total": now[1],
                                            "elapsed_s": round(time.perf_counter() - t0, 3)})
        finally:
            for w in waits:     # mark every outcome retrieved; _outcome re-raises from the jobs
                if w.done() and not w.cancelled():
                    w.exception()
                else:
                    w.cancel()

    @app.get("/api/examples", response_model=ExamplesResponse, tags=["leaderboard"],
             summary="A model's answers beside the baseline's, with the judge's verdicts")
    async def examples(model: str = Query(..., max_length=300),
                       limit: int = Query(5, ge=1, le=LIMITS.max_examples),
                       s: SpecIn = Depends(_spec_query)) -> dict:
        spec = await resolve(s)
        try:
            found = await asyncio.to_thread(service.examples, spec, model, limit)
        except _USER_ERRORS as e:
            raise HTTPException(422, _message(e)) from e
        return _finite({"model": model, "criteria": spec.criteria.as_list(),
                        "examples": [_example_out(e) for e in found]})

    @app.get("/api/export.csv", tags=["export"], response_class=Response,
             responses={200: {"content": {"text/csv": {}}}})
    async def export_csv(s: SpecIn = Depends(_spec_query)) -> Response:
        spec = await resolve(s)
        dspec = _default_spec(spec.benchmark, spec.judge, spec.baseline)
        default, lb = await asyncio.gather(ranked(dspec, keep=True), ranked(spec))
        return Response(views.to_csv(lb, default), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="usl_leaderboard.csv"'})

    @app.get("/api/export.json", response_model=LeaderboardResponse, tags=["export"])
    async def export_json(s: SpecIn = Depends(_spec_query)) -> JSONResponse:
        payload = await full(await resolve(s))
        return JSONResponse(payload, headers={"Content-Disposition": 'attachment; filename="usl_leaderboard.json"'})

    static = resources.files("usl.server").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"),
                            headers={"Cache-Control": "no-cache"})

    return app


class _SecurityHeaders:
    """Pure ASGI middleware (streams pass through untouched) adding ``_SECURITY_HEADERS``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        # The interactive API docs load Swagger UI with inline script: they keep their own policy.
        docs = scope.get("path", "").startswith(("/docs", "/redoc"))

        async def send_with_headers(message):
            if message["type"] == "http.response.start" and not docs:
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in _SECURITY_HEADERS.items()
                         if k.lower().encode() not in present]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---- module helpers (no app state) -----------------------------------------------------------

def _spec_query(likes: list[str] = Query([], description="Repeat for several criteria."),
                avoid: list[str] = Query([], description="Repeat for several criteria."),
                topics: list[str] = Query([], description="Repeat for several topics."),
                use_case: str = Query(""), judge: Optional[str] = Query(None),
                baseline: Optional[str] = Query(None), benchmark: Optional[str] = Query(None)) -> SpecIn:
    try:
        return SpecIn(likes=likes, avoid=avoid, topics=topics, use_case=use_case, judge=judge,
                      baseline=baseline, benchmark=benchmark)
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from e


class _Gone(Exception):
    """The client closed the event stream."""


def _outcome(todo: list) -> list:
    """The jobs' leaderboards, or the last failure raised."""
    failed = [e for e in (j.future.exception() for j in todo) if e is not None]
    if failed:
        raise failed[-1]
    return [j.future.result() for j in todo]


def _error_event(e: BaseException) -> str:
    if isinstance(e, _USER_ERRORS):
        return _sse("error", {"message": _message(e)})
    log.error("ranking failed", exc_info=e)
    return _sse("error", {"message": f"internal error: {type(e).__name__}"})


def _warm_contradictions(service: Any) -> None:
    try:
        service.contradictions(Criteria(("short answers",), ("long answers",)))
    except Exception as e:  # noqa: BLE001
        log.warning("contradiction warm-up failed: %s", e)


def _default_spec(benchmark: str, judge: str, baseline: str | None) -> LeaderboardSpec:
    return LeaderboardSpec(benchmark=benchmark, judge=judge, baseline=baseline)


def _clean(lines: list[str]) -> tuple[str, ...]:
    """Drop blank lines and repeats, normalise spacing, keep the user's order."""
    return tuple(dict.fromkeys(" ".join(x.split()) for x in lines if x.strip()))


def _query_string(spec: LeaderboardSpec) -> str:
    params: list[tuple[str, str]] = []
    if spec.criteria != LeaderboardSpec().criteria:
        params += [("likes", x) for x in spec.criteria.likes] + [("avoid", x) for x in spec.criteria.avoid]
    params += [("topics", t) for t in spec.topics]
    params += [(k, v) for k, v in (("use_case", spec.use_case), ("judge", spec.judge),
                                   ("baseline", spec.baseline or ""), ("benchmark", spec.benchmark)) if v]
    return urlencode(params)


def _topic_out(t: Any) -> TopicOut:
    kw = getattr(t, "keywords", ()) or ()
    if isinstance(kw, str):
        kw = [k.strip() for k in kw.split(",") if k.strip()]
    n = getattr(t, "n_queries", None)
    if n is None:
        n = getattr(t, "size", None)
    return TopicOut(id=str(getattr(t, "id")), name=str(getattr(t, "name", getattr(t, "id"))),
                    n_queries=n, keywords=list(kw))


def _example_out(e: Any) -> dict:
    p = float(e.p_model_wins)
    verdict = "model" if p > 0.5 + 1e-9 else "baseline" if p < 0.5 - 1e-9 else "tie"
    return {"query_id": e.query_id, "query": e.query, "topic": getattr(e, "topic", "") or "",
            "model": e.model, "model_answer": e.model_answer, "baseline": e.baseline,
            "baseline_answer": e.baseline_answer, "p_model_wins": p, "verdict": verdict}


def _message(e: BaseException) -> str:
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


def _finite(x: Any) -> Any:
    """NaN/inf -> None: JSON has no NaN, and a CI of an empty topic may be undefined."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(_finite(data), ensure_ascii=False, allow_nan=False)}\n\n"
