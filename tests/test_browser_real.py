"""The acceptance flow in headless Chromium against `usl serve` (subprocess, real engine, tiny
benchmark, `length` judge): select topics, type criteria, submit, read the table, and check that it
changed from the default; then refine the board with the shipped transformer CRM (real weights)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from server_real import CODING_ORDER, DEFAULT_ORDER, WIN_RATES, make_tiny, serve_output, usl_serve
from test_browser import SHOTS, board, wait_for_view

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    make_tiny(home)
    with usl_serve(home, "--benchmark", "tiny", "--judge", "length") as url:
        yield home, url


def test_flow_on_the_real_engine(page, site):
    _, url = site
    page.goto(url)
    wait_for_view(page, "default")
    assert board(page) == DEFAULT_ORDER
    assert page.inner_text("#meta-baseline") == "base"
    assert page.locator("#leaderboard thead th.topic").all_inner_texts() == ["Coding", "Creative writing"]

    page.check("#topic-list input[value=coding]")
    page.fill("#likes", "Runnable code\n<script>window.__pwned = 1</script>")
    page.fill("#avoid", "Long preambles")
    page.click("#rank-btn")
    wait_for_view(page, "custom")

    assert board(page) == CODING_ORDER != DEFAULT_ORDER
    cells = page.locator("#leaderboard tbody tr").first.locator("td")
    assert cells.nth(1).inner_text() == "m_code"
    assert cells.nth(2).locator(".wr-num").inner_text() == f"{WIN_RATES['coding']['m_code']:.1f}"
    page.wait_for_selector("#breakdown[data-state=ready]", timeout=15000)     # arrives after the table
    headers = page.locator("#breakdown thead th").evaluate_all("hs => hs.map(h => h.title)")
    assert "<script>window.__pwned = 1</script>" in headers               # shown as text
    assert page.evaluate("window.__pwned") is None
    assert "topics=coding" in page.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "real_engine_custom.png"), full_page=True)
    assert page.errors == []


def test_refine_with_the_shipped_crm(page, site):
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.types import Criteria

    home, url = site
    page.goto(url + "/?likes=Clear+explanations&topics=coding")
    wait_for_view(page, "custom")
    assert board(page) == CODING_ORDER                      # the fast (length) board
    page.click("#refine-btn")                               # the server's default reference: crm
    page.wait_for_function("() => document.getElementById('refine-status').textContent"
                           ".startsWith('Refined with crm: 8 of 8 questions judged')", timeout=120000)
    # the shown board is the transformer CRM's own board on those 8 questions (read from the cache
    # the server filled: nothing is judged here)
    ref = LeaderboardService(Store(home / "usl.sqlite"), home=str(home)).refine(
        LeaderboardSpec(criteria=Criteria(("Clear explanations",)), benchmark="tiny", topics=("coding",),
                        judge="length"), "crm")
    assert ref.spec["refinement"]["complete"]
    page.wait_for_function("rows => JSON.stringify([...document.querySelectorAll('#leaderboard tbody tr')]"
                           ".map(r => r.dataset.model)) === JSON.stringify(rows)",
                           arg=[r.model for r in ref.rows], timeout=10000)
    shown = page.locator("#leaderboard tbody tr .wr-num").all_inner_texts()
    assert shown == [f"{r.win_rate:.1f}" for r in ref.rows]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "real_engine_refined.png"), full_page=True)
    assert page.errors == []


def test_the_page_says_how_the_default_judge_reads_each_criterion(page, tmp_path_factory):
    """With the shipped default judge, a custom board lists each criterion's kind and the judge's measured
    accuracy on it, and says plainly that facts are beyond it."""
    home = tmp_path_factory.mktemp("home-default")
    make_tiny(home)
    with usl_serve(home, "--benchmark", "tiny", "--judge", "default") as url:
        # the first board has the quality reader read the 48 (answer, baseline) pairs, a minute or more
        # on a busy machine: asked for here, so that the page finds it ready
        try:
            urllib.request.urlopen(url + "/api/leaderboard", timeout=600).read()
        except urllib.error.HTTPError as e:
            raise AssertionError(e.read().decode()[:2000] + serve_output(home)[-3000:]) from e
        page.goto(url)
        wait_for_view(page, "default")
        page.fill("#likes", "I prefer answers that are factually right.\nBe brief.")
        page.click("#rank-btn")
        wait_for_view(page, "custom")
        assert page.is_visible("#reading")
        kinds = page.locator("#reading-list li").evaluate_all("ls => ls.map(l => l.dataset.kind)")
        assert kinds == ["correctness", "length"]
        first = page.locator("#reading-list li").first.inner_text()
        assert "accuracy 0." in first and "cannot verify" in first and "--judge llm:" in first
        assert "cannot verify" not in page.locator("#reading-list li").nth(1).inner_text()
        assert page.errors == []
