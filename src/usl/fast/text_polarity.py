"""Sentiment polarity of a short phrase, from the VADER lexicon (vaderSentiment, MIT).

The keyword reading of criteria asks whether a clause judges what it talks about badly ("Long
replies tire me out", "... I stop reading") or well ("... are perfect"). VADER's hand-rated
lexicon of 7,500 words, with its rules for negation and intensifiers, answers that for phrases it
has never seen; a few word forms it does not list are mapped to forms it does ("tire" ->
"tired"), and "un-" + a listed word reads as "not" it ("unhelpful").
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _analyzer():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def _form(word: str, lexicon: dict) -> str:
    """The form of ``word`` the lexicon lists ("tire" -> "tired", "frustrates" -> "frustrate")."""
    if word in lexicon or len(word) < 4:  # "as" is no "ass"
        return word
    bases = [word]
    for suffix, repl in (("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""), ("s", ""), ("d", "")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            bases.append(word[:-len(suffix)] + repl)
    for b in bases:
        for form in (b, b + "d", b + "ed", b + "s", b + "ing", b + "e"):
            if form in lexicon:
                return form
    return word


@lru_cache(maxsize=65536)
def polarity(text: str) -> float:
    """VADER's compound score of lowercased, space-separated words: -1 (negative) to 1 (positive)."""
    sia = _analyzer()
    words = []
    for w in text.split():
        form = _form(w, sia.lexicon)
        if form not in sia.lexicon and w.startswith("un") and _form(w[2:], sia.lexicon) in sia.lexicon:
            form = "not " + _form(w[2:], sia.lexicon)  # "unhelpful": not helpful
        words.append(form)
    return sia.polarity_scores(" ".join(words))["compound"]
