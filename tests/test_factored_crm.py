"""``crm-factored``: the shipped transformer CRM split into stored answer vectors and a criteria
pass, loaded for real on the CPU (real weights, no download)."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from usl.crm.factored import (
    NEUTRAL,
    Basis,
    FactoredHead,
    PairBank,
    PairVectors,
    bank_version,
    head_logits,
    pair_key,
    read_contexts,
    weights_version,
)
from usl.judges.base import JudgeRequest
from usl.judges.registry import load_judge
from usl.types import Criteria

Q = "What is the capital of France?"
SHORT = "The capital of France is Paris."
LONG = ("The capital of France is Paris. It has been the country's political and cultural centre since the "
        "Middle Ages, and today it is home to the national government, the parliament and most ministries. "
        "Paris is also France's largest city, with about two million people in the city proper and more than "
        "twelve million in the metropolitan area, and it is known for landmarks such as the Eiffel Tower.")
MID = "Paris is the capital of France, and its largest city."
CONCISE, DETAILED = Criteria(("Prefer concise answers",)), Criteria(("Prefer detailed answers",))


@pytest.fixture(scope="module")
def crm():
    return load_judge("crm", device="cpu")


@pytest.fixture()
def judge(tmp_path):
    return load_judge("crm-factored", home=str(tmp_path), device="cpu")


def _count_passes(judge):
    """Rows the backbone reads, counted."""
    backbone = judge.crm.scorer.model.backbone
    seen = []
    real = backbone.forward

    def counting(*a, **kw):
        seen.append(kw["input_ids"].shape[0])
        return real(*a, **kw)

    backbone.forward = counting
    return seen


def _bank(judge, pairs, version=None, scale_d=1.0):
    v = judge.crm.pair_vectors(pairs)
    v = PairVectors(v.d_ab * scale_d, v.d_ba * scale_d, v.q, v.dl)
    return PairBank.build([pair_key(*p) for p in pairs], [p[0] for p in pairs], v, judge.basis,
                          version or judge.bank_version)


def test_the_head_on_stored_codes_is_the_span_head(crm, judge):
    """FactoredHead (criteria-independent part precomputed, basis, int8 codes) computes what the
    span head computes on the same vectors, up to the codes' rounding."""
    pairs = [(Q, SHORT, LONG), (Q, LONG, MID), (Q, MID, SHORT)]
    v = judge.crm.pair_vectors(pairs)
    basis = Basis.fit(v, k=6)                          # 6 vectors: a full-rank basis of them
    bank = PairBank.build([pair_key(*p) for p in pairs], [Q] * 3, v, basis, "x")
    c = judge.crm.criteria_vector(("Prefer concise answers",), [(Q, SHORT, LONG)])
    fast = FactoredHead(crm.scorer.model.head, basis, bank).logits(c, np.arange(3))
    exact = head_logits(crm.scorer.model, c, v)
    assert np.abs(fast - exact).max() < 0.05 * max(1.0, np.abs(exact).max())
    assert np.sign(fast).tolist() == np.sign(exact).tolist()
    sub = FactoredHead(crm.scorer.model.head, basis, bank).logits(c, np.array([2, 0]))   # any rows, any order
    assert sub.tolist() == pytest.approx([fast[2], fast[0]], abs=1e-5)



def test_the_head_reads_a_board_in_steps_as_at_once(crm, judge, monkeypatch):
    """Logits are computed LOGIT_ROWS stored pairs at a time (bounded temporaries on a 20k-pair
    board): the same values, in any row order, as in one step."""
    import usl.crm.factored as factored

    head, c = judge.head(), judge.criteria_vector(tuple(CONCISE.as_list()))
    n = len(judge.bank())
    for rows in (np.arange(n), np.random.default_rng(0).permutation(n)[:2000]):
        monkeypatch.setattr(factored, "LOGIT_ROWS", n + 1)
        once = head.logits(c, rows)
        monkeypatch.setattr(factored, "LOGIT_ROWS", 333)
        assert head.logits(c, rows).tolist() == pytest.approx(once.tolist(), abs=1e-5)

def test_it_follows_opposite_criteria_as_crm_does(crm, judge):
    reqs = [JudgeRequest(c, Q, a, b) for c in (CONCISE, DETAILED) for a, b in ((SHORT, LONG), (LONG, SHORT))]
    p = [v.p_a for v in judge.judge(reqs)]
    ref = [v.p_a for v in crm.judge(reqs)]
    assert p[0] > 0.5 > p[2] and ref[0] > 0.5 > ref[2]        # short wins, then loses: both judges
    assert p[0] == pytest.approx(1 - p[1], abs=1e-6)          # antisymmetric by construction
    assert judge.identity.startswith("crm-factored@")


def test_pair_vectors_are_read_once_and_stored_in_the_data_directory(tmp_path, judge):
    c = Criteria(("Vivid imagery",))
    first = judge.judge_matrix(c, [Q], [LONG], [SHORT])
    files = list((tmp_path / "cache" / "factored").glob("*.npz"))
    assert files == [judge.home_bank_path()] and len(PairBank.load(files[0])) == 1

    again = load_judge("crm-factored", home=str(tmp_path), device="cpu")
    passes = _count_passes(again)
    same = again.judge_matrix(c, [Q], [LONG], [SHORT])
    swapped = again.judge_matrix(c, [Q], [SHORT], [LONG])     # stored the other way round: no pass
    assert same == pytest.approx(first, abs=1e-6) and swapped == pytest.approx(1 - first, abs=1e-6)
    assert sum(passes) == 2                                   # the criteria's contexts only, read once


def test_a_pair_asked_both_ways_in_one_call_is_read_once(judge):
    passes = _count_passes(judge)
    v = judge.judge([JudgeRequest(CONCISE, Q, SHORT, MID), JudgeRequest(CONCISE, Q, MID, SHORT)])
    assert sum(passes) == 2 + 2                               # one pair in both orders, and the contexts
    assert len(PairBank.load(judge.home_bank_path())) == 1
    assert v[0].p_a == pytest.approx(1 - v[1].p_a, abs=1e-6)


def test_banks_of_other_weights_or_another_basis_are_ignored_with_a_warning(judge, caplog):
    other_basis = Basis(judge.basis.mean, judge.basis.components, judge.basis.scale * 2)
    for version in ("other-weights", bank_version(weights_version(judge.dir), other_basis)):
        _bank(judge, [(Q, LONG, SHORT)], version=version, scale_d=0.0).save(judge.home_bank_path())
        judge._bank = None
        passes = _count_passes(judge)
        with caplog.at_level(logging.WARNING):
            p = judge.judge_matrix(CONCISE, [Q], [LONG], [SHORT])
        assert "another CRM or basis" in caplog.text
        assert sum(passes) >= 2                                # the pair read again
        assert p[0] < 0.5                                      # and judged for real: concise prefers SHORT
        del judge.crm.scorer.model.backbone.forward
        caplog.clear()


def test_a_broken_home_bank_is_moved_aside_and_read_again(judge, caplog):
    judge.judge_matrix(CONCISE, [Q], [LONG], [SHORT])
    path = judge.home_bank_path()
    path.write_bytes(path.read_bytes()[:100])                 # truncated
    fresh = load_judge("crm-factored", home=judge.home, device="cpu")
    with caplog.at_level(logging.WARNING):
        p = fresh.judge_matrix(CONCISE, [Q], [LONG], [SHORT])
    assert str(path) in caplog.text and "moved aside" in caplog.text
    assert list(path.parent.glob(path.name + ".broken-*")) and len(PairBank.load(path)) == 1
    assert p[0] < 0.5


@pytest.mark.parametrize("content", [b"not a bank", None])
def test_a_broken_bank_file_is_named(tmp_path, content):
    bad = tmp_path / "bank.npz"
    if content is None:                                        # a valid archive of the wrong shapes
        np.savez(bad, format=np.array("usl-factored-bank/1"), version=np.array("x"), keys=np.zeros((2, 16), np.uint8),
                 c_ab=np.zeros((3, 4), np.int8), c_ba=np.zeros((3, 4), np.int8), qvec=np.zeros((1, 8)),
                 qrow=np.zeros(2, np.int32), dl=np.zeros(2))
    else:
        bad.write_bytes(content)
    with pytest.raises(ValueError, match=str(bad)):
        PairBank.load(bad)


def test_contexts_are_checked(tmp_path):
    f = tmp_path / "contexts.json"
    f.write_text(json.dumps({"contexts": []}))
    with pytest.raises(ValueError, match=f"{f}: 0 contexts, 2 asked for"):
        read_contexts(f, 2)
    f.write_text(json.dumps({"contexts": [{"query": "q", "answer": "", "baseline": "b"}]}))
    with pytest.raises(ValueError, match=r"contexts\[0\]"):
        read_contexts(f, 1)
    with pytest.raises(ValueError, match="at least one"):
        read_contexts(f, 0)


def test_banks_merge_without_losing_either_side(judge):
    pairs = [(Q, SHORT, LONG), ("Another question?", MID, LONG), (Q, LONG, MID)]
    one = _bank(judge, pairs[:1])
    two = _bank(judge, pairs[1:], scale_d=3.0)
    dup = _bank(judge, pairs[:1], scale_d=-1.0)                # a key `one` holds already
    both = one.merged(two).merged(dup)
    rows, sign = both.lookup([pair_key(*p) for p in pairs], [pair_key(q, b, a) for q, a, b in pairs])
    assert rows.tolist() == [0, 1, 2] and sign.tolist() == [1, 1, 1] and len(both) == 3
    assert np.array_equal(both.c_ba, np.concatenate([one.c_ba, two.c_ba]))      # nothing rounded again
    assert np.array_equal(both.q, np.concatenate([one.q, two.q]))                # query rows follow their pairs
    assert np.array_equal(both.dl, np.concatenate([one.dl, two.dl]))
    with pytest.raises(ValueError, match="versions"):
        one.merged(_bank(judge, pairs[1:2], version="other"))


def test_a_saved_bank_reloads_equal(tmp_path, judge):
    bank = _bank(judge, [(Q, SHORT, LONG), (Q, MID, LONG), ("Another question?", MID, SHORT)])
    bank.save(tmp_path / "b.npz")
    back = PairBank.load(tmp_path / "b.npz")
    for f in ("keys", "c_ab", "c_ba", "qvec", "qrow", "dl"):
        assert np.array_equal(getattr(back, f), getattr(bank, f)), f
    assert back.version == bank.version and len(back.qvec) == 2


def test_the_shipped_bank_covers_the_default_board(judge):
    """The vectors shipped beside crm are keyed by the texts the importer reads: every answered
    (model, query) pair of the default board finds its vectors, so no pass is needed for it."""
    from usl import paths
    from usl.data.alpaca_eval import load_alpaca_eval

    src = paths.shared_data()
    if src is None or not (Path(src) / "alpaca_eval").is_dir():
        pytest.skip("needs ../shared/data")
    imp = load_alpaca_eval(Path(src) / "alpaca_eval")
    b = imp.benchmark
    text = {(r.query_id, r.model): r.text for r in imp.responses}
    qtext = {q.id: q.text for q in b.queries}
    pairs = [(qtext[q], text[q, m], text[q, b.baseline]) for (q, m) in text if m != b.baseline
             and (q, b.baseline) in text]
    assert len(pairs) > 20_000 and judge.missing_pairs(*zip(*pairs)) == 0
    shipped = PairBank.load(judge.factored_dir / "bank-board.npz")
    assert shipped.version == judge.bank_version


def test_a_killed_read_keeps_what_it_read(tmp_path, judge, monkeypatch):
    import usl.judges.factored as mod

    monkeypatch.setattr(mod, "SAVE_EVERY", 1)
    real, calls = judge.crm.pair_vectors, []

    def dies_on_the_second(pairs, progress=None):
        calls.append(len(pairs))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(pairs, progress)

    judge.crm.pair_vectors = dies_on_the_second
    with pytest.raises(KeyboardInterrupt):
        judge.judge_matrix(CONCISE, [Q, Q], [SHORT, MID], [LONG, LONG])
    assert len(PairBank.load(judge.home_bank_path())) == 1

    again = load_judge("crm-factored", home=str(tmp_path), device="cpu")
    passes = _count_passes(again)
    again.judge_matrix(CONCISE, [Q, Q], [SHORT, MID], [LONG, LONG])
    assert sum(passes) == 2 + 2                               # the second pair only, and the contexts


def test_no_criteria_read_as_the_neutral_ones(judge):
    assert np.array_equal(judge.criteria_vector(()), judge.crm.criteria_vector(NEUTRAL, judge._contexts_list()))


def test_the_identity_follows_the_contexts_read(tmp_path):
    two = load_judge("crm-factored", home=str(tmp_path))
    one = load_judge("crm-factored", home=str(tmp_path), contexts=1)
    assert one.identity != two.identity and one.bank_version == two.bank_version


def test_a_head_extended_with_new_pairs_equals_one_built_afresh(crm, judge):
    judge.warm()                                               # the head exists before the pairs are read
    p = judge.judge_matrix(CONCISE, [Q, Q], [SHORT, MID], [LONG, LONG])
    head, bank = judge.head(), judge.bank()
    assert head.bank is bank and len(bank) == len(PairBank.load(judge.factored_dir / "bank-board.npz")) + 2
    fresh = FactoredHead(crm.scorer.model.head, judge.basis, bank)
    c = judge.criteria_vector(tuple(CONCISE.as_list()))
    rows = np.arange(len(bank))
    assert np.allclose(head.logits(c, rows), fresh.logits(c, rows), rtol=1e-5, atol=1e-5)   # BLAS blocks differ
    assert p.tolist() == pytest.approx((1 / (1 + np.exp(-fresh.logits(c, rows[-2:])))).tolist(), abs=1e-6)
