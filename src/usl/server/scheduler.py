"""Who asked, and in what order their work runs: work is tied to the client that requested it.

Three pieces, reusable by any expensive endpoint:

- ``ClientScope`` (ASGI middleware): records the requesting client in ``CLIENT`` for everything
  the request starts, and cancels the request's task when its client disconnects, so work that
  nobody waits for is dropped (a ``RankJobs`` job held by the request is cancelled when its last
  holder lets go; see ``usl.server.jobs``).
- ``FairQueue``: worker threads that take waiting work client by client (round robin over the
  clients that have work waiting), with a bound on what may wait, in all and per client. When it
  is full, ``submit`` raises ``QueueFull``, which the app answers with 503 and ``Retry-After``.
  A client with nothing waiting takes the place of the newest waiting task of the client that
  has the most waiting (that task's caller gets the 503), so one client's burst cannot hold the
  queue against the others.
- ``StreamLimit``: how many long streams (refinements) one client and all clients may hold open.

A new endpoint plugs in with ``await app.state.queue.run(fn, *args)`` (a blocking call run on the
fair queue for the current client; ``QueueFull`` becomes a 503 by the app's handler)::

    @app.post("/api/score")
    async def score(body: ScoreIn, request: Request) -> dict:
        return await request.app.state.queue.run(service.score, body.text)

Clients are told apart by their address (behind a reverse proxy every request has the proxy's:
put the limits there). On loopback, a test can be several clients by binding 127.0.0.2, 127.0.0.3...
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import threading
import time
from collections import Counter, OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("usl_client", default="")
"""The requesting client's address; '' for the server's own work (the warm-up)."""


class QueueFull(Exception):
    """Too much work is waiting; ``retry_after_s`` estimates when there is room."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class _Task:
    client: str
    fn: Callable[[], Any]
    future: Future


@dataclass
class QueueStats:
    waiting: int
    running: int
    turned_away: int
    clients_waiting: int


class FairQueue:
    """``workers`` threads running blocking calls, client by client; see the module docstring.

    >>> q = FairQueue(workers=1, max_waiting=4, max_waiting_per_client=2)
    >>> q.submit(sum, [1, 2], client="a").result()
    3
    """

    def __init__(self, workers: int = 2, max_waiting: int = 8, max_waiting_per_client: int = 4,
                 name: str = "usl-work"):
        if workers < 1 or max_waiting < 1 or max_waiting_per_client < 1:
            raise ValueError("FairQueue needs at least one worker and room for one waiting task")
        self.max_waiting, self.max_waiting_per_client = max_waiting, max_waiting_per_client
        self._waiting: OrderedDict[str, deque[_Task]] = OrderedDict()   # order = whose turn is next
        self._cond = threading.Condition()
        self._running = 0
        self._closed = False
        self._turned_away = 0
        self._seconds = deque(maxlen=32)        # recent run times, for Retry-After
        self._workers = workers
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    # ---- submitting -------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], *args: Any, client: str | None = None,
               future: Future | None = None) -> Future:
        """Queue ``fn(*args)`` for ``client`` (default: ``CLIENT``) and return its future (``future``
        when given: the caller's own, which the worker sets running and resolves; cancelling it
        before it starts takes the task off the queue). Raises ``QueueFull``."""
        task = _Task(CLIENT.get() if client is None else client, functools.partial(fn, *args),
                     future if future is not None else Future())
        with self._cond:
            if self._closed:
                raise QueueFull("the server is shutting down", self._retry_after())
            self._admit(task)
            self._waiting.setdefault(task.client, deque()).append(task)
            self._cond.notify()
        task.future.add_done_callback(functools.partial(self._forget, task))
        return task.future

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the queue for the current client, awaited; cancelling the await (the
        client left) takes the task off the queue if it has not started."""
        fut = self.submit(fn, *args)
        try:
            return await asyncio.wrap_future(fut)
        finally:
            fut.cancel()

    def _admit(self, task: _Task) -> None:
        """Make room for ``task`` or raise ``QueueFull`` (holding the lock)."""
        mine = len(self._waiting.get(task.client, ()))
        if mine >= self.max_waiting_per_client:
            self._turned_away += 1
            raise QueueFull(f"too many requests of yours are waiting ({mine}); wait for them",
                            self._retry_after())
        if self.total_waiting() < self.max_waiting:
            return
        heaviest = max(self._waiting, key=lambda c: len(self._waiting[c]))
        if len(self._waiting[heaviest]) <= mine + 1:
            self._turned_away += 1
            raise QueueFull(f"the server is busy ({self.total_waiting()} requests waiting)", self._retry_after())
        bumped = self._waiting[heaviest].pop()
        if not self._waiting[heaviest]:
            del self._waiting[heaviest]
        self._turned_away += 1
        bumped.future.set_exception(QueueFull("the server is busy and other clients are waiting",
                                              self._retry_after()))

    def _forget(self, task: _Task, fut: Future) -> None:
        if not fut.cancelled():
            return
        with self._cond:
            queue = self._waiting.get(task.client)
            if queue is not None and task in queue:
                queue.remove(task)
                if not queue:
                    del self._waiting[task.client]

    def _retry_after(self) -> int:
        per_task = sorted(self._seconds)[len(self._seconds) // 2] if self._seconds else 1.0
        return max(1, math.ceil(per_task * (self.total_waiting() + 1) / self._workers))

    # ---- running ----------------------------------------------------------------------------
    def _next(self) -> _Task | None:
        """The first waiting task of the client whose turn it is; that client goes to the back."""
        while self._waiting:
            client, queue = next(iter(self._waiting.items()))
            task = queue.popleft()
            del self._waiting[client]
            if queue:
                self._waiting[client] = queue       # to the back of the line
            if task.future.set_running_or_notify_cancel():
                return task
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                task = self._next()
                while task is None:
                    if self._closed:
                        return
                    self._cond.wait()
                    task = self._next()
                self._running += 1
            t0 = time.perf_counter()
            try:
                result = task.fn()
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the future
                task.future.set_exception(e)
            else:
                task.future.set_result(result)
            finally:
                with self._cond:
                    self._running -= 1
                    self._seconds.append(time.perf_counter() - t0)

    def total_waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def stats(self) -> QueueStats:
        with self._cond:
            return QueueStats(self.total_waiting(), self._running, self._turned_away, len(self._waiting))

    def shutdown(self) -> None:
        """Cancel everything waiting; running calls finish (their callers stop them, see RankJobs)."""
        with self._cond:
            self._closed = True
            waiting = [t for q in self._waiting.values() for t in q]
            self._waiting.clear()
            self._cond.notify_all()
        for t in waiting:
            t.future.cancel()


# ---- streams ----------------------------------------------------------------------------------
class TooManyStreams(Exception):
    """A client (or everyone together) holds as many streams as allowed; ``status`` 429 or 503."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class StreamLimit:
    """How many long streams (refinements) one client and all clients may hold open.

    ``open()`` counts one for the current client, raising ``TooManyStreams`` (429 beyond
    ``per_client``, 503 beyond ``total``); the returned handle's ``close()`` gives it back. The
    steps the streams run go through a ``FairQueue``, so a client's eight streams take one turn
    while another client's single stream takes one too.
    """

    per_client: int = 2
    total: int = 8
    _open: Counter = field(init=False, default_factory=Counter)

    def open(self) -> "OpenStream":
        client = CLIENT.get()
        if self._open[client] >= self.per_client:
            raise TooManyStreams(f"you have {self._open[client]} refinements open; close one first", 429)
        if sum(self._open.values()) >= self.total:
            raise TooManyStreams(f"the server is refining {self.total} boards; try again later", 503)
        self._open[client] += 1
        return OpenStream(self, client)

    def _close(self, client: str) -> None:
        self._open[client] -= 1
        if self._open[client] <= 0:
            del self._open[client]


class OpenStream:
    def __init__(self, limit: StreamLimit, client: str):
        self.limit, self.client, self._closed = limit, client, False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.limit._close(self.client)

    def __del__(self) -> None:
        # A stream whose client left before its first event never runs its generator's finally:
        # the place is given back when the handle goes.
        self.close()


# ---- the requester ----------------------------------------------------------------------------
class ClientScope:
    """Pure ASGI middleware: sets ``CLIENT`` for the request, and cancels the request's task when
    the client disconnects before the response is complete (the await on a job raises
    ``CancelledError``; ``RankJobs`` then cancels a job nobody else holds). A request the server
    cancels as it shuts down ends with a 503 (or the end of its stream), in one log line.

    A task reads ASGI ``receive`` ahead of the app, one body chunk at a time (a chunk is passed on
    before the next is read, so nothing is buffered beyond what the app would hold), and keeps
    reading after the body to see the disconnect; the app's own ``receive`` calls get the same
    messages in order, the disconnect as often as asked (an event stream listening for it).
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        CLIENT.set(scope["client"][0] if scope.get("client") else "")
        task = asyncio.current_task()
        inbox: deque = deque()
        arrived, taken = asyncio.Event(), asyncio.Event()
        state = {"finished": False, "gone": False}

        async def pump() -> None:
            while True:
                message = await receive()
                inbox.append(message)
                arrived.set()
                if message["type"] == "http.disconnect":
                    if not state["finished"]:
                        state["gone"] = True
                        task.cancel()
                    return
                if message.get("more_body", False):
                    while inbox:                # the app takes this chunk before the next is read
                        taken.clear()
                        await taken.wait()

        async def app_receive():
            while not inbox:
                arrived.clear()
                await arrived.wait()
            if inbox[0]["type"] == "http.disconnect":
                return inbox[0]
            message = inbox.popleft()
            taken.set()
            return message

        async def app_send(message):
            if message["type"] == "http.response.start":
                state["started"] = True
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["finished"] = True
            await send(message)

        reader = asyncio.ensure_future(pump())
        try:
            await self.app(scope, app_receive, app_send)
        except asyncio.CancelledError:
            task.uncancel()
            if state["gone"]:
                log.info("client %s left %s %s before the answer: its work is dropped",
                         CLIENT.get() or "-", scope.get("method"), scope.get("path"))
            else:       # nothing else cancels a request: the server is shutting down (uvicorn's grace ran out)
                log.info("%s %s of client %s stopped: the server is shutting down", scope.get("method"),
                         scope.get("path"), CLIENT.get() or "-")
                await _close(send, started=state.get("started", False))
        finally:
            state["finished"] = True
            reader.cancel()


async def _close(send, started: bool) -> None:
    """End a response cut short by shutdown: a 503 if nothing was sent yet, else the end of the body."""
    body = b'{"detail": "the server is shutting down; retry shortly"}'
    try:
        if not started:
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"10")]})
        await send({"type": "http.response.body", "body": b"" if started else body, "more_body": False})
    except Exception:  # noqa: BLE001 - the connection may be gone already; nothing more to tell
        pass
