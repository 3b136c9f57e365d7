"""Prompts of the two reward-model heads, built under an explicit token budget.

Pairwise (one input, both responses)::

    # Instruction ... # Criteria\n* c1\n* c2 ... # User Query\n<query> ... # Response A\n<a>
    ... # Response B\n<b> ... Which response does this user prefer?

Pointwise (one input per response): the criteria as a system prompt, the query as the user turn,
the response as the assistant turn.

Truncation policy (never drops a pair): when an input exceeds ``max_length`` tokens, the query is
cut to ``query_max_tokens``, then the responses share what is left by water-filling (a short answer
keeps all of itself, the long ones are cut to equal length); if that would leave a response fewer
than ``min_response_tokens``, the query is cut further; the criteria are cut only when nothing
else is left. Cut text keeps its head and tail around a ``[...]`` marker (``keep="head_tail"``) or
its head only. Every cut is returned as a ``Cut`` so callers can report it.

Pieces are tokenized separately and their ids concatenated, at training and inference alike, so
the two always see the same tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from usl.types import Message

PAIRWISE_PROMPT = """# Instruction

You are an experienced judge. Decide which of two AI responses this user would prefer, judging only by the user's criteria below. Every criterion is equally important. The order in which the responses are shown must not influence the decision.

# Criteria
{criteria}

# User Query
{query}

# Response A
{response_a}

# Response B
{response_b}

# Verdict
Which response does this user prefer, A or B?"""

POINTWISE_SYSTEM = """You are a helpful assistant. You should generate responses tailored to the user's preferences based on the given criteria. Each criterion is equally important in shaping the response.

The criteria are:
{criteria}"""

_SLOTS = ("criteria", "query", "response_a", "response_b", "response")
_MARK = "\x00SLOT:{}\x00"
_MARK_RE = re.compile("\x00SLOT:([a-z_]+)\x00")
ELLIPSIS = " [...] "


@dataclass(frozen=True)
class Cut:
    part: str            # criteria | query | response_a | response_b | response
    original_tokens: int
    kept_tokens: int


@dataclass(frozen=True)
class Encoded:
    input_ids: tuple[int, ...]
    cuts: tuple[Cut, ...] = ()
    original_length: int = 0   # tokens the input would have had without truncation
    spans: tuple[tuple[str, int, int, int], ...] = ()   # (slot, start, end, tokens before any cut) per slot

    @property
    def truncated(self) -> bool:
        return bool(self.cuts)


def criteria_text(criteria: Sequence[str]) -> str:
    return "\n".join(f"* {c}" for c in criteria)


def conversation_text(messages: Sequence[Message]) -> str:
    """The judged part of a conversation: the answer, or every turn after the first user message.

    ``(user: q, assistant: a)`` -> ``"a"``; with follow-up turns -> ``"Model: a\\n\\nUser: q2\\n\\nModel: a2"``.
    """
    start = next((i + 1 for i, m in enumerate(messages) if m.role == "user"), 0)
    rest = [m for m in messages[start:] if m.role != "system"]
    if len(rest) == 1 and rest[0].role == "assistant":
        return rest[0].content
    return _flatten(rest)


def _flatten(messages: Sequence[Message]) -> str:
    return "\n\n".join(f"{'User' if m.role == 'user' else 'Model'}: {m.content}" for m in messages)


def judged_texts(prompt: str, model_a: Sequence[Message], model_b: Sequence[Message]) -> tuple[str, str, str]:
    """``(query, answer_a, answer_b)``: what a judge reads for one preference pair.

    Turns both conversations share (a multi-turn transcript where only the last reply differs, as
    in hh-rlhf) are context, so they go to the query and the answers are the parts that differ:
    ``(user: q, assistant: a1, user: q2, assistant: a2 | b2)`` -> ``("User: q\n\nModel: a1\n\nUser: q2",
    "a2", "b2")``. Without shared turns beyond the first user message, the query is ``prompt`` and
    each answer is :func:`conversation_text`. Training and evaluation both read pairs through
    this, so a judge is scored on exactly the view it learned from.
    """
    a = [m for m in model_a if m.role != "system"]
    b = [m for m in model_b if m.role != "system"]
    k = 0
    while k < min(len(a), len(b)) - 1 and a[k] == b[k]:
        k += 1
    if k <= 1 or not any(m.role == "assistant" for m in a[:k]):
        return prompt, conversation_text(model_a), conversation_text(model_b)

    def tail(ms: Sequence[Message]) -> str:
        return ms[0].content if len(ms) == 1 and ms[0].role == "assistant" else _flatten(ms)

    return _flatten(a[:k]), tail(a[k:]), tail(b[k:])


def waterfill(lengths: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` tokens: short parts keep everything, long ones get equal shares.

    >>> waterfill([10, 100, 100], 110)
    [10, 50, 50]
    """
    alloc = [0] * len(lengths)
    remaining = max(0, budget)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    for k, i in enumerate(order):
        share = remaining // (len(lengths) - k)
        alloc[i] = min(lengths[i], share)
        remaining -= alloc[i]
    return alloc


class PromptFormatter:
    """Turns (criteria, query, responses) into token ids within ``max_length``."""

    def __init__(self, tokenizer, *, max_length: int = 1024, query_max_tokens: int = 256,
                 min_response_tokens: int = 64, keep: str = "head_tail", use_chat_template: bool = True):
        if keep not in ("head_tail", "head"):
            raise ValueError(f"keep={keep!r}: expected head_tail or head")
        self.tok = tokenizer
        self.max_length, self.query_max, self.min_resp, self.keep = max_length, query_max_tokens, \
            min_response_tokens, keep
        self.chat = bool(use_chat_template and getattr(tokenizer, "chat_template", None))
        self.pad_id = tokenizer.pad_token_id
        self._ellipsis = self._ids(ELLIPSIS)
        self._prefix, self._suffix = ((), ()) if self.chat else self._special_tokens()
        self._templates = {"pairwise": self._template("pairwise"), "pointwise": self._template("pointwise")}
        self._cache: dict[str, tuple[int, ...]] = {}
        for kind, parts in self._templates.items():
            fixed = len(self._prefix) + len(self._suffix) + sum(len(p) for p in parts if isinstance(p, tuple))
            n_resp = sum(1 for p in parts if isinstance(p, str) and p.startswith("response"))
            if fixed + n_resp * min_response_tokens > max_length:
                raise ValueError(f"max_length={max_length} cannot hold the {kind} template ({fixed} tokens) "
                                 f"and {n_resp} response(s) of min_response_tokens={min_response_tokens}")

    # ---- public --------------------------------------------------------------------------
    def pairwise(self, criteria: Sequence[str], query: str, response_a: str, response_b: str) -> Encoded:
        return self._encode("pairwise", {"criteria": criteria_text(criteria), "query": query,
                                         "response_a": response_a, "response_b": response_b})

    def pointwise(self, criteria: Sequence[str], query: str, response: str) -> Encoded:
        return self._encode("pointwise", {"criteria": criteria_text(criteria), "query": query,
                                          "response": response})

    # ---- building ------------------------------------------------------------------------
    def _ids(self, text: str) -> tuple[int, ...]:
        # verbose=False: pieces are cut to max_length by us, not by the tokenizer's own limit
        return tuple(self.tok(text, add_special_tokens=False, verbose=False)["input_ids"])

    def _cached_ids(self, text: str) -> tuple[int, ...]:
        ids = self._cache.get(text)
        if ids is None:
            ids = self._ids(text)
            if len(self._cache) < 200_000:
                self._cache[text] = ids
        return ids

    def _special_tokens(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ids the tokenizer adds around a text (BERT: [CLS] ... [SEP]; Llama: <s> ...)."""
        plain = list(self._ids("hello"))
        full = list(self.tok("hello", add_special_tokens=True)["input_ids"])
        for i in range(len(full) - len(plain) + 1):
            if full[i:i + len(plain)] == plain:
                return tuple(full[:i]), tuple(full[i + len(plain):])
        return (), ()

    def _template(self, kind: str) -> list[str | tuple[int, ...]]:
        """Literal token-id runs and slot names, in order."""
        m = {s: _MARK.format(s) for s in _SLOTS}
        if kind == "pairwise":
            messages = [{"role": "user", "content": PAIRWISE_PROMPT.format(**m)}]
        else:
            messages = [{"role": "system", "content": POINTWISE_SYSTEM.format(criteria=m["criteria"])},
                        {"role": "user", "content": m["query"]},
                        {"role": "assistant", "content": m["response"]}]
        if self.chat:
            text = self.tok.apply_chat_template(messages, tokenize=False,
                                                add_generation_prompt=(kind == "pairwise"))
        else:
            text = "\n\n".join(f"{x['role'].capitalize()}: {x['content']}" if kind == "pointwise"
                               else x["content"] for x in messages)
        parts: list[str | tuple[int, ...]] = []
        pos = 0
        for match in _MARK_RE.finditer(text):
            if match.start() > pos:
                parts.append(self._ids(text[pos:match.start()]))
            parts.append(match.group(1))
            pos = match.end()
        if pos < len(text):
            parts.append(self._ids(text[pos:]))
        return parts

    def _encode(self, kind: str, values: dict[str, str]) -> Encoded:
        parts = self._templates[kind]
        fixed = len(self._prefix) + len(self._suffix) + sum(len(p) for p in parts if isinstance(p, tuple))
        ids = {name: self._cached_ids(values[name]) for name in parts if isinstance(name, str)}
        full = {name: len(v) for name, v in ids.items()}
        total = fixed + sum(len(v) for v in ids.values())
        budget = self._allocate(kind, fixed, {k: len(v) for k, v in ids.items()})
        cuts = []
        for name, tokens in ids.items():
            if budget[name] < len(tokens):
                ids[name] = self._cut(tokens, budget[name])
                cuts.append(Cut(name, len(tokens), len(ids[name])))
        out: list[int] = list(self._prefix)
        spans = []
        for p in parts:
            if isinstance(p, str):
                spans.append((p, len(out), len(out) + len(ids[p]), full[p]))
            out.extend(p if isinstance(p, tuple) else ids[p])
        out.extend(self._suffix)
        if self.pad_id is not None and out and out[-1] == self.pad_id:
            # Sequence-classification heads pool the last non-pad token; ending on the pad id
            # would silently pool the wrong position.
            raise ValueError("the prompt ends with the pad token; choose another pad token")
        return Encoded(tuple(out), tuple(cuts), total, tuple(spans))

    def span_rows(self, enc: Encoded, kind: str) -> list[list[int]]:
        """``[[start, end, untruncated length], ...]`` in ``span_head.SLOTS[kind]`` order (the span
        head's input: it pools ``start:end`` and also reads how long the slot was before any cut)."""
        from usl.crm.span_head import SLOTS

        where = {name: [s, e, n] for name, s, e, n in enc.spans}
        return [where.get(name, [0, 0, 0]) for name in SLOTS[kind]]

    def _allocate(self, kind: str, fixed: int, lengths: dict[str, int]) -> dict[str, int]:
        if fixed + sum(lengths.values()) <= self.max_length:
            return dict(lengths)
        responses = [k for k in lengths if k.startswith("response")]
        n = len(responses)
        crit = lengths["criteria"]
        q = lengths["query"]
        resp_total = sum(lengths[r] for r in responses)
        floor_resp = sum(min(lengths[r], self.min_resp) for r in responses)
        avail = self.max_length - fixed - crit          # for query + responses
        if avail < floor_resp + min(q, 16):             # criteria must give way, as a last resort
            crit = max(0, self.max_length - fixed - floor_resp - min(q, 16))
            avail = self.max_length - fixed - crit
            if avail < floor_resp:
                raise ValueError(f"max_length={self.max_length} cannot hold the template ({fixed} tokens) "
                                 f"and {n} response(s) of {self.min_resp} tokens")
        qb = min(q, self.query_max, max(0, avail - floor_resp))
        alloc = waterfill([lengths[r] for r in responses], avail - qb)
        qb = min(q, avail - sum(alloc))                 # give back what short responses left over
        budget = {"criteria": crit, "query": qb}
        budget.update(zip(responses, alloc))
        assert fixed + sum(budget.values()) <= self.max_length, (budget, fixed, resp_total)
        return budget

    def _cut(self, tokens: tuple[int, ...], keep: int) -> tuple[int, ...]:
        if keep <= 0:
            return ()
        marker = self._ellipsis
        if self.keep == "head" or keep <= len(marker) + 2:
            return tokens[:keep]
        room = keep - len(marker)
        head = (room + 1) // 2
        return tokens[:head] + marker + tokens[len(tokens) - (room - head):]
