"""Response headers that keep user text inert even if it ever reached the DOM as markup."""

from __future__ import annotations

SECURITY_HEADERS = {
    # No inline script, no foreign origin. The page builds everything with textContent and
    # createElementNS anyway; this is the second line of defence.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# A response that sets its own policy keeps it (the API docs: usl.server.docs.DOCS_POLICY).
EXEMPT_PREFIXES: tuple[str, ...] = ()


class SecurityHeaders:
    """Pure ASGI middleware (event streams pass through unbuffered) adding ``SECURITY_HEADERS``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or (EXEMPT_PREFIXES and scope.get("path", "").startswith(EXEMPT_PREFIXES)):
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                         if k.lower().encode() not in present]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(scope, receive, send_with_headers)
