"""What a user's criteria ask of an answer's length: shorter, longer, or nothing. One reading for the
whole product.

Three places need it. The default judge's length prior points the way it reads a criterion; length
control is turned off for a board whose criteria are about length (controlling for length would remove the
very thing the user asked for, ``leaderboard/length_control.py``); and the contradiction check warns when
one wish asks for shorter answers and another for longer ones. All three read ``LengthReading``: the mean
of two learned readers' probabilities, the length reader the fast CRM was trained with
(``criterion_reader.py``, ``weights/fast-crm/length_reader``) and the criteria reader's direction head
(``criteria_reading.py``, ``weights/fast-crm/criteria_reader``). A criterion is a length wish when the mean
gives "neither" less than half of its probability; it points the way of the larger of P(shorter) and
P(longer), turned by a dislike: "Avoid: long answers" and "No walls of text" both ask for shorter answers.

    >>> [(w.criterion, w.side) for w in length_wishes(Criteria(("Keep it tight", "Cite sources")))]
    [('Keep it tight', 'shorter')]

On wordings neither reader trained on (``python scripts/criteria_reading_eval.py --reader today``; length
wishes read the right way / wishes of no length taken for length ones; the length reader reads the keyword
reader's axes, ``keyword_reader.py``; "both" reads signs with the sign reader, ``sign_reader.py``, the
single readers' columns were measured with ``split_sign``'s):

| wordings | length reader alone | criteria reader alone | both (this reading) |
| --- | --- | --- | --- |
| blind set (56 length wishes, 88 others) | 0.821 / 0.114 | 0.982 / 0.068 | 0.964 / 0.045 |
| held-out negated and indirect (70 length wishes, 22 others) | 0.686 / 0.136 | 0.857 / 0.136 | 0.857 / 0.091 |
| blind length sets g / h / i / j (120 each) | 0.825 / 0.867 / 0.942 / 0.850 | 0.783 / 0.833 / 0.858 / 0.783 | 0.850 / 0.875 / 0.958 / 0.875 |
| ``tests/data/length_intent_heldout.json`` (40 length wishes) | 0.875 | 0.950 | 0.950 |
| the library's held-out wordings (17 length wishes, 168 others) | 0.941 / 0.101 | 0.824 / 0.095 | 0.941 / 0.083 |

The two readers err on different wordings: the
length reader, whose inputs include the keyword axes, on negations and situations
("Not too long", "I have all day"); the criteria reader on plain wishes ("Brief replies only.", "Long
answers annoy me.") and on some dislikes ("Avoid: answers without detail" reads as a wish for shorter
answers). docs/log.md, 2026-12-03, has the misses left.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from usl.fast.criteria_reading import READER_DIR, CriteriaReader
from usl.fast.criterion_reader import CriterionReader
from usl.fast.sign_reader import learned_readers, splitter
from usl.types import Criteria, LengthWish
from usl.weights import shipped

_LOCK = threading.Lock()  # one reader, its tokenizer and its memo, read from the server's threads


class LengthReading:
    """The product's reading of length wishes: the mean of two learned readers' probabilities P(neither),
    P(shorter), P(longer), the length reader's (``criterion_reader.py``, which the fast CRM was trained
    with) and the criteria reader's direction head (``criteria_reading.py``). The two err on different
    wordings, so their mean reads more of them the right way than either (the module's table). The
    length reader reads what ``split`` (the judge's sign reading, ``usl.fast.sign_reader``) leaves of a
    criterion ("Avoid: long answers" -> "long answers"); the criteria reader reads it whole, in the user's
    frame, turned here into the length reader's. It is what ``read_wishes`` gives the engine and what the
    default judge's length prior reads (``FastJudge``)."""

    def __init__(self, length: CriterionReader, criteria: CriteriaReader,
                 split: Callable[[Sequence[str]], list[tuple[str, float]]]):
        self.length, self.criteria = length, criteria
        self.split = split  # the judge's sign reading (``usl.fast.sign_reader``)

    def forget(self) -> None:
        """Empty both readers' memos of criteria (benchmarks of new criteria)."""
        self.length.forget()
        self.criteria.forget()

    def probs(self, criteria: Sequence[str]) -> np.ndarray:
        """(n, 3): P(none), P(shorter), P(longer) of each criterion (a like, or a dislike as
        "Avoid: ..."), in the frame of what the sign reading leaves of it, as ``CriterionReader.probs``."""
        if not criteria:
            return np.zeros((0, 3), np.float32)
        rests, signs = zip(*self.split(criteria))
        whole = self.criteria.probabilities(list(criteria))[1].astype(np.float32)
        turned = np.asarray(signs) < 0  # "Avoid: long answers" asks for shorter ones; its rest names longer
        whole[turned] = whole[turned][:, [0, 2, 1]]
        return ((self.length.probs(list(rests)) + whole) / 2).astype(np.float32)

    @classmethod
    def load(cls, weights: str | Path) -> LengthReading | None:
        """The reading of a fast CRM's weights folder with both readers, else None."""
        length = CriterionReader.load(weights, "length")
        if length is None or not (Path(weights) / READER_DIR).is_dir():
            return None
        recorded = json.loads((Path(weights) / "config.json").read_text()).get("lexicon_fingerprint")
        length.keywords, signs = learned_readers(weights, recorded)
        return cls(length, CriteriaReader.load(weights), splitter(signs))


@functools.lru_cache(maxsize=1)
def shipped_length_reading() -> LengthReading:
    """The shipped default judge's reading of length (loaded once a process; MiniLM on first read)."""
    reading = LengthReading.load(shipped("fast-crm"))
    if reading is None:
        raise FileNotFoundError("the shipped fast CRM lacks its length_reader/ or criteria_reader/")
    return reading


def read_wishes(texts: Sequence[str], reading: LengthReading | None = None) -> list[LengthWish | None]:
    """Each criterion text (a like, or a dislike as "Avoid: ...") read as a length wish, or None."""
    if not texts:
        return []
    with _LOCK:  # also the first load: two threads that both find no reader load one
        reading = reading or shipped_length_reading()
        signs = [sign for _, sign in reading.split(list(texts))]
        p = reading.probs(list(texts))
    out: list[LengthWish | None] = []
    for text, sign, (neither, shorter, longer) in zip(texts, signs, p.tolist()):
        if neither >= 0.5:
            out.append(None)
        else:
            out.append(LengthWish(text, "shorter" if (shorter - longer) * sign > 0 else "longer", 1.0 - neither))
    return out


def length_wishes(criteria: Criteria, reading: LengthReading | None = None) -> list[LengthWish]:
    """The length wishes among ``criteria``'s likes and dislikes, in ``Criteria.as_list`` order."""
    return [w for w in read_wishes(criteria.as_list(), reading) if w is not None]


def length_wish(criteria: Criteria, reading: LengthReading | None = None) -> LengthWish | None:
    """The first length wish of ``criteria``, or None: what turns length control off."""
    wishes = length_wishes(criteria, reading)
    return wishes[0] if wishes else None
