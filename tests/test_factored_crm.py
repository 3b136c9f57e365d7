"""``crm-factored``: the shipped transformer CRM split into stored answer vectors and a criteria
pass, loaded for real on the CPU (real weights, no download)."""

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
    head_logits,
    pair_key,
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


def test_the_head_on_stored_codes_is_the_span_head(crm, judge):
    """FactoredHead (criteria-independent part precomputed, basis, int8 codes) computes what the
    span head computes on the same vectors, up to the codes' rounding."""
    v = judge.crm.pair_vectors([(Q, SHORT, LONG), (Q, LONG, MID), (Q, MID, SHORT)])
    basis = Basis.fit(v, k=6)                          # 6 vectors: a full-rank basis of them
    bank = PairBank.build([pair_key(Q, SHORT, LONG), pair_key(Q, LONG, MID), pair_key(Q, MID, SHORT)],
                          [Q] * 3, v, basis, "x")
    c = judge.crm.criteria_vector(("Prefer concise answers",), [(Q, SHORT, LONG)])
    fast = FactoredHead(crm.scorer.model.head, basis, bank).logits(c, np.arange(3))
    exact = head_logits(crm.scorer.model.head, c, v)
    assert np.abs(fast - exact).max() < 0.05 * max(1.0, np.abs(exact).max())
    assert np.sign(fast).tolist() == np.sign(exact).tolist()


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
    assert [f.name for f in files] == [f"{judge.crm.version}.npz"] and len(PairBank.load(files[0])) == 1

    again = load_judge("crm-factored", home=str(tmp_path), device="cpu")
    passes = _count_passes(again)
    same = again.judge_matrix(c, [Q], [LONG], [SHORT])
    swapped = again.judge_matrix(c, [Q], [SHORT], [LONG])     # stored the other way round: no pass
    assert same == pytest.approx(first, abs=1e-6) and swapped == pytest.approx(1 - first, abs=1e-6)
    assert sum(passes) == 2                                   # the criteria's contexts only, read once


def test_a_bank_of_other_weights_is_ignored_with_a_warning(tmp_path, judge, caplog):
    v = judge.crm.pair_vectors([(Q, LONG, SHORT)])
    stale = PairBank.build([pair_key(Q, LONG, SHORT)], [Q], PairVectors(v.d_ab * 0, v.d_ba * 0, v.q, v.dl),
                           judge.basis, "other-weights")
    stale.save(tmp_path / "cache" / "factored" / f"{judge.crm.version}.npz")
    passes = _count_passes(judge)
    with caplog.at_level(logging.WARNING):
        p = judge.judge_matrix(CONCISE, [Q], [LONG], [SHORT])
    assert "other CRM weights" in caplog.text
    assert sum(passes) >= 4                                   # the pair read again (2) + contexts (2)
    assert p[0] < 0.5                                         # and judged for real: concise prefers SHORT


def test_a_broken_bank_file_is_named(tmp_path):
    bad = tmp_path / "bank.npz"
    bad.write_bytes(b"not a bank")
    with pytest.raises(ValueError, match=str(bad)):
        PairBank.load(bad)


def test_banks_merge_without_losing_either_side(judge):
    pairs = [(Q, SHORT, LONG), (Q, MID, LONG)]
    v = judge.crm.pair_vectors(pairs)
    one = PairBank.build([pair_key(*pairs[0])], [Q], PairVectors(v.d_ab[:1], v.d_ba[:1], v.q[:1], v.dl[:1]),
                         judge.basis, "x")
    two = PairBank.build([pair_key(*pairs[1])], [Q], PairVectors(v.d_ab[1:], v.d_ba[1:] * 3, v.q[1:], v.dl[1:]),
                         judge.basis, "x")
    both = one.merged(two)
    rows, sign = both.lookup([pair_key(*p) for p in pairs], [pair_key(q, b, a) for q, a, b in pairs])
    assert rows.tolist() == [0, 1] and sign.tolist() == [1, 1]
    assert np.array_equal(both.z_ba, np.concatenate([one.z_ba, two.z_ba]))     # nothing rounded again
    assert both.q.shape == (2, v.q.shape[1]) and both.dl.tolist() == pytest.approx(v.dl.tolist(), abs=1e-2)


def test_a_saved_bank_reloads_equal(tmp_path, judge):
    pairs = [(Q, SHORT, LONG), (Q, MID, LONG), ("Another question?", MID, SHORT)]
    bank = PairBank.build([pair_key(*p) for p in pairs], [p[0] for p in pairs], judge.crm.pair_vectors(pairs),
                          judge.basis, "x")
    bank.save(tmp_path / "b.npz")
    back = PairBank.load(tmp_path / "b.npz")
    for f in ("keys", "qvec", "qrow", "dl"):
        assert np.array_equal(getattr(back, f), getattr(bank, f)), f
    for f in ("z_ab", "z_ba"):                                # the same codes; the scale to the last bit
        assert np.allclose(getattr(back, f), getattr(bank, f), rtol=1e-6, atol=0), f
    assert back.version == "x" and len(back.qvec) == 2


def test_the_shipped_bank_covers_the_default_board():
    """The vectors shipped beside crm are keyed by the texts the importer reads: every answered
    (model, query) pair of the default board finds its vectors, so no pass is needed for it."""
    from usl import paths
    from usl.crm import shipped_weights
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
    d = shipped_weights("crm-minilm-span")
    bank = PairBank.load(d / "factored" / "bank-board.npz")
    rows, _ = bank.lookup([pair_key(*p) for p in pairs], [pair_key(q, y, x) for q, x, y in pairs])
    assert len(pairs) > 20_000 and (rows >= 0).all()
    assert bank.version == weights_version(d)


def test_no_criteria_read_as_the_neutral_ones(judge):
    assert np.array_equal(judge.criteria_vector(()), judge.crm.criteria_vector(NEUTRAL, judge._contexts_list()))
