"""The server's side of the engine: checking a request against what exists, ranking through the
shared jobs, and shaping the answer (the board, its comparison with the default, warnings).

``Boards`` wraps any object with the ``LeaderboardService`` methods (``benchmarks``, ``data_version``,
``topics``, ``rank``, ``examples``, ``contradictions``). Blocking service calls run on threads so the event
loop keeps answering while a leaderboard is judged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any
from urllib.parse import urlencode

from fastapi import HTTPException

from usl.data.topics import match_topics
from usl.judges.base import LoadsReaders, StoresReadings
from usl.judges.redact import public_judge
from usl.leaderboard.calibrations import check_fits
from usl.leaderboard.limits import InputError
from usl.leaderboard.types import Leaderboard, LeaderboardSpec
from usl.server import views
from usl.server.config import ServerConfig
from usl.server.heap import give_back_freed
from usl.server.jobs import RankJobs, spec_key, watch
from usl.server.limits import MAX_DETAIL_CHARS, clip, quote
from usl.server.scheduler import FairQueue, StreamLimit
from usl.server.schemas import SpecIn, TopicOut
from usl.types import Criteria, DataError

log = logging.getLogger(__name__)

REFUSAL_MEMO_S = 30.0       # how long a board refused for its missing readings is refused without counting again
# What the engine raises for a request it cannot serve (unknown model, empty selection): a 422.
USER_ERRORS = (DataError, ValueError, KeyError, LookupError)


class Boards:
    def __init__(self, service: Any, config: ServerConfig):
        self.service, self.config = service, config
        self.queue = FairQueue(config.workers, config.max_waiting, config.max_waiting_per_client, "usl-rank")
        self.jobs = RankJobs(service.rank, cache_size=config.cache_size, queue=self.queue,   # a board is ranked
                             version=self._version)        # anew once its data (or its calibration) changed
        # Refinement steps take turns client by client (see stream.refine_events); waiting room for
        # every stream that may be open.
        self.refine_queue = FairQueue(config.refine_workers, config.refine_streams,
                                      config.refine_streams_per_client, "usl-refine")
        self.refine_streams = StreamLimit(config.refine_streams_per_client, config.refine_streams)
        # The contradiction check embeds the criteria: its own bounded queue, so a burst of checks
        # neither starves the threads that answer cheap lookups nor outlives the requests that left.
        self.checks = FairQueue(1, config.max_waiting, config.max_waiting_per_client, "usl-check")
        self._topics: dict[str, list[TopicOut]] = {}
        self._warming: asyncio.Task | None = None     # the default board's warm-up, kept referenced
        self._all_read: set[tuple] = set()            # boards whose quality readings are all stored
        self._refused: dict[tuple, tuple[int, float]] = {}   # boards refused for their readings: (count, when)

    def _version(self, spec: LeaderboardSpec) -> str:
        """What a finished board's key adds to its spec: the data's version, and the calibration's (a name
        refitted on more votes is another board)."""
        version = self.service.data_version(spec.benchmark)
        return version + (":" + self.service.calibration(spec.calibration).version if spec.calibration else "")

    # ---- what exists --------------------------------------------------------------------
    async def benchmarks(self) -> list[str]:
        return list(await asyncio.to_thread(self.service.benchmarks))

    async def topics(self, benchmark: str) -> list[TopicOut]:
        if benchmark not in self._topics:
            found = [topic_out(t) for t in await asyncio.to_thread(self.service.topics, benchmark)]
            if not found:
                return found            # not built yet: ask again next time
            self._topics[benchmark] = found
        return self._topics[benchmark]

    # ---- requests -----------------------------------------------------------------------
    async def resolve(self, s: SpecIn) -> LeaderboardSpec:
        """Check a request against what exists and build the engine's spec (422 on anything unknown)."""
        benchmark = s.benchmark or self.config.benchmark
        known = await self.benchmarks()
        if benchmark not in known:
            raise HTTPException(422, f"unknown benchmark {quote(benchmark)}; known: {', '.join(known) or 'none'}")
        judge = served_judge(s.judge, self.config.judges)
        if any(t.strip() for t in s.topics) and s.use_case.strip():     # a blank topic is no topic
            raise HTTPException(422, "choose topics or describe your use case, not both")
        topic_ids = topic_ids_of(s.topics, await self.topics(benchmark))
        likes, avoid = clean(s.likes), clean(s.avoid)
        criteria = Criteria(likes, avoid) if likes or avoid else LeaderboardSpec().criteria
        try:
            spec = LeaderboardSpec(criteria=criteria, benchmark=benchmark, topics=topic_ids,
                                   use_case=" ".join(s.use_case.split()), judge=judge,
                                   baseline=s.baseline or None, per_criterion=s.per_criterion,
                                   n_bootstrap=s.n_bootstrap, seed=s.seed, calibration=s.calibration or "")
        except InputError as e:         # the schema checks the same limits; this is the second line
            raise HTTPException(422, str(e)) from e
        if spec.calibration:            # unknown, or fitted for another benchmark or criteria: 422 before any work
            try:
                check_fits(await asyncio.to_thread(self.service.calibration, spec.calibration), spec)
            except USER_ERRORS as e:
                raise HTTPException(422, message(e)) from e
        await self._require_read(spec)
        return spec

    async def _require_read(self, spec: LeaderboardSpec) -> None:
        try:
            why = await self.unread(spec)
        except USER_ERRORS as e:
            raise HTTPException(422, message(e)) from e
        if why:
            raise HTTPException(422, why)

    async def unread(self, spec: LeaderboardSpec) -> str | None:
        """Why ``spec``'s judge cannot rank its board yet, or None. A judge of stored answer vectors
        (crm-factored) serves only boards whose pairs it has read: reading a new benchmark or
        baseline takes an hour of CPU, not a web request's (or a start-up's) work."""
        unread = getattr(self.service, "unread_pairs", None)
        n = await asyncio.to_thread(unread, spec) if unread else 0
        judge, base = public_judge(spec.judge), f", baseline {spec.baseline!r}" if spec.baseline else ""
        baseline = f" --baseline {spec.baseline}" if spec.baseline else ""
        if n:
            return (f"judge {judge!r} has no stored answer vectors for {n} pairs of this board (benchmark "
                    f"{spec.benchmark!r}{base}); reading them takes 2 transformer passes each: run `usl rank --judge "
                    f"{judge} --benchmark {spec.benchmark}{baseline}` once, then restart the server")
        n = await asyncio.to_thread(self._missing_readings, spec)
        if n > self.config.max_new_readings:
            return (f"judge {judge!r} has no quality reading of {n:,} pairs of this board (benchmark "
                    f"{spec.benchmark!r}{base}): more than the {self.config.max_new_readings} a request may "
                    f"start (its reader takes about a second of CPU a pair). Read them once with `usl quality "
                    f"fill --benchmark {spec.benchmark}{baseline} --judge {judge}` (progress; a stopped run "
                    "resumes), then ask again")
        return None

    def _missing_readings(self, spec: LeaderboardSpec) -> int:
        """Pairs of ``spec``'s board that its judge's quality reader has not read (``missing_readings``
        of the default judge; 0 for a judge without a quality reading). Remembered once all are read;
        a count over the bound for ``REFUSAL_MEMO_S`` (a burst of refused boards counts once)."""
        key = (spec.judge, spec.benchmark, spec.baseline, self.service.data_version(spec.benchmark))
        if key in self._all_read or not hasattr(self.service, "pair_texts"):
            return 0
        n, when = self._refused.get(key, (0, -math.inf))
        if time.monotonic() - when < REFUSAL_MEMO_S:
            return n
        judge = self.service.judge(spec.judge)
        if not isinstance(judge, StoresReadings):
            return 0
        n = int(judge.missing_readings(*self.service.pair_texts(spec)))
        if n == 0:
            self._all_read.add(key)
        elif n > self.config.max_new_readings:
            if len(self._refused) > 256:
                self._refused.clear()
            self._refused[key] = (n, time.monotonic())
        return n

    def default_spec(self, spec: LeaderboardSpec | None = None) -> LeaderboardSpec:
        """The general-criteria, all-topics board that ``spec`` is compared with."""
        if spec is None:
            return LeaderboardSpec(benchmark=self.config.benchmark, judge=self.config.judges[0])
        return LeaderboardSpec(benchmark=spec.benchmark, judge=spec.judge, baseline=spec.baseline)

    # ---- answers ------------------------------------------------------------------------
    async def ranked(self, spec: LeaderboardSpec, keep: bool = False) -> Leaderboard:
        try:
            with self.jobs.hold(self.jobs.submit(spec, keep=keep)) as job:
                return await watch(job.future)
        except USER_ERRORS as e:
            raise HTTPException(422, message(e)) from e

    async def contradictions(self, criteria: Criteria, judge: str) -> list[str]:
        """The service's (possibly embedding-based) check, as ``judge`` reads the criteria; runs beside the
        ranking, never fails it."""
        if criteria == LeaderboardSpec().criteria:
            return []
        try:
            return list(await self.checks.run(self.service.contradictions, criteria, judge))
        except Exception as e:  # noqa: BLE001 - a warning that cannot be computed is no reason to fail
            log.warning("contradiction check failed: %s", e)
            return []

    def response(self, spec: LeaderboardSpec, lb: Leaderboard, default: Leaderboard, notes: list[str]) -> dict:
        """A ``LeaderboardResponse``: the board, its placements against the default, warnings."""
        board = lb.to_json()
        board["spec"] = {**board["spec"], "judge": public_judge(str(board["spec"].get("judge", "")))}
        return finite({"leaderboard": board, "comparison": views.compare(lb, default),
                       "is_default": spec_key(spec) == spec_key(self.default_spec(spec)),
                       "warnings": list(dict.fromkeys([*notes, *lb.warnings])), "query": query_string(spec)})

    async def full(self, spec: LeaderboardSpec, refined: bool = False) -> dict:
        """The board, its comparison with the default and warnings; ``refined``: the reference's
        estimated board from the judgments cached so far (nothing is judged here)."""
        board = self.refined(spec) if refined else self.ranked(spec)
        # the page's own default board is kept for everyone; another judge's or baseline's (which may read
        # new quality readings first) is this request's work, stopped when it leaves
        default = self.default_spec(spec)
        keep = spec_key(default) == spec_key(self.default_spec())
        default, lb, notes = await asyncio.gather(self.ranked(default, keep=keep), board,
                                                  self.contradictions(spec.criteria, spec.judge))
        return self.response(spec, lb, default, notes)

    def require_reference(self) -> str:
        """The reference judge refinement uses; 404 where the server refines nothing."""
        if not self.config.reference:
            raise HTTPException(404, "this server does not refine boards (no reference judge configured)")
        return self.config.reference

    async def refined(self, spec: LeaderboardSpec) -> Leaderboard:
        """``service.refine`` with no new judging: what the cache allows at once (404 when off)."""
        self.require_reference()
        try:
            return await asyncio.to_thread(self.service.refine, spec, self.config.reference, queries=0)
        except USER_ERRORS as e:
            raise HTTPException(422, message(e)) from e

    async def examples(self, spec: LeaderboardSpec, model: str, limit: int) -> dict:
        try:
            found = await asyncio.to_thread(self.service.examples, spec, model, limit)
        except USER_ERRORS as e:
            raise HTTPException(422, message(e)) from e
        return finite({"model": model, "criteria": spec.criteria.as_list(),
                       "examples": [example_out(e) for e in found]})

    async def warm(self) -> None:
        """Start the default board and load what the contradiction check needs, before anyone waits
        (in the background: the server listens at once)."""
        self._warming = asyncio.create_task(self._warm_all())

    async def _warm_all(self) -> None:
        """One after the other: the default board (it loads the default judge), the default judge's
        reading of criteria and the contradiction check's embedder, the other judges, and, once the default
        board is ranked, the models that read new answers. Loading models in parallel threads races on
        transformers' lazy imports ("cannot
        import name 'AutoModel'")."""
        started = time.perf_counter()
        board = await self._warm_default()
        await asyncio.to_thread(_warm_contradictions, self.service, self.config.judges[0])
        await asyncio.to_thread(_warm_judges, self.service, self.config.judges[1:], self.config.benchmark)
        if board is not None:       # the first start reads every answer: not beside that, on 2 cores
            await asyncio.gather(watch(board), return_exceptions=True)
        await _in_background(_warm_readers, self.service, self.config.judges)
        log.info("warm-up done in %.0f s: every model a request can use is loaded", time.perf_counter() - started)

    async def _warm_default(self) -> Future | None:
        """The default board's job (a concurrent future), or None where none was started."""
        try:
            if self.config.benchmark in await self.benchmarks():
                spec = self.default_spec()
                why = await self.unread(spec)
                if why:    # the refusal a request would get, and no hour of reading at start-up
                    log.warning("default board not ranked: %s", why)
                else:
                    started = time.perf_counter()
                    board = self.jobs.submit(spec, keep=True).future
                    board.add_done_callback(lambda f: _ready(f, started))
                    return board
        except Exception as e:  # noqa: BLE001 - a failed warm-up must not stop the server
            log.warning("warm-up failed: %s", e)
        return None


def _ready(fut, started: float) -> None:
    """Say when the default board, the one the page opens with, is ranked (the first start reads
    every answer: minutes)."""
    if not fut.cancelled() and fut.exception() is None:
        log.info("default board ranked (%d models) in %.0f s: the page is ready", len(fut.result().rows),
                 time.perf_counter() - started)


WARM_UP_NICE = 10      # how far below requests the readers' warm-up runs (Linux niceness, per thread)


async def _in_background(fn, *args) -> Any:
    """``fn(*args)`` on a thread of its own at a lower CPU priority (``WARM_UP_NICE``), which the threads it
    starts inherit, so that requests arriving during the warm-up take the cores first (on a warm data directory
    new criteria over HTTP took 0.45 s at the median during it, 0.06 s after it). The thread ends with ``fn``:
    no thread that serves requests is left at that priority."""
    fut: Future = Future()

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WARM_UP_NICE)
        except (OSError, AttributeError):  # not Linux, or not allowed: the warm-up runs at the usual priority
            pass
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            settle(fut.set_exception, e)
        else:
            settle(fut.set_result, result)

    def settle(setter, value) -> None:
        try:
            setter(value)
        except InvalidStateError:   # the awaiting side was cancelled (the server is stopping): no one to tell
            pass

    threading.Thread(target=run, name="usl-warm-up", daemon=True).start()
    return await asyncio.wrap_future(fut)


def _warm_judges(service: Any, specs: tuple[str, ...], benchmark: str) -> None:
    """Load the other judges a request may name (a transformer takes seconds to load) and find the
    default benchmark's pairs in their stored vectors, judging nothing."""
    for spec in specs:
        try:
            service.judge(spec)
            if hasattr(service, "unread_pairs"):
                service.unread_pairs(LeaderboardSpec(benchmark=benchmark, judge=spec))
        except Exception as e:  # noqa: BLE001
            log.warning("loading judge %s failed: %s", spec, e)


def _warm_readers(service: Any, specs: tuple[str, ...]) -> None:
    """Load the models with which the served judges read new inputs (``LoadsReaders``: the default judge's
    style scorer and substance reader, about 0.5 GB; ``crm-factored``'s CRM and head, about 0.14 GB), so that
    no request, a reward batch of new responses, a board of a new model or new criteria, grows the server by
    loading a model or by the first use of its batch shapes. One judge at a time, freed pages given back
    after each, so that the start's peak is one judge's loading above what is kept."""
    give_back_freed()     # the first start's reading of every answer leaves ~150 MB freed but held
    for spec in specs:
        try:
            judge = service.judge(spec)
            if isinstance(judge, LoadsReaders):
                judge.load_readers()
        except Exception as e:  # noqa: BLE001
            log.warning("loading the readers of judge %s failed: %s", public_judge(spec), e)
        give_back_freed()     # what loading and the made-up readings freed


def _warm_contradictions(service: Any, judge: str) -> None:
    try:
        service.contradictions(Criteria(("short answers",), ("long answers",)), judge)
    except Exception as e:  # noqa: BLE001
        log.warning("contradiction warm-up failed: %s", e)


def served_judge(name: str | None, judges: tuple[str, ...]) -> str:
    """The configured judge spec a request names (by its spec or as /api/config shows it; None: the
    first), else a 422 naming the served judges as /api/config shows them: a configured spec may
    hold credentials in its base_url, and the name asked for is echoed only in part."""
    name = name or judges[0]
    spec = {public_judge(j): j for j in judges}.get(name, name)
    if spec not in judges:
        raise HTTPException(422, f"judge {quote(name)} is not served here; choose one of: "
                                 f"{', '.join(public_judge(j) for j in judges)}")
    return spec


def topic_ids_of(requested: list[str], known: list[TopicOut]) -> tuple[str, ...]:
    """Topic ids, names or unique prefixes (``usl.data.topics.match_topics``, the CLI's rule) -> sorted
    unique ids; an unknown one is a 422 that names it and lists the known ones."""
    try:
        return tuple(sorted(t.id for t in match_topics(requested, known)))
    except ValueError as e:
        raise HTTPException(422, str(e)) from e


def clean(lines: list[str]) -> tuple[str, ...]:
    """Normalise spacing and drop repeats, in the user's order (a blank criterion never gets here: the
    request schema refuses it, as the CLI and the Python API do)."""
    return tuple(dict.fromkeys(" ".join(x.split()) for x in lines))


def query_string(spec: LeaderboardSpec) -> str:
    """The spec as the URL query the page and the GET endpoints read."""
    params: list[tuple[str, str]] = []
    if spec.criteria != LeaderboardSpec().criteria:
        params += [("likes", x) for x in spec.criteria.likes] + [("avoid", x) for x in spec.criteria.avoid]
    params += [("topics", t) for t in spec.topics]
    params += [(k, v) for k, v in (("use_case", spec.use_case), ("judge", public_judge(spec.judge)),
                                   ("baseline", spec.baseline or ""), ("benchmark", spec.benchmark),
                                   ("calibration", spec.calibration)) if v]
    if not spec.per_criterion:
        params.append(("per_criterion", "false"))
    default = LeaderboardSpec()
    params += [(k, str(v)) for k, v, d in (("n_bootstrap", spec.n_bootstrap, default.n_bootstrap),
                                           ("seed", spec.seed, default.seed)) if v != d]
    return urlencode(params)


def topic_out(t: Any) -> TopicOut:
    kw = getattr(t, "keywords", ()) or ()
    if isinstance(kw, str):
        kw = [k.strip() for k in kw.split(",") if k.strip()]
    n = getattr(t, "n_queries", None)
    if n is None:
        n = getattr(t, "size", None)
    return TopicOut(id=str(t.id), name=str(getattr(t, "name", t.id)), n_queries=n, keywords=list(kw))


def example_out(e: Any) -> dict:
    p = float(e.p_model_wins)
    verdict = "model" if p > 0.5 + 1e-9 else "baseline" if p < 0.5 - 1e-9 else "tie"
    return {"query_id": e.query_id, "query": e.query, "topic": getattr(e, "topic", "") or "",
            "model": e.model, "model_answer": e.model_answer, "baseline": e.baseline,
            "baseline_answer": e.baseline_answer, "p_model_wins": p, "verdict": verdict}


def message(e: BaseException) -> str:
    """The engine's message for a request it cannot serve, clipped: it may quote the request."""
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return clip(text, MAX_DETAIL_CHARS)


def finite(x: Any) -> Any:
    """NaN/inf -> None: JSON has no NaN, and a CI of an empty topic may be undefined."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x
