"""The page in a real browser: Debian's Chromium driven by Playwright, headless, against a real
uvicorn server on localhost (fake engine with known answers, so every assertion is exact)."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

import httpx
import pytest

from server_fake import MODELS, FakeService, serve_in_thread
from usl.server.app import ServerConfig, create_app

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def site():
    svc = FakeService(delay_s=0.4, steps=8)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",)))) as url:
        yield url


def board(pg) -> list[str]:
    return pg.locator("#leaderboard tbody tr").evaluate_all("rows => rows.map(r => r.dataset.model)")


def wait_for_view(pg, view: str) -> None:
    pg.wait_for_selector(f"#leaderboard[data-view={view}][data-render-seq]", timeout=15000)


def test_customize_rank_and_share(page, site):
    page.goto(site)
    wait_for_view(page, "default")
    default = board(page)
    assert default == list(MODELS)
    assert page.locator("#leaderboard thead th").all_inner_texts()[:4] == ["Rank", "Model", "Win rate (95% CI)", "LC"]
    # the length-controlled win rate, as `usl rank` shows it (the fake's: 1.5 below the win rate)
    lc = page.locator("#leaderboard tbody td.lc").all_inner_texts()
    assert lc == [f"{80.0 - 10.0 * i - 1.5:.1f}" for i in range(len(MODELS))]
    assert "Length-controlled win rate" in page.get_attribute("#leaderboard thead th.lc", "title")
    assert page.is_hidden("#rank-note")                       # no win rate here beats a better-ranked one
    assert page.locator("#leaderboard tbody tr").first.locator("svg.whisker line").count() == 4
    assert page.locator("#topic-list input").count() == 3

    page.click("#topics-all")
    assert page.locator("#topic-list input:checked").count() == 3
    page.click("#topics-none")
    page.check("#topic-list input[value=coding]")
    page.fill("#likes", f"Short answers\n{XSS}")
    page.fill("#avoid", f"short answers\n{XSS}")
    seq = page.locator("#leaderboard").get_attribute("data-render-seq")
    page.click("#rank-btn")
    # While the engine works (0.4 s), progress shows and the page still answers.
    page.wait_for_selector("#progress:not([hidden])", timeout=5000)
    assert page.evaluate("1 + 1") == 2
    wait_for_view(page, "custom")
    assert page.locator("#leaderboard").get_attribute("data-render-seq") != seq

    custom = board(page)
    assert custom == list(MODELS[::-1]) and custom != default
    first = page.locator("#leaderboard tbody tr").first
    assert first.locator("td").nth(1).inner_text() == "foxtrot-pro"
    assert first.locator("td").nth(3).inner_text() == "off"                # "Short answers": LC off
    assert first.locator("td").nth(4).inner_text() == "▲ 5"                # 6th by default -> 1st
    assert page.locator("#leaderboard thead th.topic").all_inner_texts() == ["Coding & debugging"]
    assert page.locator("#rank-plot svg g.pt").count() == len(MODELS)
    page.wait_for_selector("#breakdown[data-state=ready]", timeout=10000)     # arrives after the table
    assert page.locator("#breakdown tbody tr[data-model]").count() == len(MODELS)

    # The criterion with markup is shown as text everywhere and nothing ran.
    # contradiction warnings may come in a late event, after the breakdown: wait for both of them
    page.wait_for_function("() => document.querySelectorAll('#warnings li').length >= 2", timeout=10000)
    warnings = page.locator("#warnings li").all_inner_texts()
    assert "You both like and avoid: Short answers" in warnings
    assert f"You both like and avoid: {XSS}" in warnings
    assert page.locator("#warnings script, #warnings img, #breakdown script, #breakdown img").count() == 0
    assert any(XSS[:20] in t for t in page.locator("#breakdown thead th").evaluate_all("hs => hs.map(h => h.title)"))
    assert page.evaluate("window.__pwned") is None

    # The spec is in the URL: a fresh page at that URL reproduces the ranking.
    url = page.url
    assert "topics=coding" in url and "likes=Short+answers" in url
    assert page.get_attribute("#export-csv", "href").startswith("/api/export.csv?")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "custom_leaderboard.png"), full_page=True)

    again = page.context.new_page()
    again.goto(url)
    wait_for_view(again, "custom")
    assert board(again) == custom
    assert again.input_value("#likes") == f"Short answers\n{XSS}"
    assert again.locator("#topic-list input:checked").evaluate_all("cs => cs.map(c => c.value)") == ["coding"]
    assert again.evaluate("window.__pwned") is None
    assert page.errors == []


class CrossedRanks(FakeService):
    """The default board with a higher win rate at a worse rank, as on the default benchmark (59.4% at rank 7
    beside 60.0% at rank 10): delta's interval reaches above charlie's, so fewer models lie wholly above it."""

    def rank(self, spec, progress=None):
        board = super().rank(spec, progress)
        crossed = {"charlie-70b": dict(win_rate=60.0, ci=(59.0, 61.0), rank=3),
                   "delta-8x7b": dict(win_rate=59.4, ci=(50.0, 68.0), rank=2)}
        return dataclasses.replace(board, rows=tuple(dataclasses.replace(r, **crossed.get(r.model, {}))
                                                     for r in board.rows))


def test_the_page_says_why_a_higher_win_rate_can_rank_worse(browser):
    with serve_in_thread(create_app(CrossedRanks(), ServerConfig(benchmark="tiny", judges=("length",)))) as url:
        pg = browser.new_page()
        pg.goto(url)
        wait_for_view(pg, "default")
        assert board(pg)[1:4] == ["bravo-13b", "delta-8x7b", "charlie-70b"]     # rows in rank order
        note = pg.inner_text("#rank-note")
        assert note.startswith("Why is charlie-70b (60.0%, rank 3) below delta-8x7b (59.4%, rank 2)?")
        assert "50.0–68.0 against 59.0–61.0" in note and "not significantly different" in note
        assert "1 + the number of models significantly better" in pg.get_attribute("#leaderboard thead th.rank",
                                                                                    "title")
        pg.close()


def test_examples_side_by_side(page, site):
    page.goto(site)
    wait_for_view(page, "default")
    page.locator("#leaderboard tbody tr[data-model=charlie-70b]").click()
    page.wait_for_selector("#examples article.example", timeout=10000)
    cards = page.locator("#examples article.example")
    assert cards.count() == 4
    assert cards.first.locator(".verdict").inner_text() == "Judge prefers this model · P(model better) = 0.90"
    assert cards.nth(1).locator(".verdict").inner_text() == "Judge prefers the baseline · P(model better) = 0.20"
    assert cards.nth(2).locator(".verdict").inner_text() == "Judge: tie · P(model better) = 0.50"
    assert cards.first.locator(".answer h4").all_inner_texts() == ["charlie-70b", "gpt4-baseline (baseline)"]
    answer = cards.first.locator(".answer pre").first.inner_text()
    assert answer.startswith("Answer 0 of charlie-70b <img src=x onerror=")     # shown, not parsed
    assert cards.first.locator(".answer img").count() == 0
    assert page.evaluate("window.__pwned") is None
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#examples-card").screenshot(path=str(SHOTS / "examples.png"))


def test_limits_are_enforced_in_the_page(page, site):
    page.goto(site)
    wait_for_view(page, "default")
    page.fill("#likes", "\n".join(f"criterion {i}" for i in range(11)))
    assert "over" in page.get_attribute("#likes-hint", "class")
    page.click("#rank-btn")
    assert re.search(r"At most 10 likes criteria", page.inner_text("#form-error"))
    assert page.locator("#tab-custom").is_disabled()
    # a use case replaces topic choice
    page.fill("#likes", "Friendly tone")
    page.fill("#use-case", "I write bedtime stories")
    assert page.locator("#topic-list input").first.is_disabled()
    page.press("#use-case", "Control+Enter")
    wait_for_view(page, "custom")
    assert "use_case=I+write+bedtime+stories" in page.url and "topics=" not in page.url
    # nothing customised any more: the default board, and a clean URL
    page.click("#reset-btn")
    page.click("#rank-btn")
    assert page.get_attribute("#tab-default", "aria-selected") == "true" and "?" not in page.url


def test_judge_choice_is_part_of_the_shared_url(browser):
    svc = FakeService()
    app = create_app(svc, ServerConfig(benchmark="tiny", judges=("length", "random")))
    with serve_in_thread(app) as url:
        pg = browser.new_page()
        pg.goto(url + "/?likes=Brevity")
        wait_for_view(pg, "custom")
        assert "judge=length" in pg.url and "benchmark=tiny" in pg.url       # filled in from the board
        assert pg.is_visible("#judge-select") and not pg.is_visible("#benchmark-select")
        pg.evaluate("() => { window.beforeJudgeChange = true; }")
        pg.select_option("#judge-select", "random")
        pg.wait_for_url(re.compile(r"judge=random"))
        # another judge reloads the page, whose render counter starts again (it may reach the old
        # page's count): wait for a custom board rendered by the new document
        pg.wait_for_function("() => !window.beforeJudgeChange && "
                             "document.querySelector('#leaderboard[data-view=custom][data-render-seq]')",
                             timeout=15000)
        assert pg.input_value("#likes") == "Brevity"
        assert [s.judge for s in svc.rank_calls if s.criteria.likes == ("Brevity",)] == ["length", "random"]
        pg.close()


def test_refine_replaces_the_board_once_enough_questions_are_judged(browser):
    svc = FakeService(refine_delay_s=0.4)
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",)))) as url:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/?likes=Vivid+imagery")
        wait_for_view(page, "custom")
        assert board(page) == list(MODELS[::-1])
        assert page.inner_text("#refine-btn") == "Refine with crm"
        seq = page.locator("#leaderboard").get_attribute("data-render-seq")
        page.click("#refine-btn")
        # below 5 judged questions the fast board stays, and the status says why
        page.wait_for_function("() => /judged .* replaces this one from 5/.test("
                               "document.getElementById('refine-status').textContent)", timeout=10000)
        assert board(page) == list(MODELS[::-1])
        assert page.inner_text("#refine-btn") == "Stop refining"
        page.click("#refine-btn")                          # stop: judgments are kept, a new click goes on
        page.wait_for_function("() => document.getElementById('refine-status').textContent"
                               ".startsWith('Stopped with ')", timeout=10000)
        assert page.inner_text("#refine-btn") == "Refine with crm" and board(page) == list(MODELS[::-1])
        page.click("#refine-btn")
        page.wait_for_function("() => document.getElementById('refine-status').textContent"
                               ".startsWith('Refined with crm: 12 of 12 questions judged')", timeout=30000)
        page.wait_for_function(f"() => document.getElementById('leaderboard').dataset.renderSeq !== '{seq}'")
        assert board(page) == list(MODELS[1:] + MODELS[:1])
        assert "refined by crm (12/12 judged" in page.inner_text("#board-sub")
        assert page.get_attribute("#export-csv", "href").endswith("&refined=true")
        assert page.inner_text("#refine-btn") == "Refine with crm"
        assert "refined: 12 judged" in page.locator("#warnings li").all_inner_texts()
        assert page.locator("#breakdown tbody tr[data-model]").count() == len(MODELS)   # the fast board's, kept
        assert {q for *_, q in svc.refine_calls} == {0, 1}
        assert sum(q == 0 for *_, q in svc.refine_calls) == 2        # each stream starts from the cache
        # new criteria: the refinement is forgotten and the new fast board shows
        page.fill("#likes", "Something else")
        page.click("#rank-btn")
        page.wait_for_function("() => document.getElementById('refine-status').textContent === ''")
        wait_for_view(page, "custom")
        assert board(page) == list(MODELS[::-1])
        assert errors == []
        page.close()


EVIL_PAGE = """<!doctype html><html><body>
<img src="{url}/api/leaderboard?likes=evil+img">
<form id="f" method="post" action="{url}/api/leaderboard" enctype="text/plain">
  <input name='{{"likes": ["evil form"], "x": "' value='"}}'></form>
<script>
window.outcomes = [];
fetch("{url}/api/leaderboard/refine?likes=evil+no-cors", {{mode: "no-cors"}})
  .then(() => outcomes.push("no-cors sent"), e => outcomes.push("no-cors failed"));
fetch("{url}/api/leaderboard", {{method: "POST", headers: {{"Content-Type": "application/json"}},
                                body: JSON.stringify({{likes: ["evil cors"]}})}})
  .then(r => outcomes.push("cors " + r.status), e => outcomes.push("cors failed"));
fetch("{url}/api/leaderboard/stream?likes=evil+stream")
  .then(r => outcomes.push("stream " + r.status), e => outcomes.push("stream failed"));
setTimeout(() => document.getElementById("f").submit(), 1500);
</script></body></html>"""


def test_a_page_of_another_origin_cannot_make_the_server_work(browser, caplog):
    """A page served from another port of this machine (another origin: localhost is another site,
    127.0.0.1 the same site) tries every way a browser lets it reach the local server: an image, a
    no-cors fetch, a CORS fetch, an event stream, a form post."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    caplog.set_level("WARNING", logger="usl.server.hosts")
    svc = FakeService()
    with serve_in_thread(create_app(svc, ServerConfig(benchmark="tiny", judges=("length",), warm=False))) as url:
        page_html = EVIL_PAGE.format(url=url).encode()

        class Evil(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page_html)))
                self.end_headers()
                self.wfile.write(page_html)

        evil = ThreadingHTTPServer(("127.0.0.1", 0), Evil)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            ctx = browser.new_context()
            pg = ctx.new_page()
            for host in ("localhost", "127.0.0.1"):
                pg.goto(f"http://{host}:{evil.server_address[1]}/")
                pg.wait_for_function("window.outcomes && window.outcomes.length === 3", timeout=10000)
                outcomes = pg.evaluate("window.outcomes")
                assert "cors failed" in outcomes and "stream failed" in outcomes, outcomes
                pg.wait_for_timeout(2500)                      # the form has been posted
            ctx.close()
        finally:
            evil.shutdown()
            evil.server_close()
        asked = [s.criteria.likes for s in svc.rank_calls] + [c[0].criteria.likes for c in svc.refine_calls]
        assert not [likes for likes in asked if any("evil" in x for x in likes)], asked
        refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
        for path in ("GET /api/leaderboard:", "POST /api/leaderboard:", "GET /api/leaderboard/refine:",
                     "GET /api/leaderboard/stream:"):
            assert any(m.startswith("refused " + path) for m in refused), (path, refused)
        # the page itself, on its own origin, still works
        assert httpx.post(url + "/api/leaderboard", json={"likes": ["mine"]}, headers={"Origin": url}).status_code == 200


def test_api_docs_render_offline_under_their_csp(browser, site):
    """Swagger UI and ReDoc load with every request outside this server refused (an offline machine)."""
    ctx = browser.new_context()
    pg = ctx.new_page()
    foreign: list[str] = []
    violations: list[str] = []

    def only_local(route):
        if route.request.url.startswith(site):
            return route.continue_()
        foreign.append(route.request.url)
        return route.abort()

    pg.route("**/*", only_local)
    pg.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    pg.goto(site + "/docs")
    pg.locator(".opblock").nth(7).wait_for(timeout=20000)     # (a string predicate would be eval: refused)
    assert "/api/leaderboard/refine" in pg.inner_text("#swagger-ui")
    pg.goto(site + "/redoc")
    pg.get_by_text("Rank the models for one user's criteria and topics").first.wait_for(state="attached",
                                                                                       timeout=20000)
    ctx.close()
    # ReDoc's "powered by" logo points at its CDN: the policy blocks it, and nothing else
    assert foreign == [] and [v for v in violations if "cdn.redoc.ly/redoc/logo-mini.svg" not in v] == []
