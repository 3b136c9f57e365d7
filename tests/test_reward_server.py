"""Rewards from a judge: the reduction on a judge of known scores, and the HTTP routes on a real
`usl serve` with the shipped default judge (a best-of-N choice that follows the criteria)."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import httpx
import pytest

from server_real import make_tiny, serve_output, server_pid, sigterm_and_wait, usl_serve, wait_for_log
from usl.judges.base import Verdict
from usl.judges.reward import RewardItem, logit, score_batch
from usl.server.reward import OpenRLHFIn, _openrlhf_items
from usl.types import Criteria

DOC = Path(__file__).resolve().parents[1] / "docs" / "reward.md"
SHORT = "Paris is the capital of France."   # a one-word answer is a known failure (test_fast_crm)
LONG = ("The capital of France is Paris. Paris has been the capital for centuries; it is the largest city in "
        "the country and home to its government, the Louvre and the Eiffel Tower.")


class WordsJudge:
    """Bradley-Terry over word counts: P(a beats b) = sigmoid(words(a) - words(b)); A-first bias 0.1
    (so that only the average over both orders is order-free)."""

    name, version, can_tie = "words", "1", False
    identity = "words@1"

    def judge(self, requests):
        out = []
        for r in requests:
            d = len(r.response_a.split()) - len(r.response_b.split())
            out.append(Verdict(min(1.0, 1 / (1 + math.exp(-d)) + 0.1) if d <= 0 else 1 / (1 + math.exp(-d))))
        return out


class OrderFreeWords(WordsJudge):
    def judge(self, requests):
        return [Verdict(1 / (1 + math.exp(-(len(r.response_a.split()) - len(r.response_b.split())))))
                for r in requests]


def test_group_rewards_are_the_bradley_terry_scores_centred_on_the_others():
    responses = ("one", "one two", "one two three two")                      # scores 1, 2, 4
    [r] = score_batch(OrderFreeWords(), Criteria(("x",)), [RewardItem("q", responses)], pairwise=True)
    s = [1, 2, 4]
    want = [sum(s[i] - s[j] for j in range(3) if j != i) / 2 for i in range(3)]
    assert r.rewards == pytest.approx(want)
    assert r.pairwise[0][2] == pytest.approx(1 / (1 + math.exp(3))) and r.pairwise[2][0] == pytest.approx(1 - r.pairwise[0][2])
    assert [r.pairwise[i][i] for i in range(3)] == [0.5] * 3


def test_reference_rewards_are_log_odds_and_both_orders_are_averaged():
    item = RewardItem("q", ("a b c", "a"), reference="a b")
    [r] = score_batch(WordsJudge(), Criteria(("x",)), [item])
    p_first = 1 / (1 + math.exp(-1))                       # "a b c" vs "a b": d = 1, no bias
    p_second = 1 - (1 / (1 + math.exp(1)) + 0.1)           # shown second: the A-first bias counts against it
    assert r.vs_reference[0] == pytest.approx((p_first + p_second) / 2)
    assert r.rewards[0] == pytest.approx(logit(r.vs_reference[0]))
    assert r.rewards[1] < 0 < r.rewards[0] and r.pairwise is None
    [lone] = score_batch(WordsJudge(), Criteria(("x",)), [RewardItem("q", ("alone",))])
    assert lone.rewards == (0.0,)


def test_openrlhf_queries_split_into_prompt_and_response_and_group_by_prompt():
    body = OpenRLHFIn(query=["P1 a", "P2 b", "P1 c d"], prompts=["P1 ", "P2 ", "P1 "], labels=["", "ref", ""])
    items, where = _openrlhf_items(body)
    assert [(it.prompt, it.responses, it.reference) for it in items] == [("P1 ", ("a", "c d"), None),
                                                                         ("P2 ", ("b",), "ref")]
    assert where == [[0, 2], [1]]


def _doc_json(n: int) -> dict:
    return json.loads(re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S)[n])


@pytest.fixture(scope="module")
def reward_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("reward_home")
    make_tiny(home)
    return home


@pytest.fixture(scope="module")
def server(reward_home):
    with usl_serve(reward_home, "--no-import", "--benchmark", "tiny", "--judge", "default", "--judge", "length",
                   "--refine-with", "none", timeout_s=300) as url:
        yield url


MAX_GROWTH_MB = 200           # issue 48: what one request of at most 64 KiB may grow the server by


def _rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    kb = {line.split(":")[0]: int(line.split()[1]) for line in open(f"/proc/{pid}/status")
          if line.startswith(("VmRSS:", "VmHWM:"))}
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


def _peak_growth_mb(pid: int, send) -> tuple[float, object]:
    """How far ``send()`` lifts ``pid``'s resident memory above where it was (its kernel-kept peak, reset
    first), and what ``send`` returned."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:   # "5": reset VmHWM to VmRSS (Linux >= 4.0, same user)
        f.write("5")
    before, _ = _rss_mb(pid)
    out = send()
    _, peak = _rss_mb(pid)
    return peak - before, out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_reward_request_loads_a_model_the_server_loaded_them_at_start(server, reward_home):
    """The models the default judge reads new answers with (the style scorer's MiniLM, the SmolLM2 substance
    reader: about 0.5 GB) load when the server starts, once the default board is ranked; the first reward
    request of new texts, on either route, then grows the server by less than 200 MB. Loaded by that request
    instead, it grew it by about 850 MB (``scripts/load_server.py memory --only reward``). Runs first, while
    no request has brought a new answer."""
    wait_for_log(reward_home, "warm-up done", 300)
    pid = server_pid(server)
    texts = [f"Answer {i}: " + " ".join(f"recursion means a function calls itself, case {i}.{k}" for k in range(12))
             for i in range(16)]
    body = {"items": [{"prompt": "Explain recursion to a new programmer.", "responses": texts}]}
    assert len(json.dumps(body)) < 64 * 1024
    grew, r = _peak_growth_mb(pid, lambda: httpx.post(server + "/api/reward", json=body, timeout=300))
    assert r.status_code == 200, r.text
    assert grew < MAX_GROWTH_MB, f"the first reward request grew the server by {grew:.0f} MB"
    prompt = "Explain a hash map to a new programmer.\n"
    openrlhf = {"query": [prompt + t.replace("recursion", "hashing") for t in texts[:8]], "prompts": [prompt] * 8}
    grew, r = _peak_growth_mb(pid, lambda: httpx.post(server + "/get_reward", json=openrlhf, timeout=300))
    assert r.status_code == 200, r.text
    assert grew < MAX_GROWTH_MB, f"the first /get_reward request grew the server by {grew:.0f} MB"


def test_documented_request_gets_the_documented_answer_and_best_of_n_follows_the_criteria(server):
    request, documented = _doc_json(0), _doc_json(1)
    r = httpx.post(server + "/api/reward", json=request, timeout=300)
    assert r.status_code == 200, r.text
    got = r.json()
    assert set(got) == set(documented)
    assert got["judge"].startswith("default@fast-")
    [[short, long]] = got["rewards"]
    assert short > 0 > long and short == pytest.approx(-long)             # two responses: antisymmetric
    [[[_, p01], [p10, _]]] = got["pairwise"]
    assert p01 + p10 == pytest.approx(1) and p01 == pytest.approx(1 / (1 + math.exp(-short)))
    best = lambda rewards: max(range(len(rewards)), key=rewards.__getitem__)
    assert best(got["rewards"][0]) == 0

    detailed = {**request, "criteria": {"likes": ["Thorough, detailed answers"], "avoid": []}}
    again = httpx.post(server + "/api/reward", json=detailed, timeout=60).json()
    assert best(again["rewards"][0]) == 1                                    # the choice flips with the criteria

    # the OpenRLHF route: prompt + response in `query`, the criteria in the URL
    prompt = request["items"][0]["prompt"] + "\n"
    body = {"query": [prompt + SHORT, prompt + LONG], "prompts": [prompt, prompt], "labels": ["", ""]}
    for likes, winner in (("Short answers that get to the point", 0), ("Thorough, detailed answers", 1)):
        r = httpx.post(server + "/get_reward", params={"likes": likes}, json=body, timeout=60)
        assert r.status_code == 200, r.text
        assert best(r.json()["rewards"]) == winner and r.json()["scores"] == r.json()["rewards"]


def test_reward_errors_are_one_line_naming_the_field(server):
    too_many = {"items": [{"prompt": "q", "responses": ["x"] * 17}]}
    r = httpx.post(server + "/api/reward", json=too_many, timeout=30)
    assert r.status_code == 422 and r.json()["detail"].startswith("items.0.responses: List should have at most 16")
    r = httpx.post(server + "/api/reward", json={"items": [{"prompt": "q", "responses": ["a"]}], "judge": "crm:/x"},
                   timeout=30)
    assert r.status_code == 422 and "judge 'crm:/x' is not served here; choose one of: default, length" in r.text
    r = httpx.post(server + "/get_reward", json={"query": ["q a"], "prompts": ["z"]}, timeout=30)
    assert r.status_code == 422 and "query[0]: does not start with prompts[0]" in r.text
    r = httpx.post(server + "/get_reward", json={"query": ["q a"]}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"].startswith("prompts: needed")
    # another served judge by name: the length judge prefers the longer answer whatever the criteria
    r = httpx.post(server + "/api/reward", json={"items": [{"prompt": "q", "responses": [SHORT, LONG]}],
                                                 "judge": "length", "criteria": {"likes": ["Short"]}}, timeout=30)
    assert r.status_code == 200 and r.json()["rewards"][0][1] > r.json()["rewards"][0][0]


def test_sigterm_while_the_readers_load_and_a_reward_batch_waits_exits_0_within_10_s(tmp_path):
    """SIGTERM two seconds after the server answers: its warm-up is loading the default judge's readers (torch,
    on a worker thread) and a reward batch of new texts waits for them on the reward queue. The process ends
    with status 0 within 10 s, without a traceback (tests/test_server_limits_real.py does the same with the
    transformer CRM refining and scoring)."""
    import threading
    import time


    make_tiny(tmp_path)
    batch = {"items": [{"prompt": "Explain recursion.", "responses": [
        f"Answer {i}: " + "a function that calls itself on a smaller case " * (i + 2) for i in range(16)]}]}
    with usl_serve(tmp_path, "--no-import", "--benchmark", "tiny", "--judge", "default", "--refine-with", "none",
                   timeout_s=300) as url:
        pid = server_pid(url)

        def post() -> None:
            try:
                httpx.post(url + "/api/reward", json=batch, timeout=120)
            except httpx.HTTPError:
                pass                # the server went away mid-request: what this test does

        threading.Thread(target=post, daemon=True).start()
        time.sleep(2.0)             # the warm-up is still loading the readers here (about 20 s on 2 cores)
        status, took = sigterm_and_wait(pid)
    assert took < 10 and status == 0
    log = serve_output(tmp_path)
    assert "terminate called" not in log and "Traceback" not in log
