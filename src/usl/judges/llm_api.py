"""LLM-as-judge over any OpenAI-compatible chat API (OpenAI, Gemini's OpenAI endpoint, vLLM, llama.cpp).

Spec: ``llm:MODEL`` with optional ``,key=value`` options, e.g.::

    llm:gpt-4.1                                        # https://api.openai.com/v1, key in $OPENAI_API_KEY
    llm:Qwen2.5-7B-Instruct,base_url=http://localhost:8000/v1           # a local vLLM server, no key
    llm:gemini-2.5-pro,base_url=https://generativelanguage.googleapis.com/v1beta/openai,api_key_env=GEMINI_API_KEY

Options (``LLMJudgeConfig``): base_url, api_key_env (the *name* of the environment variable holding
the key; unset or empty = no Authorization header, as local servers want), concurrency (requests
in flight), max_retries, backoff (seconds, doubled per retry), timeout, temperature, max_tokens,
unparseable ("error" or "abstain"), verdict ("text" or "logprobs"), top_logprobs.

Two ways to read the verdict (``verdict=``):

- ``text`` (default): the prompt (``SYSTEM_PROMPT`` + ``USER_TEMPLATE``, below) shows the user's
  likes and things to avoid, the query and the two answers, and asks for a last line
  ``Verdict: A``, ``Verdict: B`` or ``Verdict: tie``. ``parse_verdict`` reads that line, or the
  ``[[A]]``/``[[B]]``/``[[C]]`` form MT-Bench-style judges use, or a bare "A"/"B"/"tie".
- ``logprobs``: the same pair, but the prompt (``LOGPROBS_TEMPLATE``) ends asking for one letter,
  and the judge asks for a single token (``max_tokens=1``) with its ``top_logprobs`` alternatives
  (OpenAI's ``logprobs``; llama.cpp's server and vLLM offer them too). ``letter_probability``
  turns them into a graded ``p_a = P("A") / (P("A") + P("B"))``: small judges that ignore a
  "Verdict:" instruction still put most of their first token's mass on a letter, and a graded
  probability is a finer score than a hard label. No ties in this mode.

The judge version hashes the model name, the prompt and the sampling settings (and, in
``logprobs`` mode, the mode and ``top_logprobs``), so changing any of them never reuses a cached
verdict; the ``text`` mode's version is what it was before the mode existed.

Failures are loud: a non-retryable HTTP status (400, 401, 403, 404, ...) raises at once, and so
does a connection that cannot be made (refused, a name that does not resolve: retrying for a minute
finds no server there either); 408, 409, 429, 5xx and connections lost mid-request (timeouts,
resets) are retried with exponential backoff (honouring ``Retry-After``), then raise
``LLMJudgeError`` naming the endpoint, the status and the start of the response body.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Callable, Literal, Sequence, TypeVar

import httpx

from usl.judges.base import JudgeRequest, Verdict
from usl.judges.redact import public_url, redact
from usl.judges.registry import register
from usl.types import Criteria

log = logging.getLogger(__name__)
Label = Literal["A", "B", "tie"]
T = TypeVar("T")
PROMPT_VERSION = "1"

SYSTEM_PROMPT = (
    "You are a careful, impartial judge of AI assistant answers. A user with personal preferences "
    "wants to know which of two answers to their query they would prefer. Judge by the user's "
    "criteria first and by the correctness and helpfulness of the answers second. Do not let the "
    "order in which the answers are shown influence you, and do not prefer an answer for its length "
    "unless the user's criteria are about length."
)

PAIR_TEMPLATE = """[The user's criteria]
The user likes:
{likes}
The user wants to avoid:
{avoid}

[Query]
{query}

[Answer A]
{answer_a}

[Answer B]
{answer_b}

"""
USER_TEMPLATE = PAIR_TEMPLATE + """Which answer does this user prefer? Explain briefly, then end your reply with exactly one line:
"Verdict: A", "Verdict: B" or "Verdict: tie"."""
# The logprobs mode reads the first token of the reply, so the prompt's last words ask for it.
LOGPROBS_TEMPLATE = PAIR_TEMPLATE + """Which answer does this user prefer? Reply with one letter only: A or B."""

RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}


class LLMJudgeError(RuntimeError):
    """The chat endpoint failed (or answered something that is not a verdict). ``status``: the
    upstream's HTTP status (None: no answer, or an answer that is not a verdict). The message
    never holds the API key or the base URL's credentials (``usl.judges.redact``)."""

    def __init__(self, message: str, status: int | None = None, model: str = ""):
        super().__init__(message)
        self.status, self.model = status, model


@dataclass(frozen=True)
class LLMJudgeConfig:
    model: str                                   # model name the endpoint serves
    base_url: str = "https://api.openai.com/v1"  # OpenAI-compatible root; /chat/completions is appended
    api_key_env: str = "OPENAI_API_KEY"          # name of the env var holding the key ("" = none)
    concurrency: int = 8                         # requests in flight at once
    max_retries: int = 4                         # retries after the first attempt (retryable errors)
    backoff: float = 1.0                         # first retry delay in seconds; doubles each retry
    timeout: float = 120.0                       # seconds per HTTP request
    temperature: float = 0.0                     # sampling temperature sent to the endpoint
    max_tokens: int = 512                        # completion budget for the judge's reasoning + verdict
    unparseable: Literal["error", "abstain"] = "error"   # reply without a verdict: raise, or p_a = 0.5
    verdict: Literal["text", "logprobs"] = "text"   # read a "Verdict: X" line, or one token's log-probabilities
    top_logprobs: int = 20                       # logprobs mode: alternatives asked for the one token (OpenAI: <= 20)


def format_criteria(criteria: Criteria) -> tuple[str, str]:
    c = criteria.canonical()
    bullets = lambda xs: "\n".join(f"- {x}" for x in xs) if xs else "- (nothing stated)"
    return bullets(c.likes), bullets(c.avoid)


def build_messages(request: JudgeRequest, template: str = USER_TEMPLATE) -> list[dict[str, str]]:
    """The chat messages of one request: the system prompt, then ``template`` filled in
    (``USER_TEMPLATE`` for the text verdict, ``LOGPROBS_TEMPLATE`` for the logprobs one)."""
    likes, avoid = format_criteria(request.criteria)
    user = template.format(likes=likes, avoid=avoid, query=request.query,
                           answer_a=request.response_a, answer_b=request.response_b)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_VERDICT_LINE = re.compile(
    r"(?:final\s+)?verdict\s*[:=\-]?\s*[\*\"'`\[\(]*\s*(?:answer\s+|response\s+)?(a\s+tie|a\s+draw|tie|draw|equal|A|B)\b",
    re.IGNORECASE)
_BRACKETS = re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.IGNORECASE)
_BARE = re.compile(r"^\W*(?:answer\s+|response\s+)?(A|B|tie|draw)\W*$", re.IGNORECASE)


def parse_verdict(text: str) -> Label:
    """The judge's decision. The *last* explicit verdict wins (judges sometimes restate the task).

    Raises ValueError when no verdict can be found.
    """
    for pattern in (_VERDICT_LINE, _BRACKETS):
        found = pattern.findall(text)
        if found:
            return _label(found[-1])
    m = _BARE.match(text.strip())
    if m:
        return _label(m.group(1))
    raise ValueError(f"no verdict in judge reply: {text[-200:]!r}")


def _label(token: str) -> Label:
    t = " ".join(token.lower().split())
    if t == "a":
        return "A"
    if t == "b":
        return "B"
    return "tie"  # tie, draw, equal, and MT-Bench's [[C]]


_VERDICTS: dict[Label, Verdict] = {"A": Verdict(1.0, 0.0), "B": Verdict(0.0, 0.0), "tie": Verdict(0.0, 1.0)}


def letter_probability(top_logprobs: Sequence[dict]) -> float:
    """P(A) / (P(A) + P(B)) from one token's alternatives, OpenAI's ``top_logprobs`` list
    (``[{"token": "A", "logprob": -0.4}, {"token": " B", "logprob": -1.3}, ...]``).

    A token counts for a letter when it is that capital letter once surrounding spaces are
    stripped (``"A"``, ``" A"``); variants add up. A letter missing from the list has less mass
    than the least likely listed token, so that mass stands in for it (an upper bound: the
    estimate leans towards 0.5, never to a certainty the list does not show). Worked example:
    A at -0.4 and B at -1.3 give e^-0.4 / (e^-0.4 + e^-1.3) = 0.711.

    Raises ValueError when neither letter is listed.
    """
    mass = {"A": 0.0, "B": 0.0}
    least = 1.0
    for alt in top_logprobs:
        try:
            token, p = str(alt["token"]), math.exp(float(alt["logprob"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a top_logprobs entry: {alt!r}") from e
        least = min(least, p)
        if token.strip() in mass:
            mass[token.strip()] += p
    if mass["A"] == 0.0 and mass["B"] == 0.0:
        shown = [str(a.get("token")) for a in top_logprobs[:5]]
        raise ValueError(f"no verdict: neither A nor B among the top {len(top_logprobs)} tokens {shown}")
    a = mass["A"] or least
    b = mass["B"] or least
    return a / (a + b)


def _top_logprobs(resp: httpx.Response) -> list[dict]:
    """The first generated token's alternatives in a chat completion. A server that sends none
    fails the job (``unparseable=abstain`` would otherwise turn every verdict into 0.5)."""
    try:
        first = resp.json()["choices"][0]["logprobs"]["content"][0]
        return list(first["top_logprobs"]) or [first]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        u = resp.request.url     # named without any credentials the base_url may carry
        raise LLMJudgeError(f"POST {u.scheme}://{u.host}{f':{u.port}' if u.port else ''}{u.path}: no logprobs in "
                            f"the response (verdict=logprobs needs a server that offers them; verdict=text does "
                            f"not): {resp.text[:300]!r}") from e


class LLMJudge:
    name = "llm"
    cacheable = True

    def __init__(self, config: LLMJudgeConfig, transport: httpx.BaseTransport | None = None):
        if config.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {config.concurrency}")
        self.config = config
        self.can_tie = config.verdict == "text"
        self._post_url = config.base_url.rstrip("/") + "/chat/completions"
        self.url = public_url(self._post_url)       # what messages show: no credentials, no query
        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        self._secrets = tuple(x for x in (key, *_credentials(config.base_url)) if x)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        parts = httpx.URL(self._post_url)
        auth = (parts.username, parts.password) if parts.username else None
        self._post_url = str(parts.copy_with(username=None, password=None)) if auth else self._post_url
        self._client = httpx.Client(headers=headers, auth=auth, timeout=config.timeout, transport=transport,
                                    limits=httpx.Limits(max_connections=config.concurrency))
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        c = self.config
        if c.verdict == "text":
            parts = [PROMPT_VERSION, SYSTEM_PROMPT, USER_TEMPLATE, c.model, repr(c.temperature), str(c.max_tokens)]
        else:
            parts = [PROMPT_VERSION, SYSTEM_PROMPT, LOGPROBS_TEMPLATE, c.model, repr(c.temperature), c.verdict,
                     str(c.top_logprobs)]
        blob = "\0".join(parts)
        return f"{c.model}/{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(requests))) as pool:
            futures = [pool.submit(self._one, r) for r in requests]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def _one(self, request: JudgeRequest) -> Verdict:
        try:
            if self.config.verdict == "logprobs":
                top = self.complete(build_messages(request, LOGPROBS_TEMPLATE), read=_top_logprobs,
                                    max_tokens=1, logprobs=True, top_logprobs=self.config.top_logprobs)
                return Verdict(letter_probability(top), 0.0)
            return _VERDICTS[parse_verdict(self.complete(build_messages(request)))]
        except ValueError as e:
            if self.config.unparseable == "abstain":
                log.warning("%s: %s; counting p_a = 0.5", self.url, e)
                return Verdict(0.5, 0.0)
            raise LLMJudgeError(self._redact(f"{self.url} (model {self.config.model}): {e}"),
                                model=self.config.model) from e

    def complete(self, messages: list[dict[str, str]], read: Callable[[httpx.Response], T] | None = None,
                 **body_options) -> str | T:
        """One chat completion with retries; returns the assistant message text, or what ``read``
        makes of the response. ``body_options`` add to (or override) the request body."""
        c = self.config
        body = {"model": c.model, "messages": messages, "temperature": c.temperature, "max_tokens": c.max_tokens,
                **body_options}
        last, status = "", None
        for attempt in range(c.max_retries + 1):
            delay = c.backoff * (2 ** attempt)
            try:
                resp = self._client.post(self._post_url, json=body)
            except httpx.TransportError as e:
                last, status = self._redact(f"connection error: {e.__class__.__name__}: {e}"), None
                if isinstance(e, httpx.ConnectError):   # refused, or a name that does not resolve: no server there
                    raise LLMJudgeError(f"POST {self.url} (model {c.model}) failed: no answer ({last})", None,
                                        c.model) from None
            else:
                if resp.status_code == 200:
                    return read(resp) if read else self._content(resp)
                last, status = self._redact(f"HTTP {resp.status_code}: {resp.text[:300]}"), resp.status_code
                if resp.status_code not in RETRYABLE:
                    raise LLMJudgeError(f"POST {self.url} (model {c.model}) failed: {last}", status, c.model)
                delay = max(delay, _retry_after(resp))
            if attempt < c.max_retries:
                log.info("POST %s: %s; retry %d/%d in %.1fs", self.url, last, attempt + 1, c.max_retries, delay)
                time.sleep(min(delay, 60.0))
        raise LLMJudgeError(f"POST {self.url} (model {c.model}) failed after {c.max_retries + 1} attempts: {last}",
                            status, c.model)

    def _redact(self, text: str) -> str:
        return redact(text.replace(self._post_url, self.url), self._secrets)

    def _content(self, resp: httpx.Response) -> str:
        try:
            return resp.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise LLMJudgeError(f"POST {self.url}: not a chat completion response: "
                                f"{self._redact(resp.text[:300])!r}", None, self.config.model) from e

    def close(self) -> None:
        self._client.close()


def _credentials(url: str) -> tuple[str, ...]:
    """The user, password and query values of a URL: secrets to keep out of messages."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        return tuple(x for x in (parts.username, parts.password, *(v for _, v in parse_qsl(parts.query))) if x)
    except ValueError:
        return ()


def _retry_after(resp: httpx.Response) -> float:
    try:
        return float(resp.headers.get("retry-after", 0))
    except ValueError:
        return 0.0


_TYPES = {f.name: f.type for f in fields(LLMJudgeConfig)}


def parse_spec(arg: str | None, **options) -> LLMJudgeConfig:
    """``MODEL[,key=value...]`` (plus keyword options, which win) -> config. Unknown keys raise."""
    if not arg:
        raise ValueError("llm judge needs a model: llm:MODEL[,base_url=URL,api_key_env=VAR,...]")
    model, *pairs = arg.split(",")
    opts: dict[str, object] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep:
            raise ValueError(f"llm judge option {p!r} is not key=value")
        opts[key.strip()] = value.strip()
    opts.update(options)
    unknown = set(opts) - set(_TYPES) - {"model"}
    if unknown:
        raise ValueError(f"unknown llm judge option(s) {sorted(unknown)}; known: {sorted(set(_TYPES) - {'model'})}")
    casts = {"concurrency": int, "max_retries": int, "max_tokens": int, "backoff": float, "timeout": float,
             "temperature": float, "top_logprobs": int}
    for k, v in list(opts.items()):
        if k in casts and isinstance(v, str):
            try:
                opts[k] = casts[k](v)
            except ValueError as e:
                raise ValueError(f"llm judge option {k}={v!r}: {e}") from e
    if opts.get("unparseable", "error") not in ("error", "abstain"):
        raise ValueError(f"llm judge option unparseable must be 'error' or 'abstain', got {opts['unparseable']!r}")
    if opts.get("verdict", "text") not in ("text", "logprobs"):
        raise ValueError(f"llm judge option verdict must be 'text' or 'logprobs', got {opts['verdict']!r}")
    if int(opts.get("top_logprobs", 20)) < 1:
        raise ValueError(f"llm judge option top_logprobs must be >= 1, got {opts['top_logprobs']!r}")
    return LLMJudgeConfig(model=model.strip(), **opts)  # type: ignore[arg-type]


@register("llm")
def _llm(arg: str | None = None, **options) -> LLMJudge:
    transport = options.pop("transport", None)
    options.pop("home", None)   # the LLM judge keeps no local cache
    return LLMJudge(parse_spec(arg, **options), transport=transport)
