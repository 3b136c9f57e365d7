"""LLM-backed work shows its cost first: `usl quality fill` and `usl rank` with the default judge's
quality reading from an LLM say the requests and tokens they would send, and where, and ask (`--yes`
for scripts; a stdin that is no terminal without --yes is refused). Failures end in one line naming
the endpoint and the status. The store, the default judge and the CLI are real; the LLM is a fake
chat-completions server (test_llm_judge.FakeAPI), the edge of the world."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from server_real import make_tiny
from test_llm_judge import FakeAPI
from usl.cli import app

runner = CliRunner()
PAIRS = 48            # make_tiny: 16 queries x 3 models against the baseline


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("spend")
    make_tiny(home)
    return home


@pytest.fixture
def api():
    fake = FakeAPI()
    yield fake
    fake.close()


def usl(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def reader(url: str, model: str) -> str:
    return f"default:quality=llm:{model},base_url={url},api_key_env=,max_retries=0"


def error_line(r) -> str:
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.output[-2000:]
    return lines[0]


def test_fill_tells_the_cost_and_sends_nothing_without_yes(home, api):
    r = usl(home, "quality", "fill", "--benchmark", "tiny", "--judge", reader(api.url, "fill-model"))
    line = error_line(r)
    assert f"this would send {2 * PAIRS} requests, ~" in line and "prompt tokens" in line
    assert f"to {api.url} (model fill-model); add --yes" in line and "not a terminal" in line
    assert f"{PAIRS} pairs, {PAIRS} not read yet" in r.output
    assert api.calls == 0

    r = usl(home, "quality", "fill", "--benchmark", "tiny", "--judge", reader(api.url, "fill-model"), "--yes")
    assert r.exit_code == 0, r.output
    assert api.calls == 2 * PAIRS
    r = usl(home, "quality", "fill", "--benchmark", "tiny", "--judge", reader(api.url, "fill-model"))
    assert r.exit_code == 0 and f"{PAIRS} pairs, 0 not read yet" in r.output and api.calls == 2 * PAIRS


@pytest.mark.parametrize("command, extra, done", [
    ("rank", ["--no-per-criterion"], "m_mid"),
    # compare: both boards from one reading of the pairs
    ("compare", ["--a-criteria", "short answers", "--b-criteria", "long answers"], "Kendall tau"),
])
def test_rank_and_compare_with_an_llm_reader_ask_before_reading_the_board(home, api, command, extra, done):
    judge = reader(api.url, f"{command}-model")
    args = [command, "--benchmark", "tiny", "--judge", judge, "--no-server", "--n-bootstrap", "50", *extra]
    r = usl(home, *args)
    line = error_line(r)
    assert f"this would send {2 * PAIRS} requests" in line and "add --yes" in line
    assert f"the board lacks {PAIRS} quality readings" in r.output
    assert api.calls == 0
    r = usl(home, *args, "--yes")
    assert r.exit_code == 0, r.output
    assert api.calls == 2 * PAIRS and done in r.stdout


@pytest.mark.parametrize("failing, needle", [
    ("unreachable", "127.0.0.1:9/v1/chat/completions (model gone) failed: no answer (connection error"),
    ("401", "/v1/chat/completions (model gone) failed: HTTP 401"),
])
def test_a_failing_llm_ends_in_one_line_naming_the_server_and_status(home, failing, needle):
    fake = FakeAPI(fail_first=10**6, status=401) if failing == "401" else None
    try:
        url = fake.url if fake else "http://127.0.0.1:9/v1"
        r = usl(home, "quality", "fill", "--benchmark", "tiny", "--judge", reader(url, "gone"), "--yes")
    finally:
        if fake:
            fake.close()
    line = error_line(r)
    assert needle in line and "rerun to resume" in line
