"""The board-query guard: no leaderboard query may reach reward-model training data.

A reward model that saw a board query (with any answers) during training would be judging
answers it may have memorised, so the leaderboard it produces would be biased. AlpacaEval's
805 instructions also turn up inside other public sets (PandaLM, hh-rlhf helpful-base,
the Vicuna questions that Prometheus grades), wrapped in transcript markup or split into
instruction + input, so an exact-match check is not enough.

Both sides are normalised (:func:`normalise`): Unicode NFKC, lower case, transcript markers
("Human:", "## Assistant:", "User:") dropped, every non-alphanumeric run turned into one space.
A text *leaks* when

* it equals a board instruction, or one turn of it does (transcripts are split on their markers), or
* it contains a board instruction as a whole-word substring (board instructions of fewer than
  ``min_contain_chars`` normalised characters must match exactly: "who is larry page" is fine to
  look for inside a transcript, "hi" is not), or
* it is long enough (``min_inside_chars``) and sits, whole words, inside a board instruction
  (PandaLM's instruction without its input, a truncated copy).

>>> guard = BoardGuard(["Who is Larry Page?"])
>>> guard.leaks("\\n\\nHuman: who is  Larry Page ?\\n\\nAssistant: A founder of Google.")
True
>>> guard.leaks("Who is Larry King?")
False
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from pathlib import Path
from typing import Iterable, Sequence

from usl.data.io import read_json
from usl.types import DataError, PreferenceSample

log = logging.getLogger(__name__)

_MARKUP = re.compile(r"(?:^|\n)\s*(?:#+\s*)?(?:human|assistant|user|system)\s*:", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    """Canonical form for matching: ``"\\n\\nHuman: Who's  there?"`` -> ``"who s there"``."""
    t = unicodedata.normalize("NFKC", text)
    t = _MARKUP.sub(" ", t)
    return _NON_ALNUM.sub(" ", t.lower()).strip()


class BoardGuard:
    """Answers "does this text contain (or sit inside) a board query?"; results are memoised."""

    def __init__(self, board_instructions: Iterable[str], *, min_contain_chars: int = 12,
                 min_inside_chars: int = 40):
        norms = {normalise(b) for b in board_instructions}
        norms.discard("")
        if not norms:
            raise ValueError("board guard needs at least one non-empty board instruction")
        self.board: frozenset[str] = frozenset(norms)
        self.min_contain_chars = min_contain_chars
        self.min_inside_chars = min_inside_chars
        self._long = sorted(b for b in norms if len(b) >= min_contain_chars)
        self._memo: dict[str, bool] = {}

    def __len__(self) -> int:
        return len(self.board)

    def leaks(self, text: str) -> bool:
        n = normalise(text)
        if n not in self._memo:
            # Each turn of a transcript on its own, too: a short board query ("Write \"Test\"") is
            # only looked for by exact match, and must still be found as one turn of a dialogue.
            turns = (normalise(t) for t in _MARKUP.split(text)) if _MARKUP.search(text) else ()
            self._memo[n] = self._check(n) or any(t in self.board for t in turns)
        return self._memo[n]

    def _check(self, n: str) -> bool:
        if not n:
            return False
        if n in self.board:
            return True
        padded = f" {n} "
        if any(f" {b} " in padded for b in self._long):
            return True
        if len(n) >= self.min_inside_chars:
            return any(padded in f" {b} " for b in self._long)
        return False

    def sample_leaks(self, s: PreferenceSample) -> bool:
        """Checks the prompt and every user turn of both conversations, one by one and joined."""
        users = [m.content for conv in (s.model_a, s.model_b) for m in conv if m.role == "user"]
        texts = [s.prompt, *users, "\n".join(dict.fromkeys(users))]
        return any(self.leaks(t) for t in texts)

    def find_leaks(self, samples: Sequence[PreferenceSample]) -> list[str]:
        """The idx of every leaking sample (empty when the set is clean)."""
        return [s.idx for s in samples if self.sample_leaks(s)]


def board_instructions(alpaca_dir: str | Path) -> list[str]:
    """The board queries named by ``split.json`` (indices into the baseline's outputs file)."""
    alpaca_dir = Path(alpaca_dir)
    split = read_json(alpaca_dir / "split.json")
    outputs = read_json(alpaca_dir / "outputs" / f"{split['baseline']}.json.gz")
    try:
        return [outputs[i]["instruction"] for i in split["board"]]
    except (IndexError, KeyError, TypeError) as e:
        raise DataError(f"split.json board indices do not fit the baseline outputs: {e}",
                        path=str(alpaca_dir / "split.json"), field="board") from e


def load_guard(shared_data: str | Path) -> BoardGuard:
    guard = BoardGuard(board_instructions(Path(shared_data) / "alpaca_eval"))
    log.debug("board guard over %d board queries", len(guard))
    return guard


def assert_clean(guard: BoardGuard, samples: Sequence[PreferenceSample], *, what: str) -> None:
    """Raise ``DataError`` naming the first leaking samples; training data must never leak."""
    bad = guard.find_leaks(samples)
    if bad:
        raise DataError(f"{len(bad)} {what} samples contain board queries, e.g. "
                        f"{json.dumps(bad[:5])}")
