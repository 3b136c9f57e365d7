"""Criteria-independent style features of one answer: length, layout, register.

These are what subjective criteria most often talk about ("concise", "use bullet points", "no
jargon", "formal"), and they are cheap: ~21,000 answers take about a second. Each feature is a
float; ``FEATURES`` names them in order. The fast CRM standardises them and learns, per criterion,
how much each one matters.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

_WORD = re.compile(r"[A-Za-z\u00C0-\u024F']+|\d+")
_SENT = re.compile(r"[.!?]+(?:\s|$)")
_BULLET = re.compile(r"^\s*[-*\u2022+]\s+", re.M)
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+", re.M)
_HEADER = re.compile(r"^\s*#{1,6}\s+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
_CODE = re.compile(r"```")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_EMOJI = re.compile("[\U0001F300-\U0001FAFF\u2600-\u27BF]")
_REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|i cannot|i can'?t|i won'?t|as an ai|i'?m not able|"
                      r"i am not able|i apologi[sz]e|not appropriate|i'm unable|i am unable)\b", re.I)
_FIRST = re.compile(r"\b(i|me|my|mine|i'm|i've|i'd|i'll)\b", re.I)
_SECOND = re.compile(r"\b(you|your|yours|you're|you'll|you've)\b", re.I)
_FORMAL = re.compile(r"\b(furthermore|moreover|therefore|thus|hence|consequently|notably|"
                     r"additionally|however|nevertheless|whereas|accordingly)\b", re.I)
_HEDGE = re.compile(r"\b(may|might|could|perhaps|possibly|likely|generally|typically|often)\b", re.I)
_CASUAL = re.compile(r"\b(hey|cool|awesome|gonna|wanna|yeah|super|totally|fun|lol|wow|guys)\b", re.I)
_BUSINESS = re.compile(r"\b(market|customer|revenue|strategy|roi|stakeholder|business|profit|growth|"
                       r"investment|cost|brand|sales|client)\w*", re.I)
_ACADEMIC = re.compile(r"\b(research|study|studies|evidence|theory|analysis|hypothesis|literature|"
                       r"empirical|scholar|et al|journal|framework|methodolog)\w*", re.I)
_IMAGERY = re.compile(r"\b(like a|as if|whisper|dance|glow|shimmer|heart|soul|dream|gentle|vivid|"
                      r"tapestry|symphony|embrace|painted|golden|breath)\w*", re.I)

FEATURES = (
    "log_words", "log_chars", "log_lines", "log_paragraphs", "bullet_frac", "numbered_frac",
    "log_headers", "log_bold", "log_code_blocks", "log_inline_code", "log_sentence_len",
    "word_len", "type_token", "long_word_frac", "question_rate", "exclaim_rate", "comma_rate",
    "colon_rate", "paren_rate", "quote_rate", "digit_frac", "emoji_rate", "refusal", "first_person",
    "second_person", "formal_rate", "hedge_rate", "casual_rate", "business_rate", "academic_rate",
    "imagery_rate", "upper_frac",
)


def features_one(text: str) -> list[float]:
    words = _WORD.findall(text)
    n_w = len(words)
    nw = max(n_w, 1)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    n_lines = max(len(lines), 1)
    sentences = max(len(_SENT.findall(text)), 1)
    paragraphs = len([p for p in re.split(r"\n\s*\n", text) if p.strip()])
    lw = [w.lower() for w in words]
    chars = max(len(text), 1)
    return [
        math.log1p(n_w), math.log1p(len(text)), math.log1p(len(lines)), math.log1p(paragraphs),
        len(_BULLET.findall(text)) / n_lines, len(_NUMBERED.findall(text)) / n_lines,
        math.log1p(len(_HEADER.findall(text))), math.log1p(len(_BOLD.findall(text))),
        math.log1p(len(_CODE.findall(text)) // 2), math.log1p(len(_INLINE_CODE.findall(text))),
        math.log1p(n_w / sentences), sum(map(len, words)) / nw, len(set(lw)) / math.sqrt(nw),
        sum(len(w) >= 9 for w in words) / nw, text.count("?") / sentences,
        text.count("!") / sentences, text.count(",") / nw, text.count(":") / nw,
        text.count("(") / nw, (text.count('"') + text.count("\u201c")) / nw,
        sum(c.isdigit() for c in text) / chars, len(_EMOJI.findall(text)) / sentences,
        float(bool(_REFUSAL.search(text[:400]))), len(_FIRST.findall(text)) / nw,
        len(_SECOND.findall(text)) / nw, len(_FORMAL.findall(text)) / nw,
        len(_HEDGE.findall(text)) / nw, len(_CASUAL.findall(text)) / nw,
        len(_BUSINESS.findall(text)) / nw, len(_ACADEMIC.findall(text)) / nw,
        len(_IMAGERY.findall(text)) / nw, sum(c.isupper() for c in text) / chars,
    ]


def style_features(texts: Sequence[str]) -> np.ndarray:
    """(n, len(FEATURES)) float32."""
    if not texts:
        return np.zeros((0, len(FEATURES)), np.float32)
    return np.asarray([features_one(t) for t in texts], dtype=np.float32)
