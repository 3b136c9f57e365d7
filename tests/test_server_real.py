"""`usl serve` as a subprocess with the real leaderboard engine, on a tiny benchmark in a real store,
judged by the `length` judge so every number is known (see server_real)."""

from __future__ import annotations

import csv
import io
import json
import os
import time

import httpx
import pytest
from server_real import (
    CODING_ORDER,
    DEFAULT_ORDER,
    WIN_RATES,
    make_tiny,
    serve_output,
    tiny_alpaca_layout,
    usl_serve,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    make_tiny(home)
    with usl_serve(home, "--benchmark", "tiny", "--judge", "length", "--refine-with", "random:3") as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield home, url, client


def rates(body: dict) -> dict[str, float]:
    return {r["model"]: r["win_rate"] for r in body["leaderboard"]["rows"]}


def test_serve_prints_its_url(served):
    home, url, _ = served
    port = url.rsplit(":", 1)[1]
    assert f"at http://localhost:{port}/" in serve_output(home)


def test_topics_and_default_board(served):
    _, _, c = served
    topics = c.get("/api/topics").json()
    assert [(t["id"], t["name"], t["n_queries"]) for t in topics] == [("coding", "Coding", 8),
                                                                     ("writing", "Creative writing", 8)]
    body = c.post("/api/leaderboard", json={}).json()
    assert [r["model"] for r in body["leaderboard"]["rows"]] == DEFAULT_ORDER
    assert rates(body) == WIN_RATES["default"]
    assert body["leaderboard"]["spec"]["judge"] == "length" and body["leaderboard"]["spec"]["baseline"] == "base"
    m_mid = body["leaderboard"]["rows"][0]
    assert m_mid["topics"] == {"Coding": 50.0, "Creative writing": 100.0}
    assert m_mid["avg_length"] == 11.0 and m_mid["n"] == 16
    assert body["is_default"] and body["comparison"]["kendall_tau"] == 1.0
    home = served[0]
    deadline = time.monotonic() + 30      # the log line follows the warm-up's job, which the request shared
    while "default board ranked (3 models)" not in serve_output(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "the page is ready" in serve_output(home)


def test_topic_selection_changes_the_ranking(served):
    _, _, c = served
    body = c.post("/api/leaderboard", json={"topics": ["coding"], "likes": ["Runnable code"]}).json()
    assert [r["model"] for r in body["leaderboard"]["rows"]] == CODING_ORDER
    assert rates(body) == WIN_RATES["coding"]
    assert body["leaderboard"]["spec"]["n_queries"] == 8
    placements = {p["model"]: p for p in body["comparison"]["placements"]}
    assert placements["m_code"]["position"] == 1 and placements["m_code"]["default_position"] == 2
    assert body["comparison"]["kendall_tau"] == pytest.approx(1 / 3, abs=1e-3)


def test_stream_examples_export(served):
    _, _, c = served
    params = [("topics", "coding"), ("likes", "Runnable code"), ("likes", "Explains the idea")]
    r = c.get("/api/leaderboard/stream", params=params)
    evs = {}
    for block in r.text.strip().split("\n\n"):
        kind, data = block.split("\n")
        evs[kind[len("event: "):]] = json.loads(data[len("data: "):])
    assert list(evs) == ["progress", "result", "breakdown"]
    assert [row["model"] for row in evs["result"]["leaderboard"]["rows"]] == CODING_ORDER
    # two likes: judged one by one too (the length judge ignores them, so all equal the combined rate)
    assert evs["breakdown"]["criteria_breakdown"]["Runnable code"]["m_code"] == 100.0
    assert sum(evs["breakdown"]["criteria_contribution"].values()) == pytest.approx(1.0, abs=0.01)

    ex = c.get("/api/examples", params=[("model", "m_mid"), ("limit", "4"), *params]).json()
    verdicts = [(e["query_id"], e["verdict"], e["p_model_wins"]) for e in ex["examples"]]
    assert {v for _, v, _ in verdicts} == {"model", "baseline"}
    for qid, v, p in verdicts:
        assert (int(qid[1:]) >= 4) == (v == "model") and p == (1.0 if v == "model" else 0.0)
    assert ex["examples"][0]["baseline"] == "base" and ex["examples"][0]["topic"] == "Coding"

    table = list(csv.DictReader(io.StringIO(c.get("/api/export.csv", params=params).text)))
    assert [row["model"] for row in table] == CODING_ORDER and table[0]["win_rate"] == "100.00"


def test_refine_ends_at_the_reference_judges_board(served):
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.types import Criteria

    home, _, c = served
    assert c.get("/api/config").json()["reference"] == "random:3"
    r = c.get("/api/leaderboard/refine", params={"topics": "coding", "likes": "Runnable code"})
    evs = [(b.split("\n")[0][len("event: "):], json.loads(b.split("\n")[1][len("data: "):]))
           for b in r.text.strip().split("\n\n")]
    assert [k for k, _ in evs] == ["refined"] * 9 + ["done"]          # cached estimate, then the 8 coding queries
    judged = [d["leaderboard"]["spec"]["refinement"]["queries_judged"] for k, d in evs if k == "refined"]
    assert judged == list(range(9))
    final = evs[-2][1]["leaderboard"]
    assert final["spec"]["refinement"]["reference_identity"].startswith("random")
    ref = LeaderboardService(Store(home / "usl.sqlite")).rank(
        LeaderboardSpec(criteria=Criteria(("Runnable code",)), benchmark="tiny", topics=("coding",),
                        judge="random:3", per_criterion=False))
    assert {row["model"]: row["win_rate"] for row in final["rows"]} == {row.model: row.win_rate for row in ref.rows}


def test_real_errors_are_422(served):
    _, _, c = served
    r = c.post("/api/leaderboard", json={"topics": ["astrology"]})
    assert r.status_code == 422 and "astrology" in r.json()["detail"]
    r = c.post("/api/leaderboard", json={"baseline": "nobody"})
    assert r.status_code == 422 and "baseline 'nobody' is not a model" in r.json()["detail"]
    r = c.get("/api/examples", params={"model": "zulu"})
    assert r.status_code == 422 and "unknown model 'zulu'" in r.json()["detail"]


def test_first_start_imports_the_default_benchmark_and_builds_topics(tmp_path):
    shared = tiny_alpaca_layout(tmp_path / "shared")
    home = tmp_path / "home"
    home.mkdir()
    with usl_serve(home, "--judge", "length", env={"USL_SHARED_DATA": str(shared)}, timeout_s=120) as url:
        assert httpx.get(url + "/api/benchmarks").json() == ["alpaca_eval"]
        topics = httpx.get(url + "/api/topics").json()
        assert topics and sum(t["n_queries"] for t in topics) == 18          # the 18 board queries
        body = httpx.post(url + "/api/leaderboard", json={}, timeout=60).json()
        assert [r["model"] for r in body["leaderboard"]["rows"]] == ["m1", "m2"]
    out = serve_output(home)
    assert "first start: importing AlpacaEval" in out and "topics in" in out
    # a second start finds both and imports nothing
    with usl_serve(home, "--judge", "length", env={"USL_SHARED_DATA": str(shared)}) as url:
        assert httpx.get(url + "/api/benchmarks").json() == ["alpaca_eval"]
    assert "importing" not in serve_output(home)


def test_serve_refuses_an_unknown_benchmark(tmp_path):
    from typer.testing import CliRunner

    from usl.cli import app

    r = CliRunner().invoke(app, ["--home", str(tmp_path), "serve", "--benchmark", "nope"])
    assert r.exit_code == 2
    assert "benchmark 'nope' is not in the store" in r.output and "usl data import" in r.output


def test_serve_offers_crm_factored_and_serves_only_boards_whose_pairs_are_read(tmp_path):
    """Real `usl serve`, shipped `crm` weights: the default benchmark is served with `default`
    and `crm-factored`. This tiny board's pairs are not in the shipped bank: the server refuses
    to read them inside a request (422 naming the command), `usl rank --judge crm-factored` reads
    them (2 transformer passes each) into the data directory's bank, and a restart serves them."""
    import subprocess
    import sys

    shared = tiny_alpaca_layout(tmp_path / "shared")
    home = tmp_path / "home"
    home.mkdir()
    env = {"USL_SHARED_DATA": str(shared)}
    spec = {"likes": ["Short answers"], "judge": "crm-factored", "per_criterion": False}
    with usl_serve(home, env=env, timeout_s=180) as url:
        assert httpx.get(url + "/api/config").json()["judges"] == ["default", "crm-factored"]
        r = httpx.post(url + "/api/leaderboard", json=spec, timeout=60)
        assert r.status_code == 422
        assert "36 pairs" in r.json()["detail"] and "usl rank --judge crm-factored --benchmark alpaca_eval" \
            in r.json()["detail"]
        assert httpx.post(url + "/api/leaderboard", json={}, timeout=60).status_code == 200   # default judge
    assert "answer pairs with" not in serve_output(home)                 # nothing read by the server

    ranked = subprocess.run([sys.executable, "-c", "from usl.cli import main; main()", "--home", str(home), "rank",
                             "--judge", "crm-factored", "--criteria", "Short answers", "--format", "json"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert ranked.returncode == 0, ranked.stderr
    assert "reading 36 answer pairs" in ranked.stderr                    # 18 board queries x 2 models
    first = {r["model"]: r["win_rate"] for r in json.loads(ranked.stdout)["rows"]}

    with usl_serve(home, env=env, timeout_s=180) as url:
        again = rates(httpx.post(url + "/api/leaderboard", json=spec, timeout=60).json())
    assert again == first and sorted(again) == ["m1", "m2"]
    assert "answer pairs with" not in serve_output(home)                 # every pair found in the stored bank


def test_an_unknown_baseline_is_a_422_before_any_event_or_job(served):
    """It was an SSE stream whose last event said so, after a ranking job had started."""
    _, _, c = served
    for path in ("/api/leaderboard/stream", "/api/leaderboard/refine", "/api/leaderboard"):
        r = c.get(path, params={"baseline": "nobody", "likes": "x"})
        assert r.status_code == 422 and "baseline 'nobody' is not a model of benchmark 'tiny'" in r.json()["detail"]


def test_get_reads_per_criterion_as_post_does_and_its_link_keeps_it(served):
    _, _, c = served
    params = {"likes": ["Short answers", "Uses examples"], "per_criterion": "false"}
    body = c.get("/api/leaderboard", params=params).json()
    assert body["leaderboard"]["spec"]["per_criterion"] is False and body["leaderboard"]["criteria_breakdown"] == {}
    assert "per_criterion=false" in body["query"]
    both = c.get("/api/leaderboard", params={"likes": params["likes"]}).json()
    assert set(both["leaderboard"]["criteria_breakdown"]) == {"Short answers", "Uses examples"}
    assert "per_criterion" not in both["query"]


@pytest.mark.parametrize("content, needle", [
    ("likes=a", "body: invalid JSON at character 0"),
    ("[1, 2]", "body: Input should be a valid dictionary"),
    ("", "body: Field required"),
])
def test_a_bad_body_is_named_as_the_body(served, content, needle):
    _, _, c = served
    r = c.post("/api/leaderboard", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith(needle), r.text


def test_a_blank_topic_beside_a_use_case_is_no_topic(served):
    _, _, c = served
    r = c.post("/api/leaderboard", json={"topics": [" "], "use_case": "write some code", "per_criterion": False})
    assert r.status_code == 200 and r.json()["leaderboard"]["spec"]["topics"] == []
