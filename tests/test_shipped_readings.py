"""The default board's readings that ship with the package (``scripts/ship_board_readings.py``) are
current and are exactly what would be computed: every answer's features in the table of the bank's
layout, and every query's and curated topic's vector in the embedder's table."""

from __future__ import annotations

import random

import numpy as np
import pytest

from usl.data.alpaca_eval import load_alpaca_eval
from usl.data.embed import SHIPPED, Embedder, _shipped
from usl.data.topics import load_curated
from usl.fast.style_scorer import text_key
from usl.paths import shared_data

SHARED = shared_data()
needs_data = pytest.mark.skipif(SHARED is None or not (SHARED / "alpaca_eval").is_dir(), reason="no ../shared/data")


@pytest.fixture(scope="module")
def board():
    return load_alpaca_eval(SHARED / "alpaca_eval", split="board")


@needs_data
def test_every_board_answer_has_its_shipped_features_and_they_are_what_the_bank_computes(tmp_path, board):
    from usl.judges.fast import FastJudge

    bank = FastJudge(home=str(tmp_path)).bank
    known = bank._shipped_features()
    answers = list(dict.fromkeys(r.text for r in board.responses))
    missing = [a for a in answers if text_key(a) not in known]
    assert not missing, f"{len(missing)} board answers lack shipped features: rerun scripts/ship_board_readings.py"
    sample = random.Random(0).sample(answers, 64)
    np.testing.assert_allclose(bank._features(sample), bank._compute_features(sample), rtol=1e-6, atol=1e-6)
    assert len(bank._features(["an answer no table holds"])) == 1      # the others are computed


@needs_data
def test_topic_texts_are_shipped_and_match_the_model(board):
    texts = [q.text for q in board.benchmark.queries]
    texts += [t for c in load_curated() for t in (c.description, *c.examples)]
    e = Embedder()
    shipped = _shipped(e.max_seq_length)
    assert all(e.key(t, e.max_seq_length) in shipped for t in texts), \
        f"{SHIPPED} is stale: rerun scripts/ship_board_readings.py"
    sample = random.Random(0).sample(texts, 8)
    e.vectors = None                                                    # read, not computed
    got = e.encode(sample)
    np.testing.assert_allclose(got, Embedder().vectors(sample), atol=1e-5)
    assert _shipped(e.max_seq_length + 1) == {}                         # another length: computed
