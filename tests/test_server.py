"""The HTTP API against a real uvicorn server (fake engine with known answers, see server_fake)."""

from __future__ import annotations

import csv
import io
import json
import threading
import time

import httpx
import pytest

from server_fake import MODELS, FakeService, serve_in_thread
from usl.server.app import ServerConfig, create_app

CFG = ServerConfig(benchmark="tiny", judges=("length", "random"))


@pytest.fixture(scope="module")
def served():
    svc = FakeService(delay_s=0.2)
    with serve_in_thread(create_app(svc, CFG)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield svc, client


def events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_meta_endpoints(served):
    _, c = served
    assert c.get("/api/health").json() == {"status": "ok", "benchmarks": 1}
    assert c.get("/api/benchmarks").json() == ["tiny"]
    cfg = c.get("/api/config").json()
    assert cfg["judge"] == "length" and cfg["judges"] == ["length", "random"]
    assert cfg["reference"] == "crm"                     # ServerConfig's default reference judge
    assert cfg["limits"]["max_criteria"] == 10 and cfg["limits"]["max_criterion_chars"] == 300
    topics = c.get("/api/topics", params={"benchmark": "tiny"}).json()
    assert [t["id"] for t in topics] == ["coding", "writing", "math"]
    assert topics[0] == {"id": "coding", "name": "Coding & debugging", "n_queries": 40, "keywords": ["python", "sql"]}
    r = c.get("/api/topics", params={"benchmark": "nope"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_openapi_documents_the_spec_and_its_limits(served):
    _, c = served
    doc = c.get("/openapi.json").json()
    for path in ("/api/leaderboard", "/api/leaderboard/stream", "/api/leaderboard/refine", "/api/examples",
                 "/api/export.csv",
                 "/api/export.json", "/api/topics", "/api/benchmarks", "/api/health"):
        assert path in doc["paths"], path
    spec = doc["components"]["schemas"]["SpecIn"]["properties"]
    assert spec["likes"]["maxItems"] == 10 and spec["likes"]["items"]["maxLength"] == 300
    assert spec["use_case"]["maxLength"] == 500
    assert "LeaderboardResponse" in doc["components"]["schemas"]


def test_default_leaderboard(served):
    _, c = served
    body = c.post("/api/leaderboard", json={}).json()
    rows = body["leaderboard"]["rows"]
    assert [r["model"] for r in rows] == list(MODELS)
    assert rows[0]["win_rate"] == 80.0 and rows[0]["ci"] == [76.0, 84.0]
    assert body["is_default"] is True
    assert body["leaderboard"]["spec"]["judge"] == "length"            # the server's default judge
    assert body["comparison"]["kendall_tau"] == 1.0
    p0 = body["comparison"]["placements"][0]
    assert p0 == {"model": "alpha-7b", "position": 1, "rank_low": 1, "rank_high": 1, "default_position": 1,
                  "default_rank_low": 1, "default_rank_high": 1, "default_win_rate": 80.0}


def test_custom_criteria_change_the_ranking_and_warn_on_contradictions(served):
    _, c = served
    spec = {"likes": ["Short answers"], "avoid": ["short   answers"], "topics": ["coding"]}
    body = c.post("/api/leaderboard", json=spec).json()
    rows = body["leaderboard"]["rows"]
    assert [r["model"] for r in rows] == list(MODELS[::-1])
    assert rows[0]["win_rate"] == 75.0                                 # topic shift
    assert list(rows[0]["topics"]) == ["Coding & debugging"]
    assert body["is_default"] is False
    assert body["comparison"]["kendall_tau"] == -1.0
    assert body["warnings"] == ["You both like and avoid: Short answers"]
    assert body["leaderboard"]["spec"]["criteria"] == {"likes": ["Short answers"], "avoid": ["short answers"]}
    assert "likes=Short+answers" in body["query"] and "topics=coding" in body["query"]
    # GET with the same spec as query parameters gives the same board
    got = c.get("/api/leaderboard", params=[("likes", "Short answers"), ("avoid", "short answers"),
                                            ("topics", "coding")]).json()
    assert got["leaderboard"]["rows"] == rows


def test_topic_names_are_accepted_as_ids(served):
    _, c = served
    body = c.post("/api/leaderboard", json={"topics": ["Math"]}).json()
    assert body["leaderboard"]["spec"]["topics"] == ["math"]


@pytest.mark.parametrize("spec, status, match", [
    ({"likes": [f"c{i}" for i in range(11)]}, 422, r"likes: List should have at most 10 items"),
    ({"avoid": ["x" * 301]}, 422, r"avoid\.0: String should have at most 300 characters"),
    ({"likes": ["Concise", " "]}, 422, r"likes\.1: blank; a criterion needs words"),
    ({"likes": [""]}, 422, r"likes\.0: blank; a criterion needs words"),
    ({"use_case": "u" * 501}, 422, r"use_case: String should have at most 500 characters"),
    ({"topics": ["coding", "astrology"]}, 422, r"unknown topic 'astrology'"),
    ({"judge": "crm:/etc/passwd"}, 422, r"judge 'crm:/etc/passwd' is not served here; choose one of: length, random"),
    ({"benchmark": "nope"}, 422, r"unknown benchmark 'nope'; known: tiny"),
    ({"baseline": "nobody"}, 422, r"unknown baseline 'nobody'"),
    ({"likes": "not a list"}, 422, r"likes: Input should be a valid list"),
    ({"colour": "red"}, 422, r"colour: Extra inputs are not permitted"),
    ({"n_bootstrap": 10_001}, 422, r"n_bootstrap: Input should be less than or equal to 10000"),
    ({"seed": -1}, 422, r"seed: Input should be greater than or equal to 0"),
    ({"n_bootstrap": 3}, 422, r"n_bootstrap: 3 resamples give no usable interval"),
    ({"n_bootstrap": True}, 422, r"n_bootstrap: Input should be a valid integer"),
    ({"seed": "7"}, 422, r"seed: Input should be a valid integer"),
    ({"topics": ["math"], "use_case": "homework"}, 422, r"choose topics or describe your use case, not both"),
])
def test_bad_specs_are_rejected_with_a_message(served, spec, status, match):
    import re

    _, c = served
    r = c.post("/api/leaderboard", json=spec)
    assert r.status_code == status
    assert re.search(match, r.json()["detail"]), r.json()["detail"]


def test_the_resamples_and_their_seed_are_the_requests_to_choose(served):
    """As the CLI's --n-bootstrap and --seed: the request's reach the engine's spec, and the board's link
    carries them, so the page and the GET routes rank the same board."""
    _, c = served
    none = c.post("/api/leaderboard", json={"likes": ["Concise"], "n_bootstrap": 0}).json()
    assert none["leaderboard"]["spec"]["n_bootstrap"] == 0 and "n_bootstrap=0" in none["query"]
    a = c.post("/api/leaderboard", json={"likes": ["Concise"], "n_bootstrap": 200, "seed": 7}).json()
    assert (a["leaderboard"]["spec"]["n_bootstrap"], a["leaderboard"]["spec"]["seed"]) == (200, 7)
    again = c.get("/api/leaderboard?" + a["query"]).json()
    assert (again["leaderboard"]["spec"]["n_bootstrap"], again["leaderboard"]["spec"]["seed"]) == (200, 7)
    plain = c.post("/api/leaderboard", json={"likes": ["Concise"]}).json()
    assert "n_bootstrap" not in plain["query"] and "seed" not in plain["query"]


def test_query_parameter_limits_match_the_body_limits(served):
    _, c = served
    r = c.get("/api/leaderboard/stream", params=[("likes", f"c{i}") for i in range(11)])
    assert r.status_code == 422 and "at most 10 items" in r.json()["detail"]
    r = c.get("/api/export.csv", params={"topics": "astrology"})
    assert r.status_code == 422 and "astrology" in r.json()["detail"]


def test_stream_sends_progress_then_the_result(served):
    svc, c = served
    params = [("likes", "Cites sources"), ("topics", "writing")]
    r = c.get("/api/leaderboard/stream", params=params)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = events(r.text)
    kinds = [k for k, _ in evs]
    assert kinds[-1] == "result" and set(kinds[:-1]) == {"progress"} and len(kinds) >= 3
    totals = [d["total"] for k, d in evs if k == "progress" and d["total"]]
    assert totals and evs[-2][1]["done"] <= totals[-1]
    result = evs[-1][1]
    assert [row["model"] for row in result["leaderboard"]["rows"]] == list(MODELS[::-1])
    assert result["elapsed_s"] >= 0.2                                       # the fake's delay


def test_stream_reports_engine_errors_as_an_error_event(served):
    _, c = served
    r = c.get("/api/leaderboard/stream", params={"baseline": "nobody", "likes": "x"})
    kind, data = events(r.text)[-1]
    assert kind == "error" and "unknown baseline 'nobody'" in data["message"]


def test_identical_requests_share_one_job(served):
    svc, c = served
    params = [("likes", "Shared job test"), ("topics", "math")]
    before = len(svc.rank_calls)
    results = []
    threads = [threading.Thread(target=lambda: results.append(c.get("/api/leaderboard", params=params)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200, 200, 200]
    c.get("/api/export.csv", params=params)
    ours = [s for s in svc.rank_calls[before:] if s.criteria.likes == ("Shared job test",)]
    assert len(ours) == 1


def test_examples_with_verdicts(served):
    _, c = served
    body = c.get("/api/examples", params={"model": "charlie-70b", "limit": 3, "likes": "Brevity"}).json()
    assert body["model"] == "charlie-70b" and body["criteria"] == ["Brevity"]
    assert [e["verdict"] for e in body["examples"]] == ["model", "baseline", "tie"]
    assert body["examples"][0]["baseline"] == "gpt4-baseline"
    r = c.get("/api/examples", params={"model": "zulu"})
    assert r.status_code == 422 and "unknown model 'zulu'" in r.json()["detail"]
    assert c.get("/api/examples", params={"model": "charlie-70b", "limit": 99}).status_code == 422


def test_a_boards_recorded_spec_posted_back_ranks_the_same_board_and_warns_on_drift(served):
    """``leaderboard.spec`` of a response, POSTed as it is (criteria nested, versions beside), ranks the same
    board; a version that differs from the board made now is warned about; bad shapes are 422s naming
    criteria, and a version field outside a recorded spec is still refused."""
    _, c = served
    first = c.post("/api/leaderboard", json={"likes": ["Posted back"], "topics": ["coding"]}).json()
    spec = first["leaderboard"]["spec"]
    assert spec["criteria"] == {"likes": ["Posted back"], "avoid": []} and spec["judge_identity"] == "fake@1"
    again = c.post("/api/leaderboard", json=spec)
    assert again.status_code == 200, again.text
    assert again.json()["leaderboard"]["rows"] == first["leaderboard"]["rows"]
    assert again.json()["warnings"] == first["warnings"]
    moved = c.post("/api/leaderboard", json=spec | {"judge_identity": "fake@0"}).json()
    assert any("recorded with judge fake@0, this board has fake@1" in w for w in moved["warnings"])
    for bad, why in (({**spec, "likes": ["x"]}, "not both"), ({**spec, "criteria": ["x"]}, "criteria: expected"),
                     ({**spec, "criteria": {"likes": "x"}}, "criteria.likes: expected a list of strings")):
        r = c.post("/api/leaderboard", json=bad)
        assert r.status_code == 422 and why in r.text
    assert c.post("/api/leaderboard", json={"likes": ["x"], "judge_identity": "fake@1"}).status_code == 422


def test_export_csv_and_json(served):
    _, c = served
    params = [("likes", "Export me"), ("topics", "coding"), ("topics", "math")]
    r = c.get("/api/export.csv", params=params)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["model"] for row in table] == list(MODELS[::-1])
    assert table[0]["rank"] == "1" and table[0]["win_rate"] == "75.00" and table[0]["ci_low"] == "71.00"
    assert table[0]["default_position"] == "6"                           # foxtrot was last by default
    assert table[0]["topic:Coding & debugging"] == "72.00" and table[0]["topic:Math"] == "75.00"
    j = c.get("/api/export.json", params=params)
    assert "attachment" in j.headers["content-disposition"]
    assert [row["model"] for row in j.json()["leaderboard"]["rows"]] == list(MODELS[::-1])


def test_export_of_the_refined_board(served):
    _, c = served
    params = [("likes", "Export refined"), ("refined", "true")]
    r = c.get("/api/export.csv", params=params)
    assert 'filename="usl_leaderboard_refined.csv"' in r.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["model"] for row in table] == list(MODELS[1:] + MODELS[:1])       # the fake's refined order
    body = c.get("/api/export.json", params=params).json()
    assert body["leaderboard"]["spec"]["refinement"]["queries_judged"] == 0      # cache only: nothing judged
    off = ServerConfig(benchmark="tiny", judges=("length",), warm=False, reference="")
    with serve_in_thread(create_app(FakeService(), off)) as url:
        assert httpx.get(url + "/api/export.csv", params=params, timeout=30).status_code == 404


def test_page_and_security_headers(served):
    _, c = served
    page = c.get("/")
    assert page.status_code == 200 and "<table id=\"leaderboard\"" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    js = c.get("/static/app.js")
    assert js.status_code == 200 and "innerHTML" not in js.text.replace("never innerHTML", "")
    assert c.get("/static/style.css").status_code == 200
    assert "content-security-policy" in c.get("/api/health").headers
    for path in ("/docs", "/redoc"):                     # served from the package, scripts from here only
        docs = c.get(path)
        assert "script-src 'self';" in docs.headers["content-security-policy"], path
        assert "http" not in docs.text.replace('content="width', ""), path                   # no CDN
    assert c.get("/docs-assets/swagger-ui-bundle.js").status_code == 200


def test_a_slow_contradiction_check_does_not_hold_the_table_back():
    svc = FakeService(contradiction_delay_s=0.6)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        r = httpx.get(url + "/api/leaderboard/stream", params=[("likes", "Tables"), ("avoid", "tables")], timeout=30)
    evs = events(r.text)
    assert [k for k, _ in evs][-3:] == ["result", "breakdown", "warnings"]
    result, breakdown = evs[-3][1], evs[-2][1]
    assert result["warnings"] == [] and result["elapsed_s"] < 0.5
    assert evs[-1][1] == {"warnings": ["You both like and avoid: Tables"]}
    # two criteria: the table comes first, the single-criterion boards after it
    assert result["leaderboard"]["criteria_breakdown"] == {}
    assert list(breakdown["criteria_breakdown"]) == ["Tables", "Avoid: tables"]
    assert breakdown["criteria_breakdown"]["Tables"]["alpha-7b"] == 75.0
    assert [s.per_criterion for s in svc.rank_calls if s.criteria.likes == ("Tables",)] == [False, True]


def test_one_criterion_needs_no_breakdown_event(served):
    _, c = served
    kinds = [k for k, _ in events(c.get("/api/leaderboard/stream", params={"likes": "Only one"}).text)]
    assert kinds[-1] == "result" and "breakdown" not in kinds


def test_progress_keeps_ticking_while_the_engine_is_silent():
    svc = FakeService(delay_s=2.4, steps=1)          # reports at the start and at the end only
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        r = httpx.get(url + "/api/leaderboard/stream", timeout=30)
    ticks = [d for k, d in events(r.text) if k == "progress" and d["total"] and d["done"] == 0]
    assert len(ticks) >= 2 and ticks[-1]["elapsed_s"] - ticks[0]["elapsed_s"] >= 0.9


def test_refine_streams_refined_boards_until_every_query_is_judged(served):
    svc, c = served
    r = c.get("/api/leaderboard/refine", params=[("likes", "Refine me"), ("topics", "writing")])
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = events(r.text)
    kinds = [k for k, _ in evs]
    n = FakeService.REFINE_QUERIES
    assert kinds == ["refined"] * (n + 1) + ["done"]      # the cached estimate first, then one per query
    judged = [d["leaderboard"]["spec"]["refinement"]["queries_judged"] for k, d in evs if k == "refined"]
    assert judged == list(range(n + 1))
    last = evs[-2][1]
    assert [row["model"] for row in last["leaderboard"]["rows"]] == list(MODELS[1:] + MODELS[:1])
    assert last["comparison"]["placements"]
    assert last["query"] == "likes=Refine+me&topics=writing&judge=length&benchmark=tiny"
    assert evs[-1][1]["queries_judged"] == n
    calls = [(spec.criteria.likes, spec.topics, ref, q) for spec, ref, q in svc.refine_calls
             if spec.criteria.likes == ("Refine me",)]
    assert calls[0] == (("Refine me",), ("writing",), "crm", 0) and {q for *_, q in calls[1:]} == {1}
    # judgments are kept: asking again sends the finished board at once
    assert [k for k, _ in events(c.get("/api/leaderboard/refine", params={"likes": "Refine me"}).text)] == \
        ["refined", "done"]


def test_refine_is_404_when_the_server_has_no_reference_judge():
    cfg = ServerConfig(benchmark="tiny", judges=("length",), warm=False, reference="")
    with serve_in_thread(create_app(FakeService(), cfg)) as url:
        assert httpx.get(url + "/api/config").json()["reference"] == ""
        r = httpx.get(url + "/api/leaderboard/refine", timeout=30)
    assert r.status_code == 404 and "does not refine" in r.json()["detail"]


def test_refine_reports_engine_errors_as_an_error_event(served):
    _, c = served
    r = c.get("/api/leaderboard/refine", params={"baseline": "nobody", "likes": "x"})
    kind, data = events(r.text)[-1]
    assert kind == "error" and "unknown baseline 'nobody'" in data["message"]


def test_refinement_streams_take_turns():
    svc = FakeService(refine_delay_s=0.05)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        def run(like, address):       # three clients: a client may hold only a few streams
            with httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30) as c:
                evs = events(c.get(url + "/api/leaderboard/refine", params={"likes": like}).text)
            results.append([k for k, _ in evs])

        results: list = []
        threads = [threading.Thread(target=run, args=(f"set {i}", f"127.0.0.{i + 2}")) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [["refined"] * (FakeService.REFINE_QUERIES + 1) + ["done"]] * 3
    assert svc.most_refining == 1 and len(svc.refine_calls) == 3 * (FakeService.REFINE_QUERIES + 1)


def test_a_closed_refinement_stream_stops_its_step_and_keeps_its_turn_until_then():
    """The page closes a stream mid-step: the step stops at its next progress report (what it judged
    is cached), and the next stream waits for that instead of running beside it."""
    svc = FakeService(refine_delay_s=3.0)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        with httpx.Client(timeout=30) as c, c.stream("GET", url + "/api/leaderboard/refine",
                                                     params={"likes": "closed early"}) as r:
            for line in r.iter_lines():
                if line.startswith("event: refined"):
                    break                               # the first board is out; the next step follows
            deadline = time.monotonic() + 10            # leave once that judging step has begun
            while not svc.refining and time.monotonic() < deadline:
                time.sleep(0.01)
            assert svc.refining == 1
        evs = events(httpx.get(url + "/api/leaderboard/refine", params={"likes": "next one"}, timeout=60).text)
    assert [k for k, _ in evs][-1] == "done"
    assert svc.most_refining == 1
    assert svc.refine_stopped == 1


def test_a_refinement_that_judges_nothing_new_stops_with_an_error():
    svc = FakeService(refine_stuck=True)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        evs = events(httpx.get(url + "/api/leaderboard/refine", params={"likes": "stuck"}, timeout=30).text)
    assert [k for k, _ in evs] == ["refined", "refined", "error"]
    assert "judged no new one" in evs[-1][1]["message"]


def test_per_criterion_false_returns_the_board_without_the_breakdown(served):
    svc, c = served
    spec = {"likes": ["Bullet lists"], "avoid": ["Long answers"]}
    with_split = c.post("/api/leaderboard", json=spec).json()
    alone = c.post("/api/leaderboard", json={**spec, "per_criterion": False}).json()
    assert with_split["leaderboard"]["criteria_breakdown"] != {}
    assert alone["leaderboard"]["criteria_breakdown"] == {}
    assert alone["leaderboard"]["rows"] == with_split["leaderboard"]["rows"]
    asked = [s.per_criterion for s in svc.rank_calls if s.criteria.likes == ("Bullet lists",)]
    assert asked == [True, False]


def test_serve_offers_the_factored_crm_where_its_vectors_ship():
    from usl.cli.serve import default_judges

    assert default_judges("alpaca_eval") == ("default", "crm-factored")
    assert default_judges("arena_bench") == ("default",)


def test_a_judge_without_the_boards_vectors_is_refused_before_any_job():
    """A service that says the judge would first have to read pairs (crm-factored on a board
    whose vectors are not stored): a 422 naming the command that reads them, and no job."""
    class Unread(FakeService):
        def unread_pairs(self, spec):
            return 7 if spec.judge == "random" else 0

    svc = Unread()
    with serve_in_thread(create_app(svc, CFG)) as url:
        r = httpx.post(url + "/api/leaderboard", json={"judge": "random", "baseline": "alpha-7b"}, timeout=30)
        assert r.status_code == 422
        assert "7 pairs" in r.text and "usl rank --judge random --benchmark tiny --baseline alpha-7b" in r.text
        assert httpx.post(url + "/api/leaderboard", json={"judge": "length"}, timeout=30).status_code == 200
    assert all(s.judge != "random" for s in svc.rank_calls)


def test_start_up_does_not_read_a_default_board_whose_pairs_are_not_stored(caplog):
    class Unread(FakeService):
        def unread_pairs(self, spec):
            return 3

    svc = Unread()
    with caplog.at_level("WARNING"):
        with serve_in_thread(create_app(svc, CFG)) as url:
            assert httpx.get(url + "/api/health", timeout=30).status_code == 200
            assert httpx.post(url + "/api/leaderboard", json={}, timeout=30).status_code == 422
    assert svc.rank_calls == [] and "no stored answer vectors for 3 pairs" in caplog.text


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_the_readers_warm_up_runs_below_requests_on_a_thread_that_ends_with_it():
    """``_in_background`` (the readers' warm-up): its thread and the threads it starts (PyTorch's batch workers)
    run at WARM_UP_NICE more than the server's, and the thread ends with the work, so no thread that later
    serves a request keeps that priority."""
    import asyncio
    import os

    from usl.server.boards import WARM_UP_NICE, _in_background

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def work():
        child: list[int] = []
        t = threading.Thread(target=lambda: child.append(nice()))
        t.start()
        t.join()
        return threading.current_thread(), nice(), child[0]

    base = nice()
    thread, own, child = asyncio.run(_in_background(work))
    assert own == child == min(base + WARM_UP_NICE, 19)
    thread.join(timeout=5)
    assert not thread.is_alive() and nice() == base
