"""The LLM judge against a real local HTTP server standing in for the remote chat API."""

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from usl.judges.base import JudgeRequest
from usl.judges.llm_api import (LLMJudge, LLMJudgeError, build_messages, letter_probability, parse_spec,
                                 parse_verdict)
from usl.judges.registry import load_judge
from usl.types import Criteria


@pytest.mark.parametrize("text,label", [
    ("A is clearer.\nVerdict: A", "A"),
    ("Verdict: B", "B"),
    ("verdict: tie", "tie"),
    ("Final verdict: **B**", "B"),
    ("Verdict: Answer A", "A"),
    ("Verdict: [A]", "A"),
    ("Verdict: a tie", "tie"),
    ("Verdict: draw.", "tie"),
    ("Both are fine. [[C]]", "tie"),
    ("[[B]]", "B"),
    ("B", "B"),
    ("  tie ", "tie"),
    ("Response A", "A"),
    ("Verdict: A\n...on reflection...\nVerdict: B", "B"),   # the last verdict wins
])
def test_parse_verdict_accepts(text, label):
    assert parse_verdict(text) == label


@pytest.mark.parametrize("text", ["", "I like both", "My verdict is that A is better", "Better: A",
                                  "Verdict: unclear", "Answer C"])
def test_parse_verdict_rejects(text):
    with pytest.raises(ValueError, match="no verdict"):
        parse_verdict(text)


def test_prompt_contains_criteria_query_and_answers():
    r = JudgeRequest(Criteria(("Be concise",), ("jargon",)), "What is 2+2?", "four", "It is 4.")
    msgs = build_messages(r)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    for part in ("- Be concise", "- jargon", "What is 2+2?", "[Answer A]\nfour", "[Answer B]\nIt is 4.",
                 "Verdict: A"):
        assert part in user


def test_parse_spec_options_and_errors():
    c = parse_spec("m1,base_url=http://h:1/v1,concurrency=3,api_key_env=", timeout=5)
    assert (c.model, c.base_url, c.concurrency, c.api_key_env, c.timeout) == ("m1", "http://h:1/v1", 3, "", 5)
    with pytest.raises(ValueError, match="needs a model"):
        parse_spec(None)
    with pytest.raises(ValueError, match="unknown llm judge option"):
        parse_spec("m,colour=red")
    with pytest.raises(ValueError, match="concurrency"):
        parse_spec("m,concurrency=many")


# The first token's alternatives the fake sends when asked for logprobs, by the answer it prefers:
# P(A) = e^-0.1 / (e^-0.1 + e^-2.5) = 0.917 when A has GOOD, 0.083 when B has, 0.5 otherwise.
FAKE_TOP = {"A": [("A", -0.1), (" The", -2.0), ("B", -2.5)],
            "B": [("B", -0.1), (" The", -2.0), ("A", -2.5)],
            "tie": [("A", -0.8), ("B", -0.8), (" The", -2.0)]}


class FakeAPI:
    """A chat-completions server: prefers the answer containing GOOD; can fail on demand.

    Asked for ``logprobs``, it answers one token with ``FAKE_TOP``'s alternatives (or ``top``,
    a fixed list; ``top=False`` sends none, as a server without the feature)."""

    def __init__(self, fail_first=0, status=500, delay=0.0, reply=None, top=None, echo=False):
        self.fail_first, self.status, self.delay, self.reply, self.top = fail_first, status, delay, reply, top
        self.echo = echo        # failures echo the request's path and headers (some proxies do)
        self.bodies = []
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.auth = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with api.lock:
                    api.calls += 1
                    n = api.calls
                    api.in_flight += 1
                    api.max_in_flight = max(api.max_in_flight, api.in_flight)
                    api.auth.append(self.headers.get("Authorization"))
                    api.bodies.append(body)
                try:
                    time.sleep(api.delay)
                    if n <= api.fail_first and api.echo:
                        return self._send(api.status, {"error": "bad request", "path": self.path,
                                                       "headers": dict(self.headers)})
                    if self.path.split("?")[0] != "/v1/chat/completions":
                        return self._send(404, {"error": "no such path"})
                    if n <= api.fail_first:
                        return self._send(api.status, {"error": {"message": "overloaded"}})
                    user = body["messages"][-1]["content"]
                    a = user.split("[Answer A]")[1].split("[Answer B]")[0]
                    b = user.split("[Answer B]")[1]
                    verdict = "tie" if ("GOOD" in a) == ("GOOD" in b) else ("A" if "GOOD" in a else "B")
                    if body.get("logprobs"):
                        return self._send(200, _logprobs_reply(FAKE_TOP[verdict] if api.top is None else api.top,
                                                               body.get("top_logprobs", 0)))
                    text = api.reply if api.reply is not None else f"Reasoning.\nVerdict: {verdict}"
                    self._send(200, {"choices": [{"message": {"role": "assistant", "content": text}}]})
                finally:
                    with api.lock:
                        api.in_flight -= 1

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _logprobs_reply(top, k):
    """OpenAI's chat completion with logprobs: the first token and its top ``k`` alternatives."""
    choice = {"message": {"role": "assistant", "content": top[0][0] if top else ""}}
    if top is not False:
        alts = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top[:k]]
        choice["logprobs"] = {"content": [{**alts[0], "top_logprobs": alts}] if alts else []}
    return {"choices": [choice]}


@pytest.fixture
def api_factory():
    made = []

    def make(**kw):
        made.append(FakeAPI(**kw))
        return made[-1]

    yield make
    for a in made:
        a.close()


def _reqs(n=6):
    crit = Criteria(("quality",))
    return [JudgeRequest(crit, f"q{i}", "GOOD one" if i % 3 != 1 else "meh",
                         "GOOD two" if i % 3 == 1 else ("GOOD" if i % 3 == 0 else "bad")) for i in range(n)]


def test_judges_through_real_http_with_bounded_concurrency(api_factory, monkeypatch):
    api = api_factory(delay=0.2)   # long enough that the pool overlaps requests even on a busy CPU
    monkeypatch.setenv("FAKE_KEY", "sekret")
    judge = load_judge(f"llm:fake-model,base_url={api.url},concurrency=3,api_key_env=FAKE_KEY")
    verdicts = judge.judge(_reqs(12))
    assert [v.label for v in verdicts] == ["tie", "model_b", "model_a"] * 4
    assert api.calls == 12
    assert 1 < api.max_in_flight <= 3
    assert set(api.auth) == {"Bearer sekret"}
    assert judge.identity.startswith("llm@fake-model/")


def test_retries_then_succeeds(api_factory):
    api = api_factory(fail_first=2, status=503)
    judge = load_judge(f"llm:m,base_url={api.url},concurrency=1,backoff=0.01,max_retries=3,api_key_env=")
    assert judge.judge(_reqs(1))[0].label == "tie"
    assert api.calls == 3


def test_persistent_failure_names_endpoint_and_status(api_factory):
    api = api_factory(fail_first=100, status=500)
    judge = load_judge(f"llm:m,base_url={api.url},backoff=0.01,max_retries=2,api_key_env=")
    with pytest.raises(LLMJudgeError, match=r"POST http://127\.0\.0\.1:\d+/v1/chat/completions .*after 3 attempts.*HTTP 500"):
        judge.judge(_reqs(1))
    assert api.calls == 3


def test_client_error_is_not_retried(api_factory):
    api = api_factory(fail_first=100, status=401)
    judge = load_judge(f"llm:m,base_url={api.url},backoff=0.01,max_retries=5,api_key_env=")
    with pytest.raises(LLMJudgeError, match="HTTP 401"):
        judge.judge(_reqs(1))
    assert api.calls == 1


def test_unreachable_endpoint_is_a_clear_error_at_once():
    """A refused connection is not retried: 4 retries of backoff 1 s would take 15 s to say the same."""
    import time

    judge = LLMJudge(parse_spec("m,base_url=http://127.0.0.1:9/v1,backoff=1,max_retries=4,api_key_env="))
    t0 = time.monotonic()
    with pytest.raises(LLMJudgeError, match=r"127\.0\.0\.1:9/v1/chat/completions.*no answer \(connection error"):
        judge.judge(_reqs(1))
    assert time.monotonic() - t0 < 2.0


def test_unparseable_reply_errors_or_abstains(api_factory):
    api = api_factory(reply="I cannot decide.")
    strict = load_judge(f"llm:m,base_url={api.url},api_key_env=")
    with pytest.raises(LLMJudgeError, match="no verdict"):
        strict.judge(_reqs(1))
    lenient = load_judge(f"llm:m,base_url={api.url},api_key_env=,unparseable=abstain")
    assert lenient.judge(_reqs(1))[0].p_a == 0.5


def test_version_changes_with_model_and_settings():
    a = LLMJudge(parse_spec("m1"))
    assert a.version != LLMJudge(parse_spec("m2")).version
    assert a.version != LLMJudge(parse_spec("m1,temperature=0.7")).version
    assert a.version == LLMJudge(parse_spec("m1,concurrency=2")).version   # speed knobs don't matter


def test_leaderboard_with_llm_judge_is_cached_and_resumes(api_factory, tmp_path):
    """End to end: `usl rank` machinery with the LLM judge; a rerun makes no HTTP call at all."""
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    api = api_factory()
    store = Store(tmp_path / "usl.sqlite")
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(4))
    texts = {"base": "plain", "good": "GOOD answer", "bad": "bad answer"}
    save_benchmark(store, Benchmark("t", queries, tuple(texts), "base"),
                   [Response(q.id, m, t) for q in queries for m, t in texts.items()], source="test")
    spec = LeaderboardSpec(benchmark="t", judge=f"llm:m,base_url={api.url},api_key_env=,concurrency=4",
                           n_bootstrap=50, per_criterion=False)
    board = LeaderboardService(store, auto_topics=False).rank(spec)
    assert {r.model: r.win_rate for r in board.rows} == {"good": 100.0, "bad": 50.0}   # bad vs plain: tie
    assert api.calls == 2 * 2 * 4
    LeaderboardService(store, auto_topics=False).rank(spec)
    assert api.calls == 16


def test_an_llm_board_loads_no_local_model(api_factory, tmp_path):
    """Ranking with an ``llm:`` judge loads none of the models the default judge runs here (sentence-transformers'
    MiniLM, the fast CRM), and imports no torch or transformers at all, with criteria or without: a board with
    criteria reads them with the reading of length (``usl.fast.length_intent``: the length reader and the criteria
    reader, the engine's reading of the criteria for every judge), which runs in numpy on MiniLM through ONNX
    Runtime. In a fresh process,
    since this one has loaded them for other tests."""
    import subprocess
    import sys

    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    api = api_factory()
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(3))
    texts = {"base": "plain", "good": "GOOD answer"}
    save_benchmark(Store(tmp_path / "usl.sqlite"), Benchmark("t", queries, tuple(texts), "base"),
                   [Response(q.id, m, t) for q in queries for m, t in texts.items()], source="test")
    code = f"""
import json, sys
from usl.leaderboard.service import LeaderboardService
from usl.leaderboard.types import LeaderboardSpec
from usl.store import Store
from usl.types import Criteria

service = LeaderboardService(Store({str(tmp_path / "usl.sqlite")!r}), home={str(tmp_path)!r}, auto_topics=False)
judge = "llm:m,base_url={api.url},api_key_env="
for criteria in (Criteria(), LeaderboardSpec.criteria, Criteria(("Be concise", "Be thorough"), ("long answers",))):
    spec = LeaderboardSpec(benchmark="t", judge=judge, criteria=criteria, n_bootstrap=20, per_criterion=False)
    board = service.rank(spec)
    notes = service.contradictions(criteria, judge)
    print(json.dumps({{"rows": {{r.model: r.win_rate for r in board.rows}}, "lc": board.spec["length_control"],
                      "warnings": list(board.warnings) + notes, "reading": len(board.criteria_reading),
                      "loaded": [m for m in ("torch", "transformers", "sentence_transformers", "onnxruntime",
                                             "usl.judges.fast", "usl.fast.length_intent")
                                 if m in sys.modules]}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    boards = [json.loads(line) for line in out.stdout.splitlines()[-3:]]
    assert all(b["rows"] == {"good": 100.0} for b in boards) and api.calls == 3 * 2 * 3   # judged, by the LLM
    assert all(b["loaded"] == [] and b["lc"] == "on" and b["reading"] == 0 for b in boards)   # no model reads criteria
    assert boards[2]["warnings"] == []          # no length wish read, so no length contradiction


def test_cli_reports_endpoint_failure_in_one_line(api_factory, tmp_path):
    from typer.testing import CliRunner

    from usl.cli import app
    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    api = api_factory(fail_first=1000, status=401)
    store = Store(tmp_path / "usl.sqlite")
    save_benchmark(store, Benchmark("t", (Query("q0", "question"),), ("base", "m"), "base"),
                   [Response("q0", "base", "x"), Response("q0", "m", "y")], source="test")
    with store.transaction() as con:   # a stored topic, so no topic building is attempted
        con.execute("INSERT INTO topics(benchmark, id, name, keywords) VALUES ('t', 'all', 'All', '')")
        con.execute("INSERT INTO query_topics(benchmark, query_id, topic_id) VALUES ('t', 'q0', 'all')")
    res = CliRunner().invoke(app, ["--home", str(tmp_path), "rank", "--benchmark", "t", "--judge",
                                   f"llm:m,base_url={api.url},api_key_env=", "--n-bootstrap", "10"])
    assert res.exit_code == 2
    assert "error: POST http://127.0.0.1:" in res.output and "HTTP 401" in res.output


# ---- verdict=logprobs: a graded p_a from the first token's alternatives ---------------------------

@pytest.mark.parametrize("top,p_a", [
    ([{"token": "A", "logprob": -0.4}, {"token": " B", "logprob": -1.3}], 0.710949502625004),  # worked example
    ([{"token": "B", "logprob": math.log(0.6)}, {"token": "A", "logprob": math.log(0.2)}], 0.25),
    # variants of one letter add up: 0.3 + 0.1 against 0.4
    ([{"token": "B", "logprob": math.log(0.4)}, {"token": "A", "logprob": math.log(0.3)},
      {"token": " A ", "logprob": math.log(0.1)}], 0.5),
    # B unlisted: it has less than the least listed token (0.1), which stands in for it
    ([{"token": "A", "logprob": math.log(0.3)}, {"token": "The", "logprob": math.log(0.1)}], 0.75),
    # lower-case "a" is the article, "Answer" a word: neither is a verdict
    ([{"token": "a", "logprob": math.log(0.5)}, {"token": "Answer", "logprob": math.log(0.3)},
      {"token": "B", "logprob": math.log(0.2)}], 0.5),
])
def test_letter_probability(top, p_a):
    assert letter_probability(top) == pytest.approx(p_a)


@pytest.mark.parametrize("top,match", [
    ([], "no verdict"),
    ([{"token": "The", "logprob": -0.1}, {"token": "Both", "logprob": -2.0}], "no verdict: neither A nor B"),
    ([{"token": "A"}], "not a top_logprobs entry"),
])
def test_letter_probability_rejects(top, match):
    with pytest.raises(ValueError, match=match):
        letter_probability(top)


def test_logprobs_mode_asks_one_token_and_grades_the_verdict(api_factory):
    api = api_factory()
    judge = load_judge(f"llm:m,base_url={api.url},api_key_env=,verdict=logprobs,top_logprobs=5")
    verdicts = judge.judge(_reqs(3))    # tie, B has GOOD, A has GOOD
    assert [v.p_a for v in verdicts] == pytest.approx([0.5, 0.0831727, 0.9168273])
    assert all(v.p_tie == 0.0 for v in verdicts) and judge.can_tie is False
    body = api.bodies[0]
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (1, True, 5)
    assert body["messages"][-1]["content"].endswith("Reply with one letter only: A or B.")
    assert "Verdict:" not in body["messages"][-1]["content"]


def test_logprobs_mode_without_a_letter_errors_or_abstains(api_factory):
    api = api_factory(top=[("The", -0.1), ("Both", -1.0)])
    strict = load_judge(f"llm:m,base_url={api.url},api_key_env=,verdict=logprobs")
    with pytest.raises(LLMJudgeError, match="neither A nor B among the top 2 tokens"):
        strict.judge(_reqs(1))
    lenient = load_judge(f"llm:m,base_url={api.url},api_key_env=,verdict=logprobs,unparseable=abstain")
    assert lenient.judge(_reqs(1))[0].p_a == 0.5


def test_logprobs_mode_needs_a_server_that_offers_them(api_factory):
    """A server that ignores `logprobs` fails the job, even when unparseable replies abstain."""
    api = api_factory(top=False)
    judge = load_judge(f"llm:m,base_url={api.url},api_key_env=,verdict=logprobs,unparseable=abstain")
    with pytest.raises(LLMJudgeError, match=r"POST http://127\.0\.0\.1:\d+/v1/chat/completions: no logprobs in the "
                                            r"response.*verdict=text"):
        judge.judge(_reqs(1))


def test_verdict_options_are_checked():
    with pytest.raises(ValueError, match="option verdict must be 'text' or 'logprobs', got 'probs'"):
        parse_spec("m,verdict=probs")
    with pytest.raises(ValueError, match="option top_logprobs must be >= 1"):
        parse_spec("m,verdict=logprobs,top_logprobs=0")
    with pytest.raises(ValueError, match="top_logprobs"):
        parse_spec("m,top_logprobs=many")


def test_version_changes_with_verdict_mode_and_text_mode_keeps_its_cache():
    text = LLMJudge(parse_spec("m1"))
    # the text mode's version predates the logprobs mode: cached verdicts stay valid
    assert text.version == "m1/251cdfbaf6"
    lp = LLMJudge(parse_spec("m1,verdict=logprobs"))
    assert lp.version != text.version
    assert lp.version != LLMJudge(parse_spec("m1,verdict=logprobs,top_logprobs=5")).version
    assert lp.version == LLMJudge(parse_spec("m1,verdict=logprobs,max_tokens=64")).version  # unused there

def test_an_upstream_that_echoes_the_request_does_not_leak_secrets(api_factory, monkeypatch):
    api = api_factory(fail_first=100, status=400, echo=True)
    monkeypatch.setenv("FAKE_KEY", "sk-live-0123456789abcdef")
    base = api.url.replace("http://", "http://alice:pa55word@") + "?key=query-secret-42"
    judge = load_judge(f"llm:m,base_url={base},api_key_env=FAKE_KEY,max_retries=0")
    with pytest.raises(LLMJudgeError) as failed:
        judge.judge(_reqs(1))
    text = str(failed.value)
    assert "HTTP 400" in text and failed.value.status == 400 and api.calls == 1
    assert api.auth[0]                                               # credentials were sent...
    for secret in ("sk-live-0123456789abcdef", "pa55word", "alice", "query-secret-42", api.auth[0].split()[-1]):
        assert secret not in text, secret                            # ...and is in no message
    assert f"POST {api.url}" in text                                  # the URL without its credentials


@pytest.mark.parametrize("text,secret", [
    ('{"Authorization": "Bearer abcdefgh12345678"}', "abcdefgh12345678"),
    ("authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("invalid api_key=zyx987654321 given", "zyx987654321"),
    ('{"x-api-key": "k-123456789"}', "k-123456789"),
    ("key sk-proj-AbCdEf0123456789 revoked", "sk-proj-AbCdEf0123456789"),
    ("https://h/v1?key=AIzaSyD-0123456789abcdefghij", "AIzaSyD-0123456789abcdefghij"),
    ("upstream echoed: Basic YWxpY2U6aHVudGVyMg==", "YWxpY2U6aHVudGVyMg"),            # alice:hunter2, no header name
    ('{"auth": "basic Ym9iOnMzY3JldA"}', "Ym9iOnMzY3JldA"),                         # bob:s3cret, unpadded
    ("connect to http://alice:hunter2@10.0.0.1:8080/v1 failed", "hunter2"),
    ("proxy alice:hunter2@proxy.lan refused", "hunter2"),                             # no scheme
    ("base_url=https://u:p4ss@h.example/v1", "p4ss"),
])
def test_redact_removes_credential_shapes_it_was_not_told(text, secret):
    from usl.judges.redact import redact

    out = redact(text)
    assert secret not in out and "[redacted]" in out


@pytest.mark.parametrize("text", ["basic knowledge of Python", "mail bob@example.com at 10:30", "ratio 3:2 @ noon",
                                  "http://h.example:8080/v1 answered 500"])
def test_redact_leaves_text_that_holds_no_credential(text):
    from usl.judges.redact import redact

    assert redact(text) == text


def test_public_judge_spec_hides_base_url_credentials():
    from usl.judges.redact import public_judge, public_url

    assert public_url("https://u:p@h.example:8443/v1?key=1#x") == "https://h.example:8443/v1"
    assert public_judge("llm:m,base_url=https://u:p@h/v1?k=1,concurrency=2") == "llm:m,base_url=https://h/v1,concurrency=2"
    assert public_judge("default") == "default"
