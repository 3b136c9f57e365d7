"""Ask an LLM which user criteria explain a labelled pair (the paper's criteria extraction).

Human and LLM-judge pairs come with a winner but no stated criteria. Jia et al. (2025) had an LLM
read the query and both answers and write the preferences under which the chosen answer wins,
and the (different) preferences under which the other one would. We do the same through any
OpenAI-compatible ``/chat/completions`` endpoint; the reply must be JSON::

    {"a_criteria": ["..."], "b_criteria": ["..."]}

``a_criteria`` favour answer A, ``b_criteria`` answer B. The builder's libraries cover the pairs we
ship; this is for users who bring their own labelled pairs and an API key.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from usl.data.paper_jsonl import read_samples, write_samples
from usl.types import DataError, PreferenceSample

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You analyse user preferences. You are given a user's query and two candidate answers, A and B.
Different users prefer different answers. Write the criteria a user would state if they preferred A, and
separately the criteria a user would state if they preferred B. Criteria are short, general preferences about
the answer (style, length, tone, format, depth, focus, safety), written in the user's voice, e.g. "I prefer
concise answers" or "Use a formal, academic tone". Do not mention "A" or "B", and do not copy the answers.
Give 1 to 3 criteria per side. Reply with JSON only: {"a_criteria": [...], "b_criteria": [...]}"""

USER_TEMPLATE = """[Query]
{query}

[Answer A]
{answer_a}

[Answer B]
{answer_b}

The user who asked preferred: {winner}."""


@dataclass(frozen=True)
class ExtractorConfig:
    base_url: str = field(default="https://api.openai.com/v1", metadata={"help": "OpenAI-compatible API root."})
    model: str = field(default="gpt-4o-mini", metadata={"help": "Chat model name."})
    api_key: str = field(default="", repr=False, metadata={"help": "Bearer token (empty for local servers)."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature."})
    max_chars: int = field(default=4000, metadata={"help": "Each answer is cut to this many characters."})
    timeout_s: float = field(default=60.0, metadata={"help": "HTTP timeout per request."})


@dataclass(frozen=True)
class ExtractedCriteria:
    a_criteria: tuple[str, ...]
    b_criteria: tuple[str, ...]


class CriteriaExtractor:
    def __init__(self, cfg: ExtractorConfig, client: httpx.Client | None = None):
        self.cfg = cfg
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self.client = client or httpx.Client(timeout=cfg.timeout_s, headers=headers)

    def messages(self, query: str, answer_a: str, answer_b: str, winner: str) -> list[dict]:
        cut = self.cfg.max_chars
        user = USER_TEMPLATE.format(query=query, answer_a=answer_a[:cut], answer_b=answer_b[:cut],
                                    winner={"model_a": "A", "model_b": "B"}.get(winner, "neither (a tie)"))
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def extract(self, query: str, answer_a: str, answer_b: str, winner: str) -> ExtractedCriteria:
        body = {"model": self.cfg.model, "temperature": self.cfg.temperature,
                "messages": self.messages(query, answer_a, answer_b, winner)}
        url = self.cfg.base_url.rstrip("/") + "/chat/completions"
        try:
            r = self.client.post(url, json=body)
            r.raise_for_status()
            content = r.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as e:
            raise DataError(f"criteria extraction failed at {url}: {e}") from e
        return parse_reply(content)


def parse_reply(content: str) -> ExtractedCriteria:
    """Parse the model's JSON (a fenced block or the first {...} in the text is accepted).

    >>> parse_reply('```json\\n{"a_criteria": ["Be brief."], "b_criteria": ["Be thorough."]}\\n```')
    ExtractedCriteria(a_criteria=('Be brief.',), b_criteria=('Be thorough.',))
    """
    m = re.search(r"\{.*\}", content, re.S)
    if not m:
        raise DataError(f"criteria reply has no JSON object: {content[:120]!r}")
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as e:
        raise DataError(f"criteria reply is not valid JSON: {e.msg}") from e
    out = []
    for side in ("a_criteria", "b_criteria"):
        vals = obj.get(side)
        if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
            raise DataError(f"criteria reply: '{side}' must be a list of strings")
        out.append(tuple(v.strip() for v in vals if v.strip()))
    if not out[0] and not out[1]:
        raise DataError("criteria reply gave no criteria for either side")
    return ExtractedCriteria(*out)


def apply(sample: PreferenceSample, found: ExtractedCriteria) -> PreferenceSample:
    """The sample with the winner's extracted criteria; the loser's go to ``loser_criteria``."""
    win, lose = ((found.a_criteria, found.b_criteria) if sample.preference == "model_a"
                 else (found.b_criteria, found.a_criteria))
    if sample.preference == "tie" or not win:
        win, lose = found.a_criteria + found.b_criteria, ()
    meta = tuple((k, v) for k, v in sample.meta if k != "loser_criteria")
    meta += (("loser_criteria", json.dumps(list(lose), ensure_ascii=False)),)
    return replace(sample, criteria=win, meta=tuple(sorted(meta)))


def extract_file(ext: CriteriaExtractor, src: str | Path, dst: str | Path, *, limit: int | None = None) -> int:
    samples = read_samples(src)[:limit]
    out = []
    for i, s in enumerate(samples):
        found = ext.extract(s.prompt, s.response_a, s.response_b, s.preference)
        out.append(apply(s, found))
        log.info("criteria %d/%d: %s", i + 1, len(samples), list(out[-1].criteria))
    return write_samples(dst, out)
