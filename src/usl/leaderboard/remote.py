"""A running ``usl serve`` of the same data directory, asked for boards instead of ranking in this process.

A board in a fresh process pays for loading the judge and the benchmark (about 3 s: the answer vectors,
the readers, MiniLM on ONNX Runtime); a running server has them loaded and answers new criteria in a
fraction of a second.
``usl serve`` writes ``serve.json`` (its URL and process id) into the data directory while it runs;
``usl rank``, ``usl compare``, ``usl rank --reference``/``--spec`` and the Python API (``usl.load``) ask
it through ``connect(home)`` whenever it can rank the spec as they would: a judge it serves, the default
bootstrap (1,000 resamples, seed 0), no refinement. The board is the same either way: the server runs
the same ``LeaderboardService``.

What an answer means:

- 200: the board (or agreement), as the engine made it.
- 400 or 422: the request is wrong (a misspelt topic, baseline, benchmark or reference; the server's
  message lists the names there are). That is final: ``Refused`` is raised, and nothing is ranked here,
  since ranking here would load the judge for seconds only to refuse the same names.
- anything else (no server, a refused connection, a dead process, 401/403 of a server that wants a token,
  429/503 of a busy one, a route an older server lacks): the caller ranks in-process.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from usl.leaderboard.types import Comparison, Leaderboard, LeaderboardSpec, Row
from usl.types import CriterionReading

log = logging.getLogger(__name__)
FILE = "serve.json"
FINAL = (400, 422)     # the request is wrong: no other process would rank it either


class Refused(ValueError):
    """The server refused the request as wrong (400/422); the message is the server's."""


def announce(home: Path, url: str) -> Path:
    """Record this process as the data directory's server; returns the file to remove at exit."""
    path = home / FILE
    tmp = path.with_name(f".{FILE}.{os.getpid()}")
    tmp.write_text(json.dumps({"url": url, "pid": os.getpid()}))
    os.replace(tmp, path)
    return path


def withdraw(path: Path) -> None:
    """Remove the record if it is still this process's (another server may have replaced it)."""
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def server_url(home: Path) -> str | None:
    """The URL of the data directory's running server, or None."""
    try:
        found = json.loads((home / FILE).read_text())
        pid, url = int(found["pid"]), str(found["url"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url


def connect(home: Path, timeout_s: float = 120.0) -> "Remote | None":
    """The data directory's running server, or None when there is none."""
    url = server_url(home)
    return None if url is None else Remote(url, timeout_s)


@dataclass
class Remote:
    """The ``LeaderboardService`` methods a running server answers; each returns None where the caller
    should rank in-process instead, and raises ``Refused`` where nobody could rank the request."""

    url: str
    timeout_s: float = 120.0
    _judges: tuple[str, ...] | None = field(default=None, repr=False)

    def serves(self, spec: LeaderboardSpec) -> bool:
        """Whether the server ranks ``spec`` as this process would: a judge it serves (``/api/config``
        names them), the default bootstrap (its boards use 1,000 resamples with seed 0)."""
        defaults = LeaderboardSpec()
        if (spec.n_bootstrap, spec.seed) != (defaults.n_bootstrap, defaults.seed):
            return False
        if self._judges is None:
            found = self._call("GET", "/api/config")
            self._judges = tuple(found.get("judges", ())) if isinstance(found, dict) else ()
        return spec.judge in self._judges

    def rank(self, spec: LeaderboardSpec) -> Leaderboard | None:
        if not self.serves(spec):
            return None
        found = self._call("POST", "/api/leaderboard", _body(spec))
        board = None if found is None else self._board(found.get("leaderboard"))
        if board is not None:
            log.info("ranked by usl serve at %s", self.url)
        return board

    def compare(self, a: LeaderboardSpec, b: LeaderboardSpec) -> Comparison | None:
        if not (self.serves(a) and self.serves(b)):
            return None
        found = self._call("POST", "/api/compare", {"a": _body(a), "b": _body(b)})
        if found is None:
            return None
        la, lb = self._board(found.get("a")), self._board(found.get("b"))
        if la is None or lb is None:
            return None
        log.info("compared by usl serve at %s", self.url)
        nan = lambda x: float("nan") if x is None else float(x)
        return Comparison(la, lb, nan(found.get("kendall_tau")), nan(found.get("spearman_rho")),
                          tuple(found.get("warnings", ())))

    def reference_agreement(self, spec: LeaderboardSpec, name: str) -> dict | None:
        """``LeaderboardService.reference_agreement`` against the published board ``name``."""
        if not self.serves(spec):
            return None
        return self._call("POST", "/api/reference?" + urllib.parse.urlencode({"name": name}), _body(spec))

    def _board(self, lb) -> Leaderboard | None:
        try:
            fields = set(Row.__dataclass_fields__)
            rows = tuple(Row(**({k: v for k, v in row.items() if k in fields}
                                | {"ci": tuple(row["ci"]) if row["ci"] is not None else (row["win_rate"],) * 2}))
                         for row in lb["rows"])
            reading = tuple(CriterionReading(**r) for r in lb.get("criteria_reading", []))
            return Leaderboard(spec=lb["spec"], rows=rows, criteria_breakdown=lb["criteria_breakdown"],
                               warnings=tuple(lb["warnings"]), criteria_contribution=lb["criteria_contribution"],
                               criteria_reading=reading)
        except (ValueError, KeyError, TypeError) as e:
            log.info("usl serve at %s answered a board this process cannot read (%s); ranking here", self.url, e)
            return None

    def _call(self, method: str, path: str, body: dict | None = None):
        """The JSON of a 200, None where the caller should rank in-process; raises ``Refused`` on 400/422.
        The standard library's client: this is the path that must start fast, and importing httpx alone
        costs a tenth of a second or more."""
        import http.client

        u = urllib.parse.urlsplit(self.url)
        con = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=self.timeout_s)
        try:
            con.request(method, path, body=None if body is None else json.dumps(body).encode(),
                        headers={"Content-Type": "application/json"})
            res = con.getresponse()
            status, payload = res.status, res.read()
        except (OSError, http.client.HTTPException) as e:
            log.info("usl serve at %s did not answer (%s); ranking here", self.url, e)
            return None
        finally:
            con.close()
        if status in FINAL:
            raise Refused(_detail(payload) or f"usl serve at {self.url} refused the request ({status})")
        if status != 200:
            log.info("usl serve at %s answered %d to %s (%s); ranking here", self.url, status, path,
                     _detail(payload))
            return None
        try:
            return json.loads(payload)
        except ValueError:
            return None


def _body(spec: LeaderboardSpec) -> dict:
    """The spec as ``POST /api/leaderboard`` takes it (``SpecIn``)."""
    return {"likes": list(spec.criteria.likes), "avoid": list(spec.criteria.avoid), "topics": list(spec.topics),
            "use_case": spec.use_case, "judge": spec.judge, "baseline": spec.baseline, "benchmark": spec.benchmark,
            "per_criterion": spec.per_criterion, "calibration": spec.calibration}


def _detail(payload: bytes) -> str:
    try:
        return str(json.loads(payload).get("detail", ""))
    except (ValueError, AttributeError):
        return payload[:200].decode("utf-8", "replace")
