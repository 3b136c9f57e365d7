"""Your votes teach the judge, end to end against a real `usl serve` (subprocess, real SQLite, tiny benchmark,
`length` judge: it prefers the longer answer, so a user who votes for the shorter one disagrees every time):
vote on the page in headless Chromium, calibrate, see the board change, export it and the votes; then the
same over HTTP and the CLI, bad input refused with nothing lost, and deleting the votes deleting the
calibration."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from typer.testing import CliRunner

from server_real import CODING_ORDER, make_tiny, usl_serve
from test_browser import board, wait_for_view
from usl.cli import app
from usl.store import Store
from usl.store.votes import Vote, load_votes, save_calibration, save_votes
from usl.types import Criteria

LIKES = "Clear explanations"
SPEC = {"likes": [LIKES], "topics": ["coding"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    home = tmp_path_factory.mktemp("calibration_home")
    make_tiny(home)
    with usl_serve(home, "--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        yield home, url


def _vote_shorter(page) -> None:
    cards = page.locator("#check-pairs .check-pair")
    for i in range(cards.count()):
        card = cards.nth(i)
        left, right = (len(t.split()) for t in card.locator("pre").all_inner_texts())
        card.locator(f"button.vote[data-choice={'left' if left < right else 'right'}]").click()


@pytest.mark.browser
def test_vote_calibrate_see_the_board_change_and_export(page, site):
    home, url = site
    page.goto(url)
    wait_for_view(page, "default")
    page.check("#topic-list input[value=coding]")
    page.fill("#likes", LIKES)
    page.click("#rank-btn")
    wait_for_view(page, "custom")
    assert board(page) == CODING_ORDER                      # the length judge: the longest first

    page.click("#check-start")
    page.wait_for_selector("#check-pairs .check-pair")
    assert page.locator("#check-pairs .check-pair").count() == 8     # one pair a query of the coding topic
    _vote_shorter(page)
    page.click("#check-done")
    page.wait_for_selector("#check-agreement", timeout=120000)        # reads the criteria's length intent
    assert page.inner_text("#check-agreement").startswith("The judge agrees with you on 0% (0 of 8")
    assert page.is_disabled("#use-calibration")             # no calibrated judge before it is fitted

    page.click("#check-calibrate")
    page.wait_for_selector("#calibration-agreement", timeout=60000)
    text = page.inner_text("#calibration-agreement")
    assert "of your 8 votes, the shipped judge with 0%" in text
    assert int(text.split("agrees with ")[1].split("%")[0]) >= 75     # leave-one-out, not the fitted votes
    assert "m_code 1 → 2" in page.inner_text("#calibration-moved")     # the longest answers lose their lead

    page.check("#use-calibration")
    page.wait_for_function("() => new URLSearchParams(location.search).get('calibration') === 'mine'")
    page.wait_for_function("order => JSON.stringify([...document.querySelectorAll('#leaderboard tbody tr')]"
                           ".map(r => r.querySelectorAll('td')[1].innerText)) !== JSON.stringify(order)",
                           arg=CODING_ORDER, timeout=60000)
    calibrated = board(page)
    assert calibrated[0] == "m_mid" and calibrated != CODING_ORDER      # the board changed

    exported = httpx.get(url + page.get_attribute("#export-csv", "href"))
    assert [r["model"] for r in csv.DictReader(io.StringIO(exported.text))] == calibrated
    spec = httpx.get(url + page.get_attribute("#export-json", "href")).json()["leaderboard"]["spec"]
    assert spec["calibration"] == "mine" and spec["calibration_weights"]["length"] < 0
    votes = httpx.get(url + page.get_attribute("#check-export", "href")).text.splitlines()
    assert len(votes) == 8 and all(json.loads(v)["criteria"] == [LIKES] for v in votes)
    page.goto(page.url)                                     # the page's link ranks under the calibration at once
    wait_for_view(page, "custom")
    assert board(page) == calibrated
    assert page.errors == []


def _post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


def test_the_board_is_reproduced_from_its_spec_and_follows_a_refit(site):
    home, url = site
    _seed_votes(home, n=24)
    out = CliRunner().invoke(app, ["--home", str(home), "calibrate", "again", "--criteria", LIKES, "--judge", "length",
                                   "--benchmark", "tiny"])
    assert out.exit_code == 0 and "calibration 'again'" in out.output and "length" in out.output, out.output
    first = _post(url, "/api/leaderboard", {**SPEC, "calibration": "again"}).json()["leaderboard"]
    assert [r["model"] for r in first["rows"]] != CODING_ORDER
    out = CliRunner().invoke(app, ["--home", str(home), "rank", "--no-server", "--calibration", "again",
                                   "--topics", "coding", "--judge", "length", "--benchmark", "tiny", "--format", "json"])
    assert out.exit_code == 0, out.output
    again = json.loads(out.output[out.output.index("{"):])
    assert again["rows"] == first["rows"]                     # the CLI, without --criteria: the calibration's
    assert again["spec"]["calibration_version"] == first["spec"]["calibration_version"]
    saved = home / "board.json"
    saved.write_text(json.dumps({"spec": first["spec"], "rows": first["rows"]}))
    out = CliRunner().invoke(app, ["--home", str(home), "rank", "--no-server", "--spec", str(saved), "--format", "json"])
    assert out.exit_code == 0 and "warning:" not in out.output, out.output
    assert json.loads(out.output[out.output.index("{"):])["rows"] == first["rows"]     # reproduced from its spec
    # votes the other way: refitting the same name is another board, not the cached one
    _seed_votes(home, longer=True, n=80)
    _post(url, "/api/check/calibrate", {"spec": SPEC, "name": "again"}).raise_for_status()
    refit = _post(url, "/api/leaderboard", {**SPEC, "calibration": "again"}).json()["leaderboard"]
    assert refit["spec"]["calibration_version"] != first["spec"]["calibration_version"]
    assert [r["model"] for r in refit["rows"]] == CODING_ORDER


def _seed_votes(home, longer: bool = False, n: int = 8, model: str = "") -> None:
    """``n`` votes under SPEC's criteria on the coding queries, for the longer (or the shorter) answer;
    ``model``: every vote on that model's (made-up) answers."""
    from server_real import _words

    votes = []
    for k in range(n):
        i, m = k % 8, model or ("m_code", "m_write", "m_mid")[k % 3]
        words = 3 if model else _words(m, i)
        choice = "model" if (words > 10) == longer else "baseline"       # the baseline's answers: 10 words
        votes.append(Vote("tiny", f"q{i}", f"Write a Python function number {i}", m, " ".join([f"{m}-w"] * words),
                          "base", " ".join(["base-w"] * 10), Criteria((LIKES,)), choice, True, "length@x", 0.5))
    save_votes(Store(home / "usl.sqlite"), votes)


def test_bad_input_is_refused_with_a_clear_message_and_nothing_lost(site):
    home, url = site
    store = Store(home / "usl.sqlite")
    _seed_votes(home)
    _post(url, "/api/check/calibrate", {"spec": SPEC, "name": "kept"}).raise_for_status()
    before = (len(load_votes(store)), httpx.get(url + "/api/export.csv", params={**SPEC, "calibration": "kept"}).text)

    r = _post(url, "/api/check/calibrate", {"spec": {"likes": ["Never voted under this"]}, "name": "kept"})
    assert r.status_code == 422 and "no stored votes on benchmark 'tiny' under the criteria" in r.json()["detail"]
    r = _post(url, "/api/leaderboard", {"likes": ["Other words"], "topics": ["coding"], "calibration": "kept"})
    assert r.status_code == 422 and "fitted under the criteria ['Clear explanations']" in r.json()["detail"]
    r = _post(url, "/api/leaderboard", {**SPEC, "calibration": "nobody"})
    assert r.status_code == 422 and "unknown calibration 'nobody' (stored: " in r.json()["detail"]

    # a calibration of another benchmark, and one of another version of the judge
    record, ids = _stored(store, "kept")
    save_calibration(store, "elsewhere", "other", record["judge"], {**record, "benchmark": "other"}, ids)
    r = _post(url, "/api/leaderboard", {**SPEC, "calibration": "elsewhere"})
    assert r.status_code == 422 and "fitted on votes of benchmark 'other', not 'tiny'" in r.json()["detail"]
    save_calibration(store, "old-judge", "tiny", "length@0", {**record, "judge": "length@0"}, ids)
    r = _post(url, "/api/leaderboard", {**SPEC, "calibration": "old-judge"})
    assert r.status_code == 422 and "fitted for judge length@0, but this judge is length@" in r.json()["detail"]

    # votes of a model the benchmark no longer has: refused at the door and when calibrating
    r = _post(url, "/api/check/votes", {"spec": SPEC, "votes": [
        {"query_id": "q0", "model": "m_code", "model_first": True, "choice": "left"},
        {"query_id": "q1", "model": "m_removed", "model_first": True, "choice": "left"}]})
    assert r.status_code == 422 and "'m_removed' is not on benchmark 'tiny' (removed" in r.json()["detail"]
    _seed_votes(home, n=1, model="m_removed")
    r = _post(url, "/api/check/calibrate", {"spec": SPEC, "name": "kept"})
    assert r.status_code == 422 and "no longer on benchmark 'tiny': m_removed" in r.json()["detail"]
    out = CliRunner().invoke(app, ["--home", str(home), "calibrate", "kept", "--criteria", LIKES, "--judge", "length",
                                   "--benchmark", "tiny"])
    assert out.exit_code != 0 and "usl data delete-votes --model m_removed" in out.output

    # nothing lost: the votes (the refused one of the request too) and the calibration's board as they were
    assert len(load_votes(store)) == before[0] + 1
    assert httpx.get(url + "/api/export.csv", params={**SPEC, "calibration": "kept"}).text == before[1]
    out = CliRunner().invoke(app, ["--home", str(home), "data", "delete-votes", "--model", "m_removed"])
    assert out.exit_code == 0 and out.output.startswith("deleted 1 votes")


def _stored(store, name):
    from usl.store.votes import load_calibration

    return load_calibration(store, name)


def test_deleting_the_votes_deletes_the_calibration(site):
    home, url = site
    _seed_votes(home)
    _post(url, "/api/check/calibrate", {"spec": SPEC, "name": "gone"}).raise_for_status()
    assert _post(url, "/api/leaderboard", {**SPEC, "calibration": "gone"}).status_code == 200
    r = httpx.delete(url + "/api/check/votes")
    assert r.status_code == 200 and "gone" in r.json()["calibrations"]
    r = _post(url, "/api/leaderboard", {**SPEC, "calibration": "gone"})
    assert r.status_code == 422 and "unknown calibration 'gone'" in r.json()["detail"]
