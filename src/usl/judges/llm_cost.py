"""What a job of the LLM judge will cost, before it starts: requests and prompt tokens.

A long job (one judgment per pair of a board, both orders: the default board's 20,752 pairs make
41,504 requests)
should say what it is about to spend::

    est = estimate_cost(requests, config)
    print(f"{n_pairs:,} pairs x 2 orders, {est.describe()}")
    # 20,752 pairs x 2 orders, 41,504 requests, ~45.7M prompt tokens (chars/4 estimate), <= 21.3M completion tokens

Prompt tokens of one request are the tokens of each chat message (system prompt, filled-in user
template) plus ``MESSAGE_OVERHEAD`` per message and ``REPLY_PRIMING`` once, the chat-format
wrapping OpenAI documents for its models (``<|im_start|>role ... <|im_end|>``-style templates,
SmolLM2's among them, are within a few tokens of it). Token counts are exact when a tokenizer is
at hand (``count_tokens``), else characters / 4, the usual rule of thumb for English text with a
BPE vocabulary: on code or non-Latin scripts it runs low by up to 2x, so treat it as an order of
magnitude. Completion tokens are bounded by the request's budget: ``max_tokens`` in text mode, 1
in logprobs mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from usl.judges.base import JudgeRequest
from usl.judges.llm_api import LOGPROBS_TEMPLATE, USER_TEMPLATE, LLMJudgeConfig, build_messages

MESSAGE_OVERHEAD = 3   # tokens around each chat message (role markers, separators)
REPLY_PRIMING = 3      # tokens that open the assistant's reply


@dataclass(frozen=True)
class CostEstimate:
    requests: int                 # chat completions the job sends
    prompt_tokens: int            # estimated prompt tokens over all of them
    max_completion_tokens: int    # upper bound on generated tokens (the requests' max_tokens)
    method: Literal["chars/4", "tokenizer"]   # how prompt tokens were counted

    def describe(self) -> str:
        """One line for a CLI, e.g. ``42,000 requests, ~31.4M prompt tokens (chars/4 estimate),
        <= 21.5M completion tokens``."""
        how = "chars/4 estimate" if self.method == "chars/4" else "tokenizer count"
        return (f"{self.requests:,} requests, ~{human_tokens(self.prompt_tokens)} prompt tokens ({how}), "
                f"<= {human_tokens(self.max_completion_tokens)} completion tokens")


def human_tokens(n: int) -> str:
    """1234 -> '1.2k', 31_400_000 -> '31.4M', 999 -> '999'."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.1f}B"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def chars_over_4(text: str) -> int:
    """The rule-of-thumb token count: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def estimate_cost(requests: Sequence[JudgeRequest], config: LLMJudgeConfig | None = None,
                  count_tokens: Callable[[str], int] | None = None) -> CostEstimate:
    """Requests and prompt tokens of a job of the LLM judge, without sending anything.

    ``config`` picks the prompt and completion budget (its ``verdict`` mode and ``max_tokens``;
    default: the text mode with 512 tokens). ``count_tokens`` is exact where a tokenizer is at
    hand, e.g. ``lambda s: len(tokenizer.encode(s, add_special_tokens=False))``; without one,
    characters / 4.

    >>> from usl.types import Criteria
    >>> r = JudgeRequest(Criteria(("concise",)), "2+2?", "4", "four")
    >>> est = estimate_cost([r, r], count_tokens=lambda s: len(s.split()))
    >>> est.requests, est.max_completion_tokens
    (2, 1024)
    """
    logprobs = config is not None and config.verdict == "logprobs"
    template = LOGPROBS_TEMPLATE if logprobs else USER_TEMPLATE
    count = count_tokens or chars_over_4
    tokens = 0
    for r in requests:
        messages = build_messages(r, template)
        tokens += sum(count(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMING
    per_reply = 1 if logprobs else (config.max_tokens if config is not None else LLMJudgeConfig("").max_tokens)
    return CostEstimate(requests=len(requests), prompt_tokens=tokens, max_completion_tokens=per_reply * len(requests),
                        method="tokenizer" if count_tokens else "chars/4")
