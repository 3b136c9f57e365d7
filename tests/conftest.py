"""Fixtures shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """An empty data home, one a test module (a module that needs a benchmark in it defines its own)."""
    return str(tmp_path_factory.mktemp("usl_home"))


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright; skips where either is missing."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium (apt-get install -y chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page of its own context; ``page.errors`` collects the page's uncaught errors."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()
