"""Check the judge on your own taste: agreement with intervals (known values), votes stored in SQLite and
exported in the paper's JSONL that `usl eval` reads, and the page's loop in headless Chromium against a
real `usl serve` (tiny benchmark, `length` judge: it prefers the longer answer, so agreement is known)."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from server_real import make_tiny, usl_serve
from usl.cli import app
from usl.leaderboard.check import agreement, suggest_length, wilson

runner = CliRunner()


def test_wilson_interval_known_values():
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_agreement_counts_decided_votes_and_leaves_ties_apart():
    a = agreement(["model", "baseline", "tie", "model", "baseline"], [0.9, 0.2, 0.7, 0.3, 0.5])
    assert (a.decided, a.agree, a.ties) == (4, 2, 1)       # 0.5 is no preference: never agreement
    assert a.rate == 0.5 and a.ci == pytest.approx(wilson(2, 4))
    assert agreement(["tie"], [0.9]).rate is None


def test_a_length_criterion_is_suggested_only_when_the_votes_show_it_and_the_criteria_do_not():
    choices = ["model", "baseline", "model", "baseline", "model", "tie"]
    model, base = [10, 50, 10, 50, 10, 10], [50, 10, 50, 10, 50, 50]       # the shorter answer chosen 5 of 5
    assert suggest_length(choices, model, base, mentioned=False).startswith("Short answers that get to the point")
    assert suggest_length(choices, model, base, mentioned=True) is None
    assert suggest_length(choices, base, model, mentioned=False).startswith("Detailed, thorough answers")
    assert suggest_length(choices[:3], model, base, mentioned=False) is None            # too few votes
    assert suggest_length(choices, [10] * 6, [12] * 6, mentioned=False) is None         # no clear difference


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    home = tmp_path_factory.mktemp("check_home")
    make_tiny(home)
    with usl_serve(home, "--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        yield home, url


@pytest.mark.browser
def test_vote_on_pairs_and_see_the_agreement(page, site, tmp_path):
    home, url = site
    page.goto(url)
    page.wait_for_selector("#topic-list input[value=coding]")
    page.check("#topic-list input[value=coding]")
    page.fill("#likes", "Clear explanations")
    page.fill("#avoid", "Rambling")
    page.click("#check-start")
    page.wait_for_selector("#check-pairs .check-pair")
    cards = page.locator("#check-pairs .check-pair")
    assert cards.count() == 8                                    # the coding topic has 8 questions
    assert set(cards.evaluate_all("cs => cs.map(c => c.dataset.query)")) == {f"q{i}" for i in range(8)}
    against = 0
    for i in range(cards.count()):
        card = cards.nth(i)
        left, right = (len(t.split()) for t in card.locator("pre").all_inner_texts())
        longer = "left" if left > right else "right"
        pick = longer if i >= 2 or left == right else ("right" if longer == "left" else "left")
        against += pick != longer
        card.locator(f"button.vote[data-choice={pick}]").click()
    assert against == 2
    page.click("#check-done")
    # the check reads the criteria's length intent: a MiniLM the warm-up loads, a minute on a busy machine
    page.wait_for_selector("#check-agreement", timeout=120000)
    assert page.inner_text("#check-agreement").startswith("The judge agrees with you on 75% (6 of 8; 95% CI")
    assert page.locator("#check-per-criterion li").count() == 2          # each criterion alone
    assert page.locator("#check-pairs .check-pair.disagree").count() == 2
    assert page.errors == []

    # stored in SQLite, exported in the paper's JSONL, read by usl eval: the same agreement
    lines = httpx.get(url + "/api/check/export.jsonl", timeout=30).text.splitlines()
    assert len(lines) == 8
    sample = json.loads(lines[0])
    assert sample["criteria"] == ["Clear explanations", "Avoid: Rambling"] and sample["source"] == "votes/tiny"
    exported = tmp_path / "votes.jsonl"
    r = runner.invoke(app, ["--home", str(home), "data", "export-votes", str(exported)])
    assert r.exit_code == 0 and "wrote 8 votes" in r.output
    assert exported.read_text().splitlines() == lines
    report = runner.invoke(app, ["--home", str(home), "eval", "--judge", "length", "--data", str(exported), "--json"])
    assert report.exit_code == 0, report.output
    assert '"accuracy": 0.75' in report.stdout


def test_votes_on_unknown_pairs_are_refused_and_nothing_is_stored(site):
    home, url = site
    before = httpx.get(url + "/api/check/export.jsonl", timeout=30).text
    r = httpx.post(url + "/api/check/votes", json={"spec": {"benchmark": "tiny"},
                                                   "votes": [{"query_id": "q0", "model": "nobody", "model_first": True,
                                                              "choice": "left"}]}, timeout=30)
    assert r.status_code == 422 and "no pair of answers for query 'q0' and model 'nobody'" in r.json()["detail"]
    r = httpx.post(url + "/api/check/votes", json={"votes": [{"query_id": "q0", "model": "m_mid", "model_first": True,
                                                              "choice": "maybe"}]}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"].startswith("votes.0.choice:")
    assert httpx.get(url + "/api/check/export.jsonl", timeout=30).text == before


def test_votes_are_limited_to_100_a_minute_per_client_origin_or_not(site):
    """Two batches of 50 votes are stored; a third within the minute is a 429 with Retry-After and
    stores nothing (the bucket refills 100/60 a second: not 50 in the seconds the first two take);
    another client (another loopback address) still votes."""
    import sqlite3

    home, url = site
    votes = [{"query_id": f"q{i % 16}", "model": "m_mid", "model_first": i % 2 == 0, "choice": "left"}
             for i in range(50)]
    count = lambda: sqlite3.connect(home / "usl.sqlite").execute("SELECT COUNT(*) FROM votes").fetchone()[0]
    before = count()
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60) as script:
        assert [script.post(url + "/api/check/votes", json={"votes": votes}).status_code for _ in range(2)] == [200, 200]
        r = script.post(url + "/api/check/votes", json={"votes": votes})
    assert r.status_code == 429 and "at most 100 a minute per client" in r.json()["detail"]
    assert int(r.headers["Retry-After"]) >= 1
    assert count() == before + 100
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=60) as other:
        assert other.post(url + "/api/check/votes", json={"votes": votes[:5]}).status_code == 200
    assert count() == before + 105
