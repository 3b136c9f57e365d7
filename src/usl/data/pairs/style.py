"""Style families found in ordinary answers: lists vs prose, warm vs direct openings, and so on.

Many models answer the same query, and their answers differ in style as well as content. A
detector marks answers that clearly have a trait (three or more list items) and answers that
clearly lack it (no list item, no heading); pairing one of each, of similar length, gives a pair
whose winner depends only on whether the user asked for that trait. Similar length matters: if
the listy answer were also the longer one, the model could learn "long wins" instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from usl.data.pairs.base import Pair, single_turn

_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.M)
_HEADING = re.compile(r"^\s*#{1,6}\s", re.M)
_CODE = re.compile(r"```.*?```", re.S)
_OPENER = re.compile(r"\s*(?:sure|certainly|of course|absolutely|great question|what a (?:great|wonderful|fun)"
                     r"|i'?d be (?:happy|glad|delighted)|i would be (?:happy|glad)|happy to|glad you asked"
                     r"|oh,? |ah,? |hello|hi there|thank you for)", re.I)
_SUMMARY = re.compile(r"(?:^|\n)\s*(?:\**)(?:in summary|in conclusion|overall|to summarize|to summarise|to sum up"
                      r"|in short|ultimately)\b", re.I)
_MARKDOWN = re.compile(r"\*\*[^*\n]+\*\*|^\s*#{1,6}\s|`", re.M)
_MARKUP_CHARS = re.compile(r"\*\*|__|^\s*#|`", re.M)
_EXAMPLE = re.compile(r"\bfor example\b|\bfor instance\b|\be\.g\.|\bexample:", re.I)
_YOU = re.compile(r"\byou(?:r|rs|rself)?\b", re.I)
_AI = re.compile(r"\bas an ai\b|\bas an artificial intelligence\b|\bas a (?:large )?language model\b"
                 r"|\bi(?: am|'m) (?:just |only )?(?:an ai|a (?:large )?language model|an artificial intelligence)"
                 r"|\bi (?:do not|don't) have personal (?:opinions|experiences|feelings|preferences|beliefs)", re.I)


def _prose_text(t: str) -> str:
    return _CODE.sub(" ", t)


def _you_rate(t: str) -> float:
    return len(_YOU.findall(t)) / max(1, len(t.split()))


def _exclaims(t: str) -> int:
    return len(re.findall(r"!(?!=)", _prose_text(t)))


@dataclass(frozen=True)
class Trait:
    """A family whose answers have a detectable trait, and its opposite family."""

    family: str
    opposite: str
    has: Callable[[str], bool]
    lacks: Callable[[str], bool]


TRAITS: tuple[Trait, ...] = (
    Trait("structured", "prose",
          lambda t: len(_LIST_ITEM.findall(t)) >= 3,
          lambda t: not _LIST_ITEM.search(t) and not _HEADING.search(t) and "\n\n" in t.strip()),
    Trait("friendly_opening", "direct_start",
          lambda t: bool(_OPENER.match(t)),
          lambda t: not _OPENER.match(t) and not _AI.search(t[:200])),
    Trait("closing_summary", "no_summary",
          lambda t: bool(_SUMMARY.search(t[-max(200, len(t) // 3):])),
          lambda t: not _SUMMARY.search(t)),
    Trait("ai_transparent", "no_ai_disclaimer",
          lambda t: bool(_AI.search(t)),
          lambda t: not re.search(r"\bAI\b|language model|artificial intelligence", t)),
    Trait("enthusiastic", "calm_tone",
          lambda t: _exclaims(t) >= 2,
          lambda t: _exclaims(t) == 0),
    Trait("follow_up_question", "no_questions",
          lambda t: _prose_text(t).rstrip().rstrip("*_ )").endswith("?"),
          lambda t: "?" not in _prose_text(t)[-400:] and not re.search(r"let me know|feel free to ask", t[-400:], re.I)),
    Trait("markdown_rich", "plain_text",
          lambda t: len(_MARKDOWN.findall(t)) >= 2,
          lambda t: not _MARKUP_CHARS.search(t)),
    Trait("with_examples", "no_examples",
          lambda t: bool(_EXAMPLE.search(t)),
          lambda t: not _EXAMPLE.search(t) and not re.search(r"\bsuch as\b|\blike\b", t, re.I)),
    Trait("second_person", "impersonal",
          lambda t: _you_rate(t) >= 0.03,
          lambda t: not _YOU.search(t)),
)


def style_pairs(answers: dict[str, list[tuple[str, str]]], rng: np.random.Generator, *, source_prefix: str,
                per_query: int = 3, max_len_ratio: float = 1.5, min_chars: int = 200) -> list[Pair]:
    """For each query and trait, up to ``per_query`` (has-trait, lacks-trait) answer pairs.

    ``answers`` maps a query to ``[(model, answer), ...]``. The has-trait answer wins under the
    trait's family, the other under the opposite family; ``source`` is ``<prefix>/<family>``.
    """
    pairs = []
    for q, texts in answers.items():
        texts = [(m, t) for m, t in texts if len(t) >= min_chars]
        for trait in TRAITS:
            pos = [(m, t) for m, t in texts if trait.has(t)]
            neg = [(m, t) for m, t in texts if trait.lacks(t)]
            cands = [(p, n) for p in pos for n in neg
                     if p[0] != n[0] and max(len(p[1]), len(n[1])) <= max_len_ratio * min(len(p[1]), len(n[1]))]
            for i in rng.permutation(len(cands))[:per_query]:
                (pm, pt), (nm, nt) = cands[i]
                pairs.append(Pair(f"{source_prefix}/{trait.family}", q, q, single_turn(q), pt, nt,
                                  trait.family, trait.opposite, note=f"{pm} vs {nm}"))
    return pairs
