"""Who may talk to the server: the Host a request names, the page (Origin) that sent it, and an
optional token. A local server is reachable from every page the user's browser opens; without
these checks any web page could make it work (a cross-site ``fetch`` or ``<img>``), and a DNS
rebinding page (evil.example resolving to 127.0.0.1) could read the API as its own origin.

``HostGuard`` (pure ASGI middleware), for every request:

1. ``Host`` must name this server: a loopback name (localhost, 127.0.0.1, [::1]), the address it
   is bound to, or a name given with ``--allow-host`` (``*`` allows any). Else 421.
2. A browser's cross-site request is refused (403) unless its ``Origin`` is the served origin or
   one given with ``--allow-origin``: an ``Origin`` header naming another origin, or
   ``Sec-Fetch-Site: cross-site``/``same-site`` (another port of the same host is another origin
   but the same site). Opening a shared link to the page is a navigation, which is allowed; a
   navigation to ``/api/...`` from another site is not (it would start work).
3. With a token (``--token`` or ``USL_TOKEN``), every request but ``/api/health`` (a liveness
   probe that tells only how many benchmarks there are) must carry it, whatever its path: the API,
   ``/get_reward``, the page, its files, the schema and the docs. ``Authorization: Bearer TOKEN``,
   or the cookie the page sets when it is opened as ``/?token=TOKEN`` (HttpOnly, SameSite=Strict).
   Else 401. A token is compared as bytes: a header or query of any bytes is a 401, never an error.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
COOKIE = "usl_token"
OPEN_PATHS = ("/api/health",)       # answered without the token: one access check for all other routes


@dataclass(frozen=True)
class Access:
    bind: str = field(default="127.0.0.1", metadata={"help": "The address the server listens on."})
    allow_hosts: tuple[str, ...] = field(default=(), metadata={"help": "Host names (besides loopback and the "
                                                                        "bound address) requests may name; '*': any."})
    allow_origins: tuple[str, ...] = field(default=(), metadata={"help": "Other origins (scheme://host:port) "
                                                                          "whose pages may call the API."})
    token: str = field(default="", repr=False, metadata={"help": "Required on /api/ requests when not ''."})

    def host_allowed(self, host: str) -> bool:
        name = host_name(host)
        if "*" in self.allow_hosts or name in LOOPBACK_NAMES:
            return True
        return name == self.bind.lower() or name in {host_name(h) for h in self.allow_hosts}


def host_name(host: str) -> str:
    """'Example.org:8000' -> 'example.org'; '[::1]:8000' -> '::1'."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(bind: str) -> bool:
    if bind.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


class HostGuard:
    """Pure ASGI middleware enforcing ``Access`` (see the module docstring)."""

    def __init__(self, app, access: Access = Access()):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            status, detail = refusal
            log.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), detail)
            return await _json(send, status, detail)
        if self.access.token and scope.get("path") == "/" and self._token_in_query(scope):
            return await self.app(scope, receive, _with_cookie(send, self.access.token))
        await self.app(scope, receive, send)

    def refusal(self, scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if not self.access.host_allowed(host):
            return 421, (f"host {host_name(host)[:60]!r} is not served here (start the server with "
                         f"--allow-host {host_name(host)[:60]} to serve it)")
        path = scope.get("path", "")
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{host}".lower()
        allowed_origin = origin is not None and (origin.lower() == own or origin.rstrip("/") in self.access.allow_origins)
        if origin is not None and not allowed_origin:
            return 403, f"requests from pages of {origin[:80]!r} are refused (--allow-origin allows an origin)"
        site = headers.get("sec-fetch-site", "")
        navigation = headers.get("sec-fetch-mode") == "navigate" and scope.get("method") == "GET"
        if site in ("cross-site", "same-site") and not allowed_origin and (path.startswith("/api/") or not navigation):
            return 403, "requests from other sites' pages are refused (--allow-origin allows an origin)"
        if self.access.token and path not in OPEN_PATHS and not self._has_token(scope, headers) \
                and not (path == "/" and self._token_in_query(scope)):
            return 401, "this server needs its token: Authorization: Bearer TOKEN, or open the page as /?token=TOKEN"
        return None

    def _has_token(self, scope, headers: dict[str, str]) -> bool:
        given = headers.get("authorization", "")
        if given.lower().startswith("bearer ") and self._is_token(given[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie is no token
            return False
        return COOKIE in cookie and self._is_token(cookie[COOKIE].value)

    def _token_in_query(self, scope) -> bool:
        query = scope.get("query_string", b"").decode("latin-1")
        return self._is_token(parse_qs(query, encoding="latin-1").get("token", [""])[0])

    def _is_token(self, given: str) -> bool:
        """``given`` (the request's bytes, read as latin-1) is the token (its UTF-8 bytes). Bytes,
        not text: ``hmac.compare_digest`` raises on non-ASCII text (a 500 for ``Bearer \\xe9``)."""
        return bool(given) and hmac.compare_digest(given.encode("latin-1", "replace"), self.access.token.encode("utf-8"))


def _with_cookie(send, token: str):
    async def sending(message):
        if message["type"] == "http.response.start":
            cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict".encode()
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
        await send(message)
    return sending


async def _json(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def exposure_warning(access: Access, port: int) -> str | None:
    """The banner ``usl serve`` prints when it listens beyond loopback, or None."""
    if is_loopback(access.bind):
        return None
    lines = [f"WARNING: listening on {access.bind}:{port}, reachable from other machines.",
             "  Anyone who can reach it can make it rank boards (CPU) and read every answer in its store."]
    if not access.token:
        lines.append("  Set a token (--token or USL_TOKEN) so that only people you give it to can use the API.")
    if not access.allow_hosts:
        lines.append("  Requests must name the server by a host given with --allow-host (or its address).")
    return "\n".join(lines)
