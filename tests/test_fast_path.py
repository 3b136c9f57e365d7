"""The interactive path's memos (issue 47, HTTP p50 for new criteria) change no number: a board ranked with them
is the board ranked without them, to the bit, and what they rest on holds.

- ``MiniLM.states`` reads a small batch's texts not read before and takes the others' states from a memo:
  ONNX Runtime gives a text the same states whatever batch it is read in and however far it is padded.
- ``AnswerBank.rows`` keeps the rows of the last long sequences it was given, by their identity.
- ``stats``: the bootstrap draws of a selection are kept.
- ``criteria_lexicon.lexicon_matrix`` keeps each text's keyword features.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from usl.leaderboard import stats
from usl.types import Criteria

SETS = [(("Answers are concise and get to the point quickly.", "Uses concrete examples."), ("Emoji.",)),
        (("Uses concrete examples.",), ()),
        (("Explains the reasoning step by step.", "Answers are concise and get to the point quickly."),
         ("Jargon without explanation.", "Emoji.")),
        (("Friendly, warm and encouraging tone.",), ("Jargon without explanation.",))]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from server_real import make_tiny

    home = tmp_path_factory.mktemp("fast_path_home")
    make_tiny(home)
    return home


def _service(home):
    """A new service and default judge, with every memo of criteria of this process emptied."""
    from usl.fast.length_intent import shipped_length_reading
    from usl.leaderboard.service import LeaderboardService
    from usl.store import Store

    service = LeaderboardService(Store(home / "usl.sqlite"), home=str(home))
    judge = service.judge("default")
    judge.encoder._memo.clear()
    judge.encoder._states.clear()
    shipped_length_reading().forget()
    judge.model.reader.forget()
    return service


def _boards(home, specs):
    """Each spec's board (as JSON) and every score matrix behind it (the combined one and the breakdown's)."""
    service = _service(home)
    out = []
    for spec in specs:
        lb = service.rank(spec)
        matrices = [m.copy() for m in service.scores._memo.values()]
        service.scores.clear()
        out.append((lb.to_json(), matrices))
    return out


def test_a_board_is_the_same_to_the_bit_with_the_memos_as_without(tiny, monkeypatch):
    from usl.data import minilm_onnx
    from usl.fast import answer_bank, criteria_lexicon
    from usl.leaderboard.types import LeaderboardSpec

    specs = [LeaderboardSpec(criteria=Criteria(likes, avoid), benchmark="tiny") for likes, avoid in SETS]
    specs.append(dataclasses.replace(specs[0], topics=("coding",)))
    with_memos = _boards(tiny, specs)
    criteria_lexicon._lexicon_row.cache_clear()
    monkeypatch.setattr(minilm_onnx, "STATES_MEMO_BATCH", 0)
    monkeypatch.setattr(answer_bank, "MEMO_MIN_ROWS", 10**9)
    monkeypatch.setattr(criteria_lexicon, "_lexicon_row", lambda t: tuple(criteria_lexicon.lexicon_features(t)))
    monkeypatch.setattr(stats, "_resample_counts", stats._resample_counts.__wrapped__)
    without = _boards(tiny, specs)
    for (board_a, mats_a), (board_b, mats_b) in zip(with_memos, without):
        board_a["spec"].pop("git_commit"), board_b["spec"].pop("git_commit")
        assert board_a == board_b
        assert len(mats_a) == len(mats_b) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(mats_a, mats_b))


def test_onnx_states_do_not_depend_on_the_batch(tiny):
    """What the states memo rests on: the same numbers to the bit alone, in a batch, padded further."""
    encoder = _service(tiny).judge("default").encoder
    texts = [t for s in SETS for t in s[0] + s[1]] + ["x", "Please " + "really " * 80 + "keep it short"]
    ids, mask = encoder.tokens(texts)
    whole = encoder.run_ids(ids, mask)
    for i, t in enumerate(texts):
        n = int(mask[i].sum())
        for batch, pad in (([t], None), ([texts[-1], t], None), ([t], 64), (texts[::-1], None)):
            ids, m = encoder.tokens(batch, pad_to=pad)
            out = encoder.run_ids(ids, m)
            j = batch.index(t)
            assert int(m[j].sum()) == n
            assert all(np.array_equal(a[i, :n], b[j, :n]) for a, b in zip(whole, out))


def test_states_from_the_memo_are_the_passes_own(tiny):
    encoder = _service(tiny).judge("default").encoder
    texts = ["Cite sources.", "Keep it short and sweet, please.", "Cite sources."]
    ids, mask = encoder.tokens(texts)
    fresh = encoder.run_ids(ids, mask)
    encoder.states(texts[1:2])                         # one of them read before, alone
    got, got_mask = encoder.states(texts)
    assert np.array_equal(mask, got_mask)
    for a, b in zip(fresh, got):
        assert np.array_equal(a * mask[..., None], b)  # the text's states; zeros past its tokens
    big = [f"criterion number {i}" for i in range(40)]  # a bulk pass keeps nothing
    before = len(encoder._states)
    encoder.states(big)
    assert len(encoder._states) == before


def test_answer_rows_are_kept_by_the_sequences_identity(tiny):
    bank = _service(tiny).judge("default").bank
    queries = ["q"] * 1500
    answers = [f"answer {i}" for i in range(1500)]
    bank.rows(queries[:10], answers[:10])
    first = bank.rows(queries, answers)
    assert bank.rows(queries, answers) is first
    assert not first.flags.writeable
    again = bank.rows(list(queries), list(answers))      # equal sequences, other objects: looked up anew
    assert again is not first and np.array_equal(again, first)
    assert np.array_equal(bank.rows(queries[:10], answers[:10]), first[:10])


def test_kept_bootstrap_draws_give_the_same_intervals():
    rng = np.random.default_rng(0)
    s = rng.random((7, 40))
    s[2, 5] = np.nan
    counts = stats.resample_counts(40, 200, 3)
    counts[0, 0] += 1                                  # a copy: the kept draws are not changed by a caller
    fresh = stats._resample_counts.__wrapped__(40, 200, 3)
    assert np.array_equal(stats.resample_counts(40, 200, 3), fresh)
    c = fresh.astype(np.float64)
    want = 100.0 * (c @ np.where(np.isnan(s), 0.0, s).T) / (c @ (~np.isnan(s)).T.astype(np.float64))
    assert np.array_equal(stats.bootstrap_means(s, 200, 3), want)
