"""The LLM judge against a real local OpenAI-compatible server (llama-cpp-python's, over the
packaged SmolLM2-135M GGUF; tests/local_llm.py). Requests are few and short: the whole file
sends about 60, most of them one-token logprobs requests."""

import logging
from dataclasses import replace

import httpx
import pytest

from local_llm import local_llm
from usl.judges.base import JudgeRequest
from usl.judges.llm_api import LOGPROBS_TEMPLATE, build_messages
from usl.judges.llm_cost import estimate_cost
from usl.judges.registry import load_judge
from usl.types import Criteria

GENERAL = Criteria(("The answer is helpful, accurate and well written.",))
# (query, a good answer, a bad one)
PAIRS = [
    ("What is the capital of France?", "The capital of France is Paris.", "I think it is Berlin."),
    ("How many legs does a spider have?", "A spider has eight legs.", "Spiders have six legs, like ants."),
    ("Translate 'thank you' into Spanish.", "'Thank you' in Spanish is 'gracias'.", "It is 'merci'."),
    ("Give one tip for sleeping better.", "Go to bed and wake up at the same time every day.",
     "Drink three cups of coffee just before bed."),
]


def _both_orders(pairs=PAIRS):
    """Each pair twice: the good answer as A, then as B."""
    return [JudgeRequest(GENERAL, q, *ab) for q, good, bad in pairs for ab in ((good, bad), (bad, good))]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with local_llm(tmp_path_factory.mktemp("llm")) as s:
        yield s


def _spec(server, *options: str) -> str:
    return ",".join([f"llm:{server.model}", f"base_url={server.base_url}", "api_key_env=", *options])


def test_server_serves_the_packaged_model(server):
    models = httpx.get(f"{server.base_url}/models", timeout=10).json()
    assert server.model in [m["id"] for m in models["data"]]


def test_text_verdicts_for_a_small_batch(server):
    """A 135M model often ends without a "Verdict:" line; abstaining keeps the batch going, and
    whatever it did say is read."""
    judge = load_judge(_spec(server, "max_tokens=48", "unparseable=abstain", "concurrency=2"))
    verdicts = judge.judge(_both_orders(PAIRS[:2]))
    assert len(verdicts) == 4
    for v in verdicts:
        assert (v.p_a, v.p_tie) in {(1.0, 0.0), (0.0, 0.0), (0.0, 1.0), (0.5, 0.0)}


def test_logprobs_verdicts_are_graded(server):
    judge = load_judge(_spec(server, "verdict=logprobs", "top_logprobs=10", "concurrency=2"))
    requests = _both_orders()
    verdicts = judge.judge(requests)
    p = [v.p_a for v in verdicts]
    assert all(0.0 < x < 1.0 for x in p), p              # a probability, not a label
    assert len({round(x, 6) for x in p}) > 1, p           # it reads the answers, not a constant
    assert all(v.p_tie == 0.0 for v in verdicts)
    # deterministic: the same request gives the same probability
    again = judge.judge(requests[:2])
    assert [v.p_a for v in again] == pytest.approx(p[:2], abs=1e-6)


def test_cost_estimate_is_close_to_the_servers_count(server):
    """chars/4 is within 35% of the tokens the server counts; with the model's own tokenizer
    (the server's tokenize endpoint) within a few tokens a request: SmolLM2's chat template wraps
    a message in 5 tokens where the estimate counts OpenAI's 3 (measured: 5 a request short)."""
    judge = load_judge(_spec(server, "verdict=logprobs"))
    requests = _both_orders(PAIRS[:2])
    usage = lambda resp: resp.json()["usage"]["prompt_tokens"]
    served = sum(judge.complete(build_messages(r, LOGPROBS_TEMPLATE), read=usage, max_tokens=1) for r in requests)
    rough = estimate_cost(requests, judge.config)
    assert abs(rough.prompt_tokens - served) <= 0.35 * served, (rough, served)

    root = server.base_url.removesuffix("/v1")
    count = lambda text: len(httpx.post(f"{root}/extras/tokenize", json={"input": text}, timeout=30).json()["tokens"])
    exact = estimate_cost(requests, judge.config, count_tokens=count)
    assert exact.method == "tokenizer"
    assert abs(exact.prompt_tokens - served) <= 6 * len(requests), (exact, served)


def test_leaderboard_end_to_end_is_cached_and_resumes(tmp_path, caplog):
    """A topic's board judges its half of the pairs; the whole board judges only the other half;
    a rerun with the server gone judges nothing and gives the same board."""
    from usl.data.topics import Topic, save_topics
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    store = Store(tmp_path / "usl.sqlite")
    queries = tuple(Query(f"q{i}", q) for i, (q, _, _) in enumerate(PAIRS))
    answers = [Response(f"q{i}", m, t) for i, (_, good, bad) in enumerate(PAIRS)
               for m, t in (("good", good), ("bad", bad), ("base", good.rstrip(".") + ", as far as I know."))]
    save_benchmark(store, Benchmark("tiny", queries, ("base", "good", "bad"), "base"), answers, source="test")
    save_topics(store, "tiny", [Topic("facts", "Facts", ("capital",), ("q0", "q1")),
                                Topic("advice", "Advice", ("tip",), ("q2", "q3"))])
    caplog.set_level(logging.DEBUG, logger="usl.leaderboard.jobs")

    with local_llm(tmp_path) as server:
        spec = LeaderboardSpec(benchmark="tiny", judge=_spec(server, "verdict=logprobs", "concurrency=2"),
                               n_bootstrap=50, per_criterion=False)
        LeaderboardService(store, auto_topics=False).rank(replace(spec, topics=("facts",)))
        assert "judging 8 of 8 (pair, order) items" in caplog.text
        caplog.clear()
        board = LeaderboardService(store, auto_topics=False).rank(spec)
        assert "judging 8 of 16 (pair, order) items" in caplog.text and "(8 cached)" in caplog.text
    rows = {r.model: r for r in board.rows}
    assert set(rows) == {"good", "bad"} and all(r.n == 4 for r in rows.values())
    assert all(0.0 <= r.win_rate <= 100.0 for r in rows.values())

    caplog.clear()   # the server has stopped: every verdict must come from the store
    again = LeaderboardService(store, auto_topics=False).rank(spec)
    assert "judging" not in caplog.text
    assert [(r.model, r.win_rate) for r in again.rows] == [(r.model, r.win_rate) for r in board.rows]


def test_a_strong_judge_fills_the_default_judges_quality_bank_once(tmp_path):
    """`usl quality fill` with `default:quality=llm:...` reads every (answer, baseline) pair once with the
    LLM, telling the cost first; a board with new criteria then needs no LLM call (the server is gone)."""
    import subprocess
    import sys

    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec
    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "usl.sqlite")
    queries = tuple(Query(f"q{i}", q) for i, (q, _, _) in enumerate(PAIRS))
    answers = [Response(f"q{i}", m, t) for i, (_, good, bad) in enumerate(PAIRS)
               for m, t in (("good", good), ("bad", bad), ("base", good.rstrip(".") + ", as far as I know."))]
    save_benchmark(store, Benchmark("tiny", queries, ("base", "good", "bad"), "base"), answers, source="test")
    usl = [sys.executable, "-c", "from usl.cli import main; main()", "--home", str(home)]

    with local_llm(tmp_path) as server:
        judge = f"default:quality={_spec(server, 'verdict=logprobs', 'concurrency=2')}"
        out = subprocess.run([*usl, "quality", "fill", "--benchmark", "tiny", "--judge", judge, "--yes"],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "8 pairs, 8 not read yet" in out.stdout and "16 requests" in out.stdout   # the cost, told first
        again = subprocess.run([*usl, "quality", "fill", "--benchmark", "tiny", "--judge", judge],
                               capture_output=True, text=True, timeout=600)
        assert "8 pairs, 0 not read yet" in again.stdout
    service = LeaderboardService(Store(home / "usl.sqlite"), home=home, auto_topics=False)
    spec = LeaderboardSpec(benchmark="tiny", judge=judge, criteria=Criteria(("Be accurate",)), n_bootstrap=50,
                           per_criterion=False)
    board = service.rank(spec)          # the server has stopped: every quality reading comes from the bank
    assert {r.model for r in board.rows} == {"good", "bad"}
    reading = service.judge(judge).quality
    assert reading.gate.reader_identity.startswith("llm@") and reading.missing(*service.pair_texts(spec)) == 0
