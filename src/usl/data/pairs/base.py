"""The record every pair source emits, and small functions they share."""

from __future__ import annotations

import re
from dataclasses import dataclass

from usl.types import Message


@dataclass(frozen=True)
class Pair:
    """Two answers to one query, and which criteria make the first one (``winner``) win.

    ``family`` names the criteria library under which ``winner`` is preferred; ``loser_family``
    the library under which ``loser`` is preferred ("" when the data gives no such criteria, as for
    human helpfulness labels). ``criteria``, when given, replaces the family's wordings with fixed
    text (a Prometheus rubric). ``context`` is the conversation before the judged answer and ends
    with a user turn; ``prompt`` is the text shown as the query. ``key`` identifies the query for
    splitting, so every pair of one query lands in the same split.
    """

    source: str
    key: str
    prompt: str
    context: tuple[Message, ...]
    winner: str
    loser: str
    family: str
    loser_family: str = ""
    criteria: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if not self.context or self.context[-1].role != "user":
            raise ValueError(f"{self.source}: pair context must end with a user turn")
        if not self.winner.strip() or not self.loser.strip():
            raise ValueError(f"{self.source}: empty answer in pair for {self.key!r}")


def single_turn(prompt: str) -> tuple[Message, ...]:
    return (Message("user", prompt),)


_TURN = re.compile(r"\n\n(Human|Assistant):[ \t]?")


def parse_transcript(text: str) -> tuple[tuple[Message, ...], str]:
    """Split an hh-rlhf transcript into (context, final assistant answer).

    >>> ctx, ans = parse_transcript("\\n\\nHuman: Hi\\n\\nAssistant: Hello!\\n\\nHuman: Bye\\n\\nAssistant: Ciao")
    >>> [(m.role, m.content) for m in ctx], ans
    ([('user', 'Hi'), ('assistant', 'Hello!'), ('user', 'Bye')], 'Ciao')
    """
    parts = _TURN.split(text if text.startswith("\n\n") else "\n\n" + text.lstrip())
    if parts[0].strip():
        raise ValueError(f"transcript does not start with a Human/Assistant turn: {text[:60]!r}")
    turns = [(("user" if role == "Human" else "assistant"), body.strip())
             for role, body in zip(parts[1::2], parts[2::2])]
    if len(turns) < 2 or turns[-1][0] != "assistant" or turns[-2][0] != "user":
        raise ValueError(f"transcript must end with a Human turn then an Assistant turn: {text[-80:]!r}")
    context = tuple(Message(r, c) for r, c in turns[:-1])  # type: ignore[arg-type]
    return context, turns[-1][1]


def first_user(context: tuple[Message, ...]) -> str:
    return next(m.content for m in context if m.role == "user")
