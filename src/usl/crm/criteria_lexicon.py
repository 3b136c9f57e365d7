"""Keyword features of a criterion, to complement its sentence embedding.

Why: a small frozen sentence encoder embeds criteria by surface form ("I prefer an academic writing
style" sits next to "I prefer a business-oriented writing style"), so a head trained on a thousand
wordings does not carry over to new ones. The words people use for the common preference axes are
few and stable ("brief", "short", "to the point"; "thorough", "in depth"; "poetic", "vivid"), so a
signed count of each axis's words (negative inside a negation's scope) is a robust second view that generalises
to unseen wordings. Each feature is 0/1-ish; ``LEXICON_AXES`` names them in order.
"""

from __future__ import annotations

import re

import numpy as np

_AXES: dict[str, tuple[str, ...]] = {
    "short": ("concise", "brief", "short", "succinct", "terse", "to the point", "compact", "lean",
              "few words", "quick", "summar", "crisp", "tl;dr", "minimal", "straight to", "no fluff",
              "less is more", "not long", "one sentence", "a sentence or two", "skip the background",
              "sentence or two", "two sentences", "few sentences", "single sentence", "one line", "one-liner",
              "a line or two", "few lines", "bite-sized", "snappy", "punchy", "essentials", "bare bones",
              "nutshell", "quick answer", "shorter", "economical", "digestible", "only what"),
    "long": ("detail", "thorough", "in depth", "in-depth", "comprehensive", "long", "elaborat", "extensive",
             "exhaustive", "complete", "expand", "full picture", "everything", "deep", "depth", "explain fully",
             "cover all", "leave nothing out", "more context", "background", "lengthy", "verbose", "wordy",
             "rambl", "long-winded", "wall of text", "walls of text", "fluff", "filler", "pad", "waffl",
             "tangent", "essays", "longer", "nuance"),
    "academic": ("academ", "scholar", "research", "scientific", "theory", "theoret", "rigor", "evidence",
                 "citation", "cite", "formal", "technical", "precise", "journal", "university", "professor"),
    "business": ("business", "professional", "corporate", "practical", "actionable", "industry", "market",
                 "commercial", "roi", "customer", "strategy", "manager", "executive", "workplace"),
    "literary": ("poet", "poem", "literar", "literature", "creative", "vivid", "imagery", "metaphor", "story",
                 "narrative", "lyrical", "expressive", "artistic", "rhyme", "verse", "novel", "imaginative",
                 "figurative", "whimsical", "flowery", "beautiful language", "evocative"),
    "fun": ("fun", "humor", "humour", "funny", "joke", "witty", "playful", "entertain", "lighthearted",
            "light-hearted", "amusing", "enthusias", "exciting", "lively", "energetic", "cheerful", "emoji",
            "excite", "engaging", "casual"),
    "plain": ("plain", "simple", "everyday", "layman", "no jargon", "jargon", "easy to understand", "neutral",
              "normal", "ordinary", "straightforward", "accessible", "beginner", "child", "kid"),
    "structure": ("bullet", "list", "heading", "header", "structur", "markdown", "table", "numbered", "outline",
                  "skimmable", "organiz", "organis", "format", "step-by-step", "step by step", "steps"),
    "prose": ("prose", "paragraph", "flowing", "essay", "narrative", "no list", "no bullet", "sentences"),
    "examples": ("example", "instance", "illustrat", "concrete", "case stud", "sample"),
    "safe": ("safe", "harm", "ethic", "toxic", "danger", "illegal", "refuse", "responsib", "respectful"),
    "helpful": ("helpful", "useful", "accura", "correct", "relevant", "factual", "true", "quality", "answer the",
                "follow", "instruction", "solve", "informative", "reliable", "trust"),
    "warm": ("friendly", "warm", "empath", "kind", "polite", "personable", "caring", "supportive", "courteous"),
    "ai": ("as an ai", "ai ", "machine", "disclaimer", "language model", "caveat", "hedg"),
    "question": ("question", "ask me", "follow-up", "follow up", "clarif"),
    "code": ("code", "program", "python", "snippet", "function", "sql", "script"),
}
# Words that turn the next few words into something disliked ("too long", "I don't need the
# background", "annoyed by overly detailed answers").
_NEGATORS = {"no", "not", "don't", "dont", "never", "without", "avoid", "skip", "less", "stop", "hate", "dislike",
             "dislikes", "annoyed", "annoying", "annoys", "too", "overly", "excessive", "excessively",
             "unnecessary", "needless", "nothing", "instead", "cut", "drop", "nor", "isn't", "aren't", "doesn't",
             "won't", "can't", "neither", "minus", "spare", "tired", "sick", "against", "zero", "hates"}
# Idioms read before the negation scope: double negations that mean "more" ("don't hold back on
# detail", "I don't mind long answers") and set phrases of the length axis ("cut to the chase").
_NEG = r"(?:don'?t|do not|never|wouldn'?t|won'?t|doesn'?t|does not)"
_DOUBLE_NEGATIONS = (
    (re.compile(rf"\b{_NEG} (?:hold (?:anything |it )?back|skimp|cut corners|shy away from)\b|\bhold nothing back\b|"
                r"\bspare no\b|\bleave nothing out\b|\bnothing left out\b|\bno detail is too small\b|"
                r"\bcan'?t get enough\b|\bspell (?:it|everything|things) out\b|\bleave no stone unturned\b|"
                r"\bthe whole story\b"), " in depth "),
    (re.compile(rf"\b{_NEG} (?:leave out|leave anything out|omit|miss out)\b|\bwithout omitting\b"), " include "),
    (re.compile(rf"\b{_NEG} mind\b|\b(?:fine|ok|okay|happy) with\b"), " like "),
)
_PHRASES = (
    (re.compile(r"\bcut to the chase\b|\bget to the point\b|\bbottom line\b|\bin a nutshell\b|"
                r"\bshort and sweet\b|\bat a glance\b|\bkeep it tight\b|\btight\b"), " to the point "),
    # "over-explained", "going on and on": the too-long part is in the word itself, so it reads as
    # "long" and the sentence's own negation ("don't", "I hate") decides the sign
    (re.compile(r"\bover-?explain\w*|\bover-?long\b|\bover-?elaborat\w*|\bgo(?:es|ing)? on and on\b"),
     " long "),
)
_IDIOMS = _DOUBLE_NEGATIONS + _PHRASES
_CLAUSE = re.compile(r"[.;:!?]|\bbut\b|\bhowever\b|\binstead\b|\brather\b")
_TOKEN = re.compile(r"[a-z][a-z'\-]*")
_SCOPE = 5  # a negator reaches this many words ahead, within its clause

LEXICON_AXES = tuple(_AXES) + ("negation",)

# A criterion that only says what the user does not want ("No walls of text", "I can't stand
# long-winded replies") is read as "Avoid: <the rest>", the form the model is trained to sign.
_LEADING_NEGATION = re.compile(
    r"^(?:please,?\s+)?(?:no|avoid|avoiding|don'?t|do not|never|stop|skip|spare me|without|"
    r"i (?:don'?t|do not) (?:want|like|need|care for)|i (?:hate|dislike|can'?t stand|cannot stand)|"
    r"i'?d rather not have|(?:i\s+)?(?:get|am|'m|feel)?\s*(?:annoyed|irritated|frustrated|bored) (?:by|with)|"
    r"(?:i'?m |i am )?(?:tired|sick) of|(?:i'?m |i am )?not a fan of)\s+(?P<rest>.+)$", re.I)
# Words that say "more than wanted" inside a dislike: "Avoid: overly long answers" dislikes long
# answers, so they are dropped from the disliked part rather than read as a second negation.
_QUANTITY_LIMIT = re.compile(r"(?:more|less|fewer|longer|shorter) than\b|over \d|under \d")  # "No more than 3"
_INTENSIFIERS = re.compile(r"\b(?:overly|too|excessively|excessive|unnecessarily|unnecessary|needlessly|"
                           r"needless|over-the-top)\s+", re.I)


def strip_intensifiers(disliked: str) -> str:
    out = _INTENSIFIERS.sub("", disliked).strip()
    return out or disliked


def leading_negation(text: str) -> str | None:
    """The disliked part of a criterion that opens with a negation, else None. Conservative:
    nothing is returned when the rest holds another negation or a double-negation idiom
    ("Don't hold back", "Don't leave out any details", "No need to be brief"), which the
    keyword scope reads instead."""
    text = text.strip().replace("\u2019", "'")
    m = _LEADING_NEGATION.match(text)
    if not m or any(p.search(text.lower()) for p, _ in _DOUBLE_NEGATIONS):
        return None
    rest = strip_intensifiers(m.group("rest").strip().rstrip(".!"))
    toks = _TOKEN.findall(_rewrite_idioms(rest.lower()))
    if not toks or toks[0] in ("need", "problem", "worries", "matter") or _QUANTITY_LIMIT.match(rest.lower()) or \
            any(t in _NEGATORS or t.endswith("n't") for t in toks):
        return None
    return rest


def _rewrite_idioms(low: str) -> str:
    for pattern, repl in _IDIOMS:
        low = pattern.sub(repl, low)
    return low


def lexicon_features(text: str) -> list[float]:
    """Per axis, signed: hits outside a negation's scope minus hits inside it (each capped at 2,
    scaled to -1..1), so "overly long answers" lands where "Avoid: long answers" does."""
    low = _rewrite_idioms(text.lower().replace("\u2019", "'"))
    pos = dict.fromkeys(_AXES, 0)
    neg = dict.fromkeys(_AXES, 0)
    any_neg = False
    for clause in _CLAUSE.split(low):
        toks = _TOKEN.findall(clause)
        negated = [any(t in _NEGATORS or t.endswith("n't") for t in toks[max(0, i - _SCOPE):i])
                   for i in range(len(toks) + 1)]
        any_neg |= any(t in _NEGATORS or t.endswith("n't") for t in toks)
        padded = " " + " ".join(toks) + " "
        for axis, words in _AXES.items():
            for w in words:
                start = 0
                while (j := padded.find(w, start)) >= 0:
                    start = j + len(w)
                    if j > 0 and padded[j - 1].isalpha():  # "long" inside "belong"
                        continue
                    word_idx = padded[:j].count(" ") - 1
                    (neg if negated[max(0, min(word_idx, len(toks)))] else pos)[axis] += 1
    out: list[float] = []
    for axis in _AXES:
        out.append((min(pos[axis], 2) - min(neg[axis], 2)) / 2.0)
    out.append(1.0 if any_neg else 0.0)
    return out


def lexicon_matrix(texts) -> np.ndarray:
    """(n, len(LEXICON_AXES)) float32."""
    if not len(texts):
        return np.zeros((0, len(LEXICON_AXES)), np.float32)
    return np.asarray([lexicon_features(t) for t in texts], dtype=np.float32)
