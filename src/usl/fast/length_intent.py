"""What a user's criteria ask of an answer's length: shorter, longer, or nothing. One reading for the
whole product.

Three places need it. The default judge's length prior points the way its learned length reader
(``criterion_reader.py``, ``weights/fast-crm/length_reader``) reads a criterion; length control is
turned off for a board whose criteria are about length (controlling for length would remove the very
thing the user asked for, ``leaderboard/length_control.py``); and the contradiction check warns when one
wish asks for shorter answers and another for longer ones. The last two used word lists, which
disagreed with the judge ("Keep it tight", "No walls of text", "tl;dr please" move the judge but name
no listed word): the board kept length control on and took away exactly what the user asked for. Both
now read that same reader, here, so phrasing no list foresaw is read as the judge reads it.

A criterion is a length wish when the reader gives "neither" less than half of its probability; it
points the way of the larger of P(shorter) and P(longer), turned by a dislike: "Avoid: long answers"
and "No walls of text" both ask for shorter answers (the reader reads what ``split_sign`` leaves, as
the judge does).

    >>> [(w.criterion, w.side) for w in length_wishes(Criteria(("Keep it tight", "Cite sources")))]
    [('Keep it tight', 'shorter')]

On wordings its reader never trained on (``scripts/length_intent_heldout.py``, P(neither) < 0.5 as above):

| wordings | read as a length wish | and pointed the right way |
| --- | --- | --- |
| the four blind length sets (``probe_independent_{g,h,i,j}``, 480) | 0.958 | 0.873 |
| ``tests/data/length_intent_heldout.json`` (40 length wishes) | 0.925 | 0.875 |
| non-length wishes: that table's 25, ``extra_{p,q,r}``'s 60, the library's 168 held out | 0, 0.12, 0.10 | |
| register and domain-style wishes (``configs/domain_wordings``, 2,401) | 0.19 | |

The keyword list it replaces read 0.51 of those length wishes and 0.07 of the others. Many register
wishes taken for length ones do carry length ("Respond like a textbook chapter", "executive summary
style"); the judge's length prior reads them so too. Misses: "Not too long" reads as a wish for longer
answers (P 0.68), "I do not have much time" as a length wish (P 0.59) of no clear side.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from usl.fast.criterion_reader import CriterionReader
from usl.types import Criteria

Side = Literal["shorter", "longer"]
_LOCK = threading.Lock()  # one reader, its tokenizer and its memo, read from the server's threads


@dataclass(frozen=True)
class LengthWish:
    criterion: str  # as the judge reads it: a dislike as "Avoid: ..."
    side: Side
    p: float        # P(a length wish): 1 - P(neither)


@functools.lru_cache(maxsize=1)
def shipped_length_reader() -> CriterionReader:
    """The default judge's length reader (loaded once a process; its MiniLM is loaded on first read)."""
    from usl.weights import shipped

    reader = CriterionReader.load(shipped("fast-crm"), "length")
    if reader is None:
        raise FileNotFoundError("the shipped fast CRM has no length_reader/")
    return reader


def read_wishes(texts: Sequence[str], reader: CriterionReader | None = None) -> list[LengthWish | None]:
    """Each criterion text (a like, or a dislike as "Avoid: ...") read as a length wish, or None."""
    from usl.fast.scorer import split_sign

    if not texts:
        return []
    rests, signs = zip(*(split_sign(t) for t in texts))
    with _LOCK:  # also the first load: two threads that both find no reader load one
        p = (reader or shipped_length_reader()).probs(list(rests))
    out: list[LengthWish | None] = []
    for text, sign, (neither, shorter, longer) in zip(texts, signs, p.tolist()):
        if neither >= 0.5:
            out.append(None)
        else:
            out.append(LengthWish(text, "shorter" if (shorter - longer) * sign > 0 else "longer", 1.0 - neither))
    return out


def length_wishes(criteria: Criteria, reader: CriterionReader | None = None) -> list[LengthWish]:
    """The length wishes among ``criteria``'s likes and dislikes, in ``Criteria.as_list`` order."""
    return [w for w in read_wishes(criteria.as_list(), reader) if w is not None]


def length_wish(criteria: Criteria, reader: CriterionReader | None = None) -> LengthWish | None:
    """The first length wish of ``criteria``, or None: what turns length control off."""
    wishes = length_wishes(criteria, reader)
    return wishes[0] if wishes else None
