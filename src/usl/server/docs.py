"""The interactive API docs (/docs: Swagger UI, /redoc: ReDoc) served from installed files.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, with an inline start-up script and
Google fonts: blank on an offline machine, no integrity check, and a page outside the CSP. Here
the assets come from the ``fastapi-offline`` package (Swagger UI, Apache-2.0; ReDoc, MIT; shipped
with their licences in that package's distribution), the start-up script is a file of ours, and
both pages run under ``DOCS_POLICY``: scripts from this origin only; inline styles allowed, since
ReDoc injects its styles as <style> elements.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
DOCS_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
               "font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; "
               "base-uri 'none'; frame-ancestors 'none'")

_SWAGGER = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - API</title><link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon.png"></head>
<body><div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script><script src="/static/docs/swagger-init.js"></script>
</body></html>"""

_REDOC = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - API reference</title><link rel="icon" href="{assets}/favicon.png"></head>
<body><redoc spec-url="/openapi.json"></redoc><script src="{assets}/redoc.standalone.js"></script></body></html>"""


def asset_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def add_docs(app: FastAPI) -> None:
    """Mount the assets and the two pages on ``app`` (created with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS, StaticFiles(directory=str(asset_dir())), name="docs-assets")
    headers = {"Content-Security-Policy": DOCS_POLICY, "Cache-Control": "no-cache"}

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return HTMLResponse(_SWAGGER.format(title=app.title, assets=ASSETS), headers=headers)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return HTMLResponse(_REDOC.format(title=app.title, assets=ASSETS), headers=headers)

