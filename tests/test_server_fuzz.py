"""Property-based fuzzing of the HTTP API from its own OpenAPI schema, against `usl serve` (real
engine, tiny benchmark, `length` judge): requests drawn from each operation's schema, and requests
that break it, never get a 5xx. Bounded: a fixed number of examples, no shrinking deadline."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server_real import make_tiny, usl_serve

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
# Text that has broken parsers elsewhere: lone surrogates are not encodable, so they are left out;
# control characters, RTL marks, NULs, long runs and markup are in.
JUNK = st.one_of(st.text(max_size=40), st.sampled_from(["", " ", "\x00", "\u202e", "<script>", "' OR 1=1 --",
                                                      "../../etc/passwd", "%00", "coding", "writing", "x" * 400]))


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    make_tiny(home)
    with usl_serve(home, "--benchmark", "tiny", "--judge", "length", "--refine-with", "random:3") as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            schema = client.get("/openapi.json").json()
            yield client, schema


def resolved(schema: dict, doc: dict) -> dict:
    """``schema`` with its ``#/components/...`` references inlined (hypothesis-jsonschema needs that)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            return resolved(doc["components"]["schemas"][name], doc)
        return {k: resolved(v, doc) for k, v in schema.items()}
    if isinstance(schema, list):
        return [resolved(v, doc) for v in schema]
    return schema


def from_schema(schema: dict):
    """Values valid under the JSON schema subset FastAPI writes for this API (objects, arrays,
    strings with maxLength, integers with bounds, booleans, null, anyOf)."""
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries({k: from_schema(v) for k, v in props.items() if k in required},
                                     optional={k: from_schema(v) for k, v in props.items() if k not in required})
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=min(schema.get("maxItems", 5), 5))
    if kind == "string":
        return st.text(max_size=min(schema.get("maxLength", 50), 50)) | st.sampled_from(
            ["coding", "writing", "Coding", "length", "base", "m_mid", "tiny"])
    if kind == "integer":
        return st.integers(schema.get("minimum", -10), schema.get("maximum", 1000))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return JUNK


def get_operations(doc: dict) -> list[tuple[str, list[dict]]]:
    return [(path, ops["get"].get("parameters", [])) for path, ops in doc["paths"].items() if "get" in ops]


def params_strategy(parameters: list[dict], doc: dict):
    """Query parameters from their schemas, or junk in their place."""
    fields = {}
    for p in parameters:
        if p.get("in") != "query":
            continue
        schema = resolved(p.get("schema", {}), doc)
        valid = from_schema(schema)
        fields[p["name"]] = st.one_of(valid, JUNK, st.lists(JUNK, max_size=3))
    names = sorted(fields)
    return st.fixed_dictionaries({}, optional={n: fields[n] for n in names})


def as_query(params: dict) -> list[tuple[str, str]]:
    out = []
    for k, v in params.items():
        for x in v if isinstance(v, list) else [v]:
            out.append((k, "" if x is None else str(x).lower() if isinstance(x, bool) else str(x)))
    return out


def test_every_get_operation_from_the_schema(api):
    client, doc = api
    ops = [(path, params) for path, params in get_operations(doc) if path != "/api/leaderboard/refine"]
    assert {"/api/leaderboard", "/api/examples", "/api/export.csv", "/api/topics"} <= {p for p, _ in ops}

    @FUZZ
    @given(data=st.data())
    def fuzz(data):
        path, parameters = data.draw(st.sampled_from(ops))
        params = data.draw(params_strategy(parameters, doc))
        r = client.get(path, params=as_query(params))
        assert r.status_code < 500, (path, params, r.status_code, r.text[:300])

    fuzz()


def test_the_leaderboard_body_from_the_schema_and_beyond(api):
    client, doc = api
    spec = resolved(doc["components"]["schemas"]["SpecIn"], doc)
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | JUNK,
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JUNK, inner, max_size=4),
                               max_leaves=12)
    bodies = st.one_of(from_schema(spec), st.dictionaries(
        st.sampled_from(sorted(spec["properties"])) | JUNK, json_values, max_size=5), json_values)

    @FUZZ
    @given(body=bodies)
    def fuzz(body):
        r = client.post("/api/leaderboard", json=body)
        assert r.status_code < 500, (body, r.status_code, r.text[:300])

    fuzz()


@FUZZ
@given(raw=st.binary(max_size=200) | JUNK.map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_bodies_that_are_not_json(api, raw):
    client, _ = api
    r = client.post("/api/leaderboard", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (raw, r.status_code, r.text[:300])


@pytest.mark.parametrize("path, model", [("/api/reward", "RewardIn"), ("/get_reward", "OpenRLHFIn"),
                                         ("/api/check/votes", "VotesIn")])
def test_the_reward_and_vote_bodies_from_the_schema_and_beyond(api, path, model):
    """The reward routes (and the vote route) under the same fuzzing: bodies valid under their schema,
    bodies of their fields with junk, junk; /get_reward's criteria in the URL too. A 422, a 429 (votes)
    or a 503 (a full reward queue) is an answer; a 5xx is a failure."""
    client, doc = api
    schema = resolved(doc["components"]["schemas"][model], doc)
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | JUNK,
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JUNK, inner, max_size=4),
                               max_leaves=12)
    bodies = st.one_of(from_schema(schema), st.dictionaries(st.sampled_from(sorted(schema["properties"])) | JUNK,
                                                            json_values, max_size=4), json_values)
    params = st.fixed_dictionaries({}, optional={k: st.one_of(JUNK, st.lists(JUNK, max_size=3))
                                                 for k in ("likes", "avoid", "judge")})

    @FUZZ
    @given(body=bodies, query=params)
    def fuzz(body, query):
        r = client.post(path, json=body, params=as_query(query) if path == "/get_reward" else None)
        assert r.status_code < 500 or r.status_code == 503, (body, query, r.status_code, r.text[:300])
        assert len(r.content) < 64_000 or r.status_code == 200, (body, len(r.content))

    fuzz()
