"""The LLM judge's cost estimate: known counts from a counter we control, chars/4 by hand."""

import math

import pytest

from usl.judges.base import JudgeRequest
from usl.judges.llm_api import LOGPROBS_TEMPLATE, SYSTEM_PROMPT, USER_TEMPLATE, parse_spec
from usl.judges.llm_cost import (MESSAGE_OVERHEAD, REPLY_PRIMING, CostEstimate, chars_over_4, estimate_cost,
                                 human_tokens)
from usl.types import Criteria


def _reqs(n, answer="An answer."):
    return [JudgeRequest(Criteria(("concise",), ("jargon",)), f"Question {i}?", answer, "Baseline.")
            for i in range(n)]


def test_counts_every_message_plus_the_chat_wrapping():
    # a counter that says 1 for any text: 2 messages x (1 + 3) + 3 = 11 tokens a request
    est = estimate_cost(_reqs(7), count_tokens=lambda s: 1)
    assert est == CostEstimate(requests=7, prompt_tokens=77, max_completion_tokens=7 * 512, method="tokenizer")
    assert 2 * (1 + MESSAGE_OVERHEAD) + REPLY_PRIMING == 11


def test_chars_over_4_by_hand():
    r = _reqs(1)[0]
    user = USER_TEMPLATE.format(likes="- concise", avoid="- jargon", query="Question 0?", answer_a="An answer.",
                                answer_b="Baseline.")
    expected = math.ceil(len(SYSTEM_PROMPT) / 4) + math.ceil(len(user) / 4) + 2 * MESSAGE_OVERHEAD + REPLY_PRIMING
    est = estimate_cost([r])
    assert (est.prompt_tokens, est.method) == (expected, "chars/4")
    # 400 more characters in an answer are 100 more tokens (give or take the rounding of one message)
    longer = estimate_cost(_reqs(1, answer="An answer." + "x" * 400))
    assert 100 <= longer.prompt_tokens - est.prompt_tokens <= 101


@pytest.mark.parametrize("text,n", [("", 0), ("abc", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)])
def test_chars_over_4(text, n):
    assert chars_over_4(text) == n


def test_logprobs_mode_has_its_own_prompt_and_one_token_replies():
    reqs = _reqs(3)
    text = estimate_cost(reqs, parse_spec("m,max_tokens=64"))
    lp = estimate_cost(reqs, parse_spec("m,verdict=logprobs"))
    assert (text.max_completion_tokens, lp.max_completion_tokens) == (3 * 64, 3)
    # the two prompts differ only in their last question
    diff = 3 * (chars_over_4(LOGPROBS_TEMPLATE) - chars_over_4(USER_TEMPLATE))
    assert abs((lp.prompt_tokens - text.prompt_tokens) - diff) <= 3


def test_an_empty_job_costs_nothing():
    assert estimate_cost([]) == CostEstimate(0, 0, 0, "chars/4")


@pytest.mark.parametrize("n,shown", [(0, "0"), (999, "999"), (1234, "1.2k"), (31_400_000, "31.4M"),
                                     (2_500_000_000, "2.5B")])
def test_human_tokens(n, shown):
    assert human_tokens(n) == shown


def test_describe_is_one_line_for_a_cli():
    est = CostEstimate(requests=42_000, prompt_tokens=31_400_000, max_completion_tokens=21_504_000, method="chars/4")
    assert est.describe() == "42,000 requests, ~31.4M prompt tokens (chars/4 estimate), <= 21.5M completion tokens"
    assert "tokenizer count" in CostEstimate(1, 10, 1, "tokenizer").describe()
