"""One access check for every route: with a token set, every route of the app (each operation of the
OpenAPI schema, and those outside it: the page, its files, the docs, the schema itself) refuses a
request without it, and a token of any bytes is a 401, never a 500. A real uvicorn server over the
fake engine (server_fake)."""

from __future__ import annotations

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from server_fake import FakeService, serve_in_thread
from usl.server.app import ServerConfig, create_app
from usl.server.hosts import Access

TOKEN = "s3cret-t0ken"
CFG = ServerConfig(benchmark="tiny", judges=("length",), access=Access(token=TOKEN), warm=False)
# A file each mount serves, so that a request to it would answer 200 if the check let it through.
MOUNT_FILES = {"/static": "/index.html", "/docs-assets": "/swagger-ui.css"}


@pytest.fixture(scope="module")
def served():
    app = create_app(FakeService(), CFG)
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield app, client


def flat(routes):
    """Routes, those of included routers among them (recent FastAPI keeps an included router whole;
    none of ours has a prefix)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        yield from flat(inner.routes) if inner is not None else [route]


def every_route(app) -> list[tuple[str, str]]:
    """(method, path) for each route of ``app``, path parameters filled in, a file for each mount."""
    out = []
    for route in flat(app.routes):
        if isinstance(route, Mount):
            out.append(("GET", route.path + MOUNT_FILES[route.path]))
        elif isinstance(route, (APIRoute, Route)):
            path = route.path_format.replace("{", "").replace("}", "")
            out += [(m, path) for m in sorted(route.methods or {"GET"}) if m != "HEAD"]
    return out


def test_every_route_refuses_a_request_without_the_token(served):
    app, c = served
    routes = every_route(app)
    schema = c.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    in_schema = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert in_schema <= set(routes) and ("POST", "/get_reward") in in_schema
    assert {("GET", "/"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/static/index.html")} <= set(routes)
    for method, path in routes:
        r = c.request(method, path, json={} if method == "POST" else None)
        if path == "/api/health":
            assert r.status_code == 200
            continue
        assert r.status_code == 401, (method, path, r.status_code, r.text[:200])
        assert "needs its token" in r.json()["detail"]


def test_the_token_opens_every_route_and_the_page_sets_its_cookie(served):
    _, c = served
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/api/benchmarks", "/openapi.json", "/docs", "/static/index.html", "/"):
        assert c.get(path, headers=bearer).status_code == 200, path
    with httpx.Client(base_url=str(c.base_url)) as browser:
        assert browser.get("/", params={"token": "wrong"}).status_code == 401
        page = browser.get("/", params={"token": TOKEN})
        assert page.status_code == 200 and "HttpOnly" in page.headers["set-cookie"]
        assert browser.get("/static/index.html").status_code == 200          # the page's files, by the cookie
        assert browser.get("/api/benchmarks").json() == ["tiny"]


@pytest.mark.parametrize("request_args", [
    {"headers": {"Authorization": b"Bearer \xe9\xe9"}},
    {"headers": {"Authorization": "Bearer \u00e9".encode()}},
    {"headers": {"Cookie": b"usl_token=\xe9\xff"}},
    {"headers": {"Cookie": b'usl_token="\\351\\377"'}},
    {"params": {"token": "\u00e9"}},                     # ?token=%C3%A9
    {"params": {"token": "\u00e9" * 500}},
])
@pytest.mark.parametrize("path", ["/", "/api/benchmarks", "/get_reward"])
def test_a_token_of_any_bytes_is_refused_not_an_error(served, request_args, path):
    _, c = served
    r = c.get(path, **request_args)
    assert r.status_code == 401, r.text[:200]


# ---- nothing private, nothing long echoed -------------------------------------------------------
SECRET_JUDGE = "llm:m,base_url=http://alice:hunter2@llm.example/v1?key=sk-live-0123456789abcdef"
SECRETS = ("alice", "hunter2", "sk-live-0123456789abcdef")
LONG = "x" * 60_000


@pytest.fixture(scope="module")
def open_server():
    cfg = ServerConfig(benchmark="tiny", judges=("length", SECRET_JUDGE), warm=False)
    with serve_in_thread(create_app(FakeService(), cfg)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


REWARD = {"items": [{"prompt": "q", "responses": ["a", "b"]}]}
OPENRLHF = {"query": ["q a"], "prompts": ["q "]}


@pytest.mark.parametrize("method,path,kwargs", [
    ("POST", "/api/reward", {"json": {**REWARD, "judge": "nope"}}),
    ("POST", "/get_reward", {"json": OPENRLHF, "params": {"judge": "nope"}}),
    ("POST", "/api/leaderboard", {"json": {"judge": "nope"}}),
    ("GET", "/api/leaderboard", {"params": {"judge": "nope"}}),
])
def test_an_unknown_judge_names_the_served_ones_without_their_secrets(open_server, method, path, kwargs):
    r = open_server.request(method, path, **kwargs)
    assert r.status_code == 422 and "judge 'nope' is not served here; choose one of: length, " \
                                      "llm:m,base_url=http://llm.example/v1" in r.json()["detail"]
    for secret in SECRETS:
        assert secret not in r.text


@pytest.mark.parametrize("method,path,kwargs", [
    ("POST", "/api/leaderboard", {"json": {LONG: 1}}),                          # an unknown field's name
    ("POST", "/api/reward", {"json": {**REWARD, LONG: 1}}),
    ("POST", "/api/check/votes", {"json": {"votes": [], LONG: 1}}),
    ("POST", "/api/reward", {"json": {**REWARD, "criteria": {LONG: []}}}),
    ("POST", "/api/reward", {"json": {**REWARD, "judge": LONG}}),
    ("POST", "/get_reward", {"json": OPENRLHF, "params": {"judge": LONG[:7000]}}),
    ("POST", "/api/leaderboard", {"json": {"baseline": LONG}}),
    ("POST", "/api/leaderboard", {"json": {"baseline": "b" * 200}}),          # allowed length, unknown model
    ("POST", "/api/leaderboard", {"json": {f"f{i}" * 150: i for i in range(60)}}),
    ("POST", "/api/reward", {"json": {"items": [{"prompt": LONG[:30_000], "responses": [1] * 16}]}}),
    ("GET", "/api/examples", {"params": {"model": "m" * 200}}),                # allowed length, unknown model
])
def test_errors_echo_at_most_a_few_hundred_bytes(open_server, method, path, kwargs):
    r = open_server.request(method, path, **kwargs)
    assert r.status_code == 422, r.text[:300]
    assert len(r.content) < 2500, len(r.content)
    assert "x" * 100 not in r.text and "f0f0f0" * 30 not in r.text


@pytest.mark.parametrize("path, body, where", [
    ("/api/leaderboard", {"likes": ["Concise", "caf\ud800"]}, "likes.1"),          # JSON "\ud800": a lone surrogate
    ("/api/reward", {**REWARD, "criteria": {"avoid": ["\udcff"]}}, "criteria.avoid.0"),
])
def test_text_utf8_cannot_encode_is_a_422_naming_the_field(open_server, path, body, where):
    import json

    r = open_server.post(path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith(f"{where}: "), r.text
    assert "unicode string" in r.json()["detail"] or "not valid UTF-8" in r.json()["detail"]
