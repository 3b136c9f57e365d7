"""Bounds on what one connection may cost before the app sees a request: body size, header size,
and the time a client may take to send its request.

- ``SizeLimits`` (ASGI middleware): headers over ``max_header_bytes`` are a 431; a body over
  ``max_body_bytes`` is answered 413 from its Content-Length, before any of it is read; a chunked
  one is read up to the limit, then refused. The body is handed on to the app in one piece (it is
  small by then). (h11's own header limit applies only to headers that arrive in pieces.)
- ``TimedH11Protocol``: uvicorn's HTTP/1.1 protocol with a read timeout: a client that has
  started a request (or opened a connection and sent nothing) must finish sending it within
  ``read_timeout_s``, else the connection is closed. Uvicorn's own keep-alive timeout covers idle
  connections between requests; nothing covered a request sent halfway ("slowloris").
- ``uvicorn_config``: the uvicorn settings that carry these, with a graceful-shutdown timeout.

``quote(value)`` is how an error message shows a value a client sent: a short prefix, never the
whole of it (a 1 MB value would otherwise come back in a 1 MB 422). ``clip`` does the same for text
that may hold such a value (a field name pydantic echoes, an engine's message), and every error's
``detail`` is clipped to ``MAX_DETAIL_CHARS`` on its way out (``usl.server.app``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    max_body_bytes: int = field(default=64 * 1024, metadata={"help": "Largest request body; more is a 413."})
    max_header_bytes: int = field(default=16 * 1024, metadata={"help": "Largest request line and headers."})
    read_timeout_s: float = field(default=10.0, metadata={"help": "Time a client has to send a whole request."})
    keep_alive_s: float = field(default=5.0, metadata={"help": "Idle time before a kept-alive connection closes."})
    shutdown_s: float = field(default=3.0, metadata={"help": "On SIGTERM, time open requests and streams get "
                                                               "before they are cancelled."})


MAX_DETAIL_CHARS = 600       # an error message, whatever it quotes
MAX_ECHO_CHARS = 60          # one value a client sent, as an error shows it


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was.

    >>> clip("x" * 1000, 5)
    'xxxxx... (1000 characters)'
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quote(value: object, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr`` of at most ``limit`` characters of ``value``, saying how long it really was.

    >>> quote("x" * 1000, 5)
    "'xxxxx'... (1000 characters)"
    """
    text = str(value)
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


class SizeLimits:
    """Pure ASGI middleware: 431 for headers over ``max_header_bytes``, 413 for a body over
    ``max_body_bytes`` (see the module docstring)."""

    def __init__(self, app, limits: ConnectionLimits = ConnectionLimits()):
        self.app, self.max_body_bytes, self.max_header_bytes = app, limits.max_body_bytes, limits.max_header_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        header_bytes = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")) + sum(
            len(k) + len(v) + 4 for k, v in scope.get("headers", []))
        if header_bytes > self.max_header_bytes:
            return await _answer(send, 431, f"headers: too large ({header_bytes} bytes); at most "
                                            f"{self.max_header_bytes} bytes")
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            return await self._refuse(send, length.decode("latin-1")[:20] + " bytes")
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return await self._refuse(send, f"more than {self.max_body_bytes} bytes")
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send, size: str) -> None:
        await _answer(send, 413, f"body: too large ({size}); at most {self.max_body_bytes} bytes")


async def _answer(send, status: int, detail: str) -> None:
    """A JSON error, closing the connection (what the client sent beyond it is never read)."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request is not fully sent in time."""

    read_timeout_s: float = ConnectionLimits.read_timeout_s

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._arm()                     # a connection that sends nothing is a request not sent in time

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        owed = self.conn.their_state is h11.SEND_BODY or (self.conn.their_state is h11.IDLE
                                                           and bool(self.conn.trailing_data[0]))
        if owed:
            self._arm()
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()                  # idle until the next request: uvicorn's keep-alive timeout

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._read_timer is None:    # from the start of the request, not reset by each trickle
            self._read_timer = self.loop.call_later(self.read_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if getattr(self, "_read_timer", None) is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _timed_out(self) -> None:
        self._read_timer = None
        client = "%s:%d" % self.client if self.client else "a client"
        log.info("closing the connection of %s: its request was not sent within %.0f s", client, self.read_timeout_s)
        if not self.transport.is_closing():
            self.transport.close()


def uvicorn_config(app, host: str, port: int, limits: ConnectionLimits = ConnectionLimits(), **kwargs):
    """A ``uvicorn.Config`` serving ``app`` under ``limits`` (``SizeLimits`` is the app's own)."""
    import uvicorn

    protocol = type("TimedH11Protocol", (TimedH11Protocol,), {"read_timeout_s": limits.read_timeout_s})
    return uvicorn.Config(app, host=host, port=port, http=protocol, timeout_keep_alive=int(limits.keep_alive_s),
                          h11_max_incomplete_event_size=limits.max_header_bytes,
                          timeout_graceful_shutdown=int(limits.shutdown_s), **kwargs)
