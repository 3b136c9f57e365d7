"""`usl rank` through a running `usl serve` of the same data directory, when there is one.

A board in a fresh process pays for loading the judge and the benchmark (seconds: torch, the answer
vectors, MiniLM); a running server has them loaded and answers new criteria in a fraction of a second.
``usl serve`` writes ``serve.json`` (its URL and process id) into the data directory while it runs;
``usl rank`` posts its spec there when the spec is one the server can rank as the command would (no
refinement, no published reference, the default bootstrap) and falls back to ranking in-process on
anything else: no file, a dead process, a refused connection, a judge the server does not serve, any
answer but 200. The board is the same either way: the server runs the same ``LeaderboardService``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
FILE = "serve.json"


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


def rank(home: Path, spec, timeout_s: float = 120.0):
    """The board of ``spec`` from the running server as a ``Leaderboard``, or None (rank in-process)."""
    url = server_url(home)
    if url is None:
        return None
    from usl.leaderboard.types import Leaderboard, Row
    from usl.types import CriterionReading

    body = {"likes": list(spec.criteria.likes), "avoid": list(spec.criteria.avoid), "topics": list(spec.topics),
            "use_case": spec.use_case, "judge": spec.judge, "baseline": spec.baseline, "benchmark": spec.benchmark,
            "per_criterion": spec.per_criterion}
    status, payload = _post_json(url + "/api/leaderboard", body, timeout_s)
    if status is None:
        return None
    if status != 200:
        log.info("usl serve at %s answered %d; ranking here", url, status)
        return None
    try:
        lb = json.loads(payload)["leaderboard"]
        fields = set(Row.__dataclass_fields__)
        rows = tuple(Row(**({k: v for k, v in row.items() if k in fields} | {"ci": tuple(row["ci"])}))
                     for row in lb["rows"])
        reading = tuple(CriterionReading(**r) for r in lb.get("criteria_reading", []))
        board = Leaderboard(spec=lb["spec"], rows=rows, criteria_breakdown=lb["criteria_breakdown"],
                            warnings=tuple(lb["warnings"]), criteria_contribution=lb["criteria_contribution"],
                            criteria_reading=reading)
    except (ValueError, KeyError, TypeError) as e:
        log.info("usl serve at %s answered a board this command cannot read (%s); ranking here", url, e)
        return None
    log.info("ranked by usl serve at %s", url)
    return board


def _post_json(url: str, body: dict, timeout_s: float) -> tuple[int | None, bytes]:
    """(status, body) of a JSON POST, (None, b"") when the server cannot be reached. The standard library's
    client: this is the path that must start fast, and httpx's import alone costs a tenth of a second or more."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    con = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout_s)
    try:
        con.connect()
        con.request("POST", u.path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        res = con.getresponse()
        return res.status, res.read()
    except (OSError, http.client.HTTPException) as e:
        log.info("usl serve at %s did not answer (%s); ranking here", url, e)
        return None, b""
    finally:
        con.close()
