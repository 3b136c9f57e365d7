"""The HTTP API and the page: ``create_app(service)`` wraps a leaderboard service in FastAPI.

The service is anything with the ``LeaderboardService`` methods (``benchmarks``, ``topics``,
``rank``, ``examples``, ``contradictions``); the server adds validation, sharing of running
jobs, progress streaming and export, and never decides a result itself. The reward routes
(``reward.py``) and the "check the judge" routes (``votes.py``) live in their own modules and also use
``judge``, ``answers``, ``vote_pairs`` and ``pair_probabilities``.

Every leaderboard request is a ``SpecIn``: as a JSON body (``POST /api/leaderboard``) or as URL
query parameters (``likes=..&likes=..&topics=..``), the same parameters the page keeps in its
own address so that a copied link reproduces the ranking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, AsyncIterator, Optional

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from usl.judges.llm_api import LLMJudgeError
from usl.judges.redact import public_judge
from usl.leaderboard.types import LeaderboardSpec, drift
from usl.server import analysis, reward, views, votes
from usl.server.boards import Boards
from usl.server.config import ServerConfig
from usl.server.schemas import (LIMITS, ConfigOut, ExamplesResponse, Health, LeaderboardResponse, SpecIn,
                                TopicOut)
from usl.server.docs import add_docs
from usl.server.hosts import HostGuard
from usl.server.limits import MAX_DETAIL_CHARS, SizeLimits, clip, quote
from usl.server.rates import TooFast, WriteRate
from usl.server.scheduler import ClientScope, QueueFull, TooManyStreams
from usl.server.security import SecurityHeaders
from usl.server.stream import leaderboard_events, refine_events

__all__ = ["ServerConfig", "create_app"]
log = logging.getLogger(__name__)


def create_app(service: Any, config: ServerConfig | None = None) -> FastAPI:
    """A FastAPI app serving ``service``; see the module docstring for the duck-typed contract."""
    cfg = config or ServerConfig()
    boards = Boards(service, cfg)
    rewards = reward.reward_queue()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if cfg.warm:
            # transformers' lazy imports are not thread-safe: a request's thread and the warm-up's
            # importing at once fail with "cannot import name 'AutoModel'". Import once, here, first.
            from transformers import AutoModel, AutoTokenizer  # noqa: F401

            await boards.warm()
        yield
        boards.jobs.shutdown()
        boards.refine_queue.shutdown()
        boards.checks.shutdown()
        rewards.shutdown()

    app = FastAPI(title="usl: user-centric subjective leaderboard", version="1",
                  description="Rank LLMs by how well they answer the way you like.", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    add_docs(app)                           # /docs and /redoc from installed assets, under a CSP
    app.state.boards, app.state.jobs, app.state.config = boards, boards.jobs, cfg
    app.state.queue = boards.queue          # for any expensive endpoint: see usl.server.scheduler
    app.add_middleware(ClientScope)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(SizeLimits, limits=cfg.connection)                           # before any read
    app.add_middleware(HostGuard, access=cfg.access)                                # outermost
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(QueueFull, _busy)
    app.add_exception_handler(TooManyStreams, _too_many_streams)
    app.add_exception_handler(TooFast, _too_fast)
    app.add_exception_handler(LLMJudgeError, _judge_failed)

    @app.get("/api/health", response_model=Health, tags=["meta"])
    async def health() -> dict:
        return {"status": "ok", "benchmarks": len(await boards.benchmarks())}

    @app.get("/api/config", response_model=ConfigOut, tags=["meta"],
             summary="Defaults and input limits the page uses")
    async def config_() -> dict:
        return {"benchmark": cfg.benchmark, "benchmarks": await boards.benchmarks(),
                "judge": public_judge(cfg.judges[0]), "judges": [public_judge(j) for j in cfg.judges],
                "reference": public_judge(cfg.reference),
                "default_criteria": LeaderboardSpec().criteria.as_list(),
                "limits": dataclasses.asdict(LIMITS)}

    @app.get("/api/benchmarks", response_model=list[str], tags=["data"])
    async def benchmarks() -> list[str]:
        return await boards.benchmarks()

    @app.get("/api/topics", response_model=list[TopicOut], tags=["data"])
    async def topics(benchmark: Optional[str] = Query(None, max_length=LIMITS.max_name_chars)) -> list[TopicOut]:
        name = benchmark or cfg.benchmark
        if name not in await boards.benchmarks():
            raise HTTPException(404, f"unknown benchmark {quote(name)}")
        return await boards.topics(name)

    @app.post("/api/leaderboard", response_model=LeaderboardResponse, tags=["leaderboard"],
              summary="Rank the models for one user's criteria and topics")
    async def leaderboard(body: SpecIn) -> dict:
        out = await boards.full(await boards.resolve(body))
        notes = drift(body.recorded, out["leaderboard"]["spec"]) if body.recorded else []
        return {**out, "warnings": [*out["warnings"], *notes]} if notes else out

    @app.get("/api/leaderboard", response_model=LeaderboardResponse, tags=["leaderboard"],
             summary="The same as POST, with the spec as query parameters")
    async def leaderboard_get(s: SpecIn = Depends(spec_query)) -> dict:
        return await boards.full(await boards.resolve(s))

    @app.get("/api/leaderboard/stream", tags=["leaderboard"], summary="The leaderboard with progress (SSE)",
             description="Server-sent events: `progress` {done, total, elapsed_s} while judging (at least once "
                         "a second), then `result` (a LeaderboardResponse) or `error` {message}. With two or more "
                         "criteria, `breakdown` {criteria_breakdown, criteria_contribution} follows the result; "
                         "`warnings` {warnings} follows when the contradiction check finishes after the ranking "
                         "and finds more. Closing the stream cancels work nobody else waits for.",
             response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
    async def leaderboard_stream(request: Request, s: SpecIn = Depends(spec_query)) -> StreamingResponse:
        spec = await boards.resolve(s)     # a bad request is a plain 422 before any event is sent
        return _event_stream(leaderboard_events(boards, request, spec))

    @app.get("/api/leaderboard/refine", tags=["leaderboard"],
             summary="The board refined by the reference CRM, query by query (SSE)",
             description="Server-sent events: `refined` (a LeaderboardResponse whose `leaderboard.spec.refinement` "
                         "says how many queries the reference has judged) at once from what is cached, then after "
                         "every few queries judged; `done` {queries_judged, queries, elapsed_s} when every query "
                         "is judged; `error` {message}. Judgments are cached and shared: closing the stream stops "
                         "the work, and the next request with the same criteria goes on from there. The board is "
                         "the reference's estimated board: its scores on the judged queries, corrected for the "
                         "rest with the fast judge's (usl.leaderboard.refine). 404 when the server refines "
                         "nothing (ServerConfig.reference '').",
             response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
    async def leaderboard_refine(request: Request, s: SpecIn = Depends(spec_query)) -> StreamingResponse:
        boards.require_reference()
        spec = await boards.resolve(s)
        return _event_stream(refine_events(boards, request, spec, boards.refine_streams.open()))

    @app.get("/api/examples", response_model=ExamplesResponse, tags=["leaderboard"],
             summary="A model's answers beside the baseline's, with the judge's verdicts")
    async def examples(model: str = Query(..., max_length=LIMITS.max_name_chars),
                       limit: int = Query(5, ge=1, le=LIMITS.max_examples),
                       s: SpecIn = Depends(spec_query)) -> dict:
        return await boards.examples(await boards.resolve(s), model, limit)

    @app.get("/api/export.csv", tags=["export"], response_class=Response,
             responses={200: {"content": {"text/csv": {}}}})
    async def export_csv(s: SpecIn = Depends(spec_query),
                         refined: bool = Query(False, description=REFINED)) -> Response:
        spec = await boards.resolve(s)
        board = boards.refined(spec) if refined else boards.ranked(spec)
        default, lb = await asyncio.gather(boards.ranked(boards.default_spec(spec), keep=True), board)
        name = "usl_leaderboard_refined" if refined else "usl_leaderboard"
        return Response(views.to_csv(lb, default), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})

    @app.get("/api/export.json", response_model=LeaderboardResponse, tags=["export"])
    async def export_json(s: SpecIn = Depends(spec_query),
                          refined: bool = Query(False, description=REFINED)) -> JSONResponse:
        payload = await boards.full(await boards.resolve(s), refined=refined)
        name = "usl_leaderboard_refined" if refined else "usl_leaderboard"
        return JSONResponse(payload, headers={"Content-Disposition": f'attachment; filename="{name}.json"'})

    app.include_router(reward.router(service, cfg.judges, rewards))
    app.include_router(votes.router(boards, spec_query, WriteRate(cfg.votes_per_minute, "votes")))
    app.include_router(analysis.router(boards))

    static = resources.files("usl.server").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"),
                            headers={"Cache-Control": "no-cache"})

    return app


def _event_stream(events: AsyncIterator[str]) -> StreamingResponse:
    """Server-sent events, never cached or buffered by a proxy."""
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


REFINED = ("Export the board refined by the reference judge so far (what /api/leaderboard/refine has judged and "
           "cached; nothing new is judged) instead of the fast judge's.")


def spec_query(likes: list[str] = Query([], description="Repeat for several criteria."),
               avoid: list[str] = Query([], description="Repeat for several criteria."),
               topics: list[str] = Query([], description="Repeat for several topics."),
               use_case: str = Query(""), judge: Optional[str] = Query(None),
               baseline: Optional[str] = Query(None), benchmark: Optional[str] = Query(None),
               per_criterion: bool = Query(True, description="false: no per-criterion breakdown (sooner)."),
               n_bootstrap: int = Query(1000, description="Bootstrap resamples for the intervals (0: none)."),
               seed: int = Query(0, description="Seed of the bootstrap."),
               calibration: Optional[str] = Query(None, description="A stored calibration of the judge.")) -> SpecIn:
    """A ``SpecIn`` from URL query parameters, under the same limits as a JSON body."""
    try:
        return SpecIn(likes=likes, avoid=avoid, topics=topics, use_case=use_case, judge=judge,
                      baseline=baseline, benchmark=benchmark, per_criterion=per_criterion, n_bootstrap=n_bootstrap,
                      seed=seed, calibration=calibration)
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from e


async def _busy(request: Request, exc: QueueFull) -> JSONResponse:
    """503 with Retry-After: the work queue is full (or the request was bumped for another client's)."""
    return JSONResponse({"detail": str(exc), "retry_after_s": exc.retry_after_s}, status_code=503,
                        headers={"Retry-After": str(exc.retry_after_s)})


async def _judge_failed(request: Request, exc: LLMJudgeError) -> JSONResponse:
    """502: the remote judge failed; its message is redacted (usl.judges.redact), no traceback."""
    log.warning("judge failed: %s", exc)
    return JSONResponse({"detail": clip(f"the judge (model {exc.model}) failed: {exc}", MAX_DETAIL_CHARS),
                         "upstream_status": exc.status}, status_code=502)


async def _too_fast(request: Request, exc: TooFast) -> JSONResponse:
    """429 with Retry-After: the client writes faster than its rate (usl.server.rates)."""
    return JSONResponse({"detail": str(exc), "retry_after_s": exc.retry_after_s}, status_code=429,
                        headers={"Retry-After": str(exc.retry_after_s)})


async def _too_many_streams(request: Request, exc: TooManyStreams) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers={"Retry-After": "10"})


MAX_ERRORS = 10     # validation errors told in one 422; a body of 10,000 bad fields gets the first ten


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with one readable ``detail`` line ("likes: List should have at most 10 items ...").

    Nothing the client sent comes back whole: pydantic's own errors quote the input and the unknown
    field names, so only ``loc`` (each part clipped) and ``msg`` (clipped) are kept, for at most
    ``MAX_ERRORS`` errors."""
    errors = exc.errors()
    msgs, listed = [], []
    for e in errors[:MAX_ERRORS]:
        where = [p if isinstance(p, int) else clip(str(p)) for p in e.get("loc", ())]
        msg = clip(str(e.get("msg", "")), 200)
        listed.append({"loc": where, "msg": msg})
        if e.get("type") == "json_invalid":         # its loc is ("body", character offset), not a field
            msgs.append(f"body: invalid JSON at character {where[-1] if len(where) > 1 else 0}")
            continue
        loc = ".".join(str(p) for p in where if p not in ("body", "query")) or ".".join(map(str, where[:1]))
        msgs.append(f"{loc}: {msg}" if loc else msg)
    if len(errors) > MAX_ERRORS:
        msgs.append(f"and {len(errors) - MAX_ERRORS} more errors")
    return JSONResponse({"detail": clip("; ".join(msgs), MAX_DETAIL_CHARS), "errors": listed}, status_code=422)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """FastAPI's answer to an ``HTTPException``, its detail clipped: a message may quote the request."""
    detail = clip(exc.detail, MAX_DETAIL_CHARS) if isinstance(exc.detail, str) else exc.detail
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)
