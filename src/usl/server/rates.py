"""How fast one client may grow the store: writes are rate-limited per client.

A vote is a row holding both answers it was cast on (kilobytes); without a bound, one client that
sends no Origin header (a script, not a page) grew the store by about 10 MB a second. ``WriteRate``
is a token bucket per client: ``per_minute`` writes a minute on average, up to ``per_minute`` at
once after a quiet minute. ``take(n)`` spends ``n`` for the current client or raises ``TooFast``,
which the app answers with 429 and ``Retry-After``. Clients are told apart by address, as by the
fair queue (``usl.server.scheduler``); behind a proxy, set the limit there.

>>> rate = WriteRate(per_minute=60, clock=lambda: 0.0)
>>> rate.take(60, client="a")
>>> try:
...     rate.take(1, client="a")
... except TooFast as e:
...     print(e, e.retry_after_s)
too many writes: at most 60 a minute per client; retry in 1 s 1
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

from usl.server.scheduler import CLIENT


class TooFast(Exception):
    """A client wrote more than its rate; ``retry_after_s``: when the write would be allowed."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class WriteRate:
    """A token bucket per client (see the module docstring); thread-safe."""

    max_clients = 4096          # buckets kept; the full ones (clients idle for a minute) are dropped first

    def __init__(self, per_minute: int, what: str = "writes", clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError("WriteRate needs per_minute >= 1")
        self.per_minute, self.what, self.clock = per_minute, what, clock
        self._buckets: dict[str, tuple[float, float]] = {}     # client -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, n: int = 1, client: str | None = None) -> None:
        """Spend ``n`` writes of ``client`` (default: the requesting client) or raise ``TooFast``."""
        client = CLIENT.get() if client is None else client
        rate = self.per_minute / 60.0
        with self._lock:
            now = self.clock()
            tokens, when = self._buckets.get(client, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - when) * rate)
            if n > tokens:
                self._buckets[client] = (tokens, now)
                wait = max(1, math.ceil((n - tokens) / rate))
                raise TooFast(f"too many {self.what}: at most {self.per_minute} a minute per client; retry in "
                              f"{wait} s", wait)
            self._buckets[client] = (tokens - n, now)
            if len(self._buckets) > self.max_clients:
                self._forget_idle(now, rate)

    def _forget_idle(self, now: float, rate: float) -> None:
        """Drop the buckets that have filled up again: forgetting them changes nothing."""
        for client, (tokens, when) in list(self._buckets.items()):
            if tokens + (now - when) * rate >= self.per_minute:
                del self._buckets[client]
