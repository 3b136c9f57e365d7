"""The quality reading: its stored bank, its gate, its data, and the shipped reader in the default judge."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from usl.crm.factored import pair_key
from usl.quality.bank import QualityBank, fill
from usl.quality.gate import GateSample, QualityGate, cross_fit, decide, fit

QS, AS, BS = ["q1", "q2", "q3"], ["a1", "a2", "a3"], ["b1", "b2", "b3"]


def test_bank_is_antisymmetric_and_round_trips(tmp_path):
    bank = QualityBank.empty("reader@1")
    bank.add([pair_key("q1", "a1", "b1"), pair_key("q2", "b2", "a2")], np.array([1.5, -0.25]))
    got = bank.lookup(QS, AS, BS)
    assert got[0] == pytest.approx(1.5) and got[1] == pytest.approx(0.25) and np.isnan(got[2])
    bank.save(tmp_path / "b.npz")
    again = QualityBank.load(tmp_path / "b.npz")
    assert again.reader == "reader@1"
    np.testing.assert_allclose(again.lookup(QS, AS, BS), got)
    with pytest.raises(ValueError, match="cannot merge readings of other@2"):
        bank.merged(QualityBank.empty("other@2"))


def test_a_torn_bank_file_is_named(tmp_path):
    path = tmp_path / "torn.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="torn.npz: not a quality bank"):
        QualityBank.load(path)


def test_fill_reads_each_pair_once_and_resumes_after_a_crash(tmp_path):
    queries = [f"q{i}" for i in range(10)]
    answers = [f"a{i}" for i in range(10)]
    baselines = [f"b{i}" for i in range(10)]
    read: list[str] = []

    def reader(q, a, b):
        if len(read) >= 4:
            raise RuntimeError("killed")
        read.extend(q)
        return np.array([float(x[1:]) for x in q])

    path = tmp_path / "home.npz"
    with pytest.raises(RuntimeError, match="killed"):
        fill(QualityBank.empty("r"), reader, queries, answers, baselines, path=path, batch=2, save_every=2)
    saved = QualityBank.load(path)
    assert len(saved) == 4                    # two batches were stored before the crash

    read.clear()
    done = fill(saved, lambda q, a, b: (read.extend(q), np.array([float(x[1:]) for x in q]))[1],
                queries + queries[:3], answers + answers[:3], baselines + baselines[:3], path=path, batch=3)
    assert read == queries[4:]                # only what was missing, each pair once
    np.testing.assert_allclose(done, [float(i) for i in range(10)] + [0.0, 1.0, 2.0])
    assert len(QualityBank.load(path)) == 10


def test_fill_stops_when_progress_raises_and_keeps_what_it_read(tmp_path):
    """How a leaderboard job nobody waits for stops reading: its progress callback raises."""
    queries, answers, baselines = ([f"{c}{i}" for i in range(10)] for c in "qab")
    read: list[str] = []
    calls: list[tuple[int, int]] = []

    def stop_after_first_batch(done, total):
        calls.append((done, total))
        if done > 0:
            raise KeyboardInterrupt("nobody waits")

    path = tmp_path / "home.npz"
    with pytest.raises(KeyboardInterrupt):
        fill(QualityBank.empty("r"), lambda q, a, b: (read.extend(q), np.zeros(len(q)))[1], queries, answers,
             baselines, path=path, batch=3, progress=stop_after_first_batch)
    assert calls == [(0, 10), (3, 10)] and read == queries[:3]
    assert len(QualityBank.load(path)) == 3       # saved though under save_every: the next fill reads the rest

    calls.clear()
    with pytest.raises(KeyboardInterrupt):        # a job already stopped reads nothing
        fill(QualityBank.load(path), lambda q, a, b: (read.extend(q), np.zeros(len(q)))[1], queries, answers,
             baselines, path=path, batch=3, progress=lambda d, t: stop_after_first_batch(d + 1, t))
    assert calls == [(1, 7)] and read == queries[:3]


def _planted(n: int, seed: int) -> tuple[list[GateSample], np.ndarray]:
    """Criteria of kind 'quality' (1) whose label follows Q, of kind 'style' (0) whose label follows the
    fast reading; half the wordings are 'Avoid:' ones, which never ask for quality."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 2, n)
    sign = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    fast, q = rng.normal(0, 2, n), rng.normal(0, 2, n)
    truth = np.where((kind == 1) & (sign > 0), q, fast)
    y = truth + rng.logistic(size=n) * 0.5 > 0
    samples = [GateSample(np.eye(2)[[k]] * 0.9 + 0.05, np.array([s]), f, qq, bool(t), "f.jsonl",
                          (f"wording {i % 40}",), "fam") for i, (k, s, f, qq, t) in enumerate(zip(kind, sign, fast, q, y))]
    return samples, kind * (sign > 0)


def test_gate_learns_which_criteria_ask_for_quality():
    """Planted: the fitted gate gives quality likes the larger share, 'Avoid:' wishes none, and beats both
    readings alone; the cross-fitted figure (other half of the wordings) says the same."""
    samples, asks = _planted(1600, 0)
    u, v, _ = fit(samples, l2=1e-4)
    gate = QualityGate(("style", "quality"), tuple(u), tuple(v), (1.6, 1.6), "quality", "quality@x", {})
    share = np.array([gate.shares(s.kind_probs, s.signs)[0] for s in samples])
    assert share[asks == 1].mean() > 0.7 > 0.3 > share[asks == 0].mean()
    acc = lambda xs: float(np.mean([(x > 0) == s.a_wins for x, s in zip(xs, samples)]))  # noqa: E731
    comb = [decide(np.array(u), np.array(v), s) for s in samples]
    assert acc(comb) > max(acc([s.fast for s in samples]), acc([s.q for s in samples])) + 0.07
    files, families = cross_fit(samples, l2=1e-4)
    assert files["f.jsonl"]["n"] == 1600 and files["f.jsonl"]["gate"] > files["f.jsonl"]["fast"] + 0.07
    assert families["fam"]["gate"] == files["f.jsonl"]["gate"]


def test_gate_file_round_trips_and_bad_ones_are_named(tmp_path):
    gate = QualityGate(("style", "quality"), (0.5, -1.0, 2.0, 0.1), (0.1, 0.8, 0.0, -1.0), (2.0, 1.0),
                       "quality", "quality@abc", {"samples": 3})
    gate.save(tmp_path)
    assert QualityGate.load(tmp_path) == gate and gate.kinds_from == "kind_model"   # a file before kinds_from
    read_kinds = dataclasses.replace(gate, kinds_from="criteria_reader")
    read_kinds.save(tmp_path)
    assert QualityGate.load(tmp_path) == read_kinds
    (tmp_path / "quality_gate.json").write_text(json.dumps({"w": [1.0]}))
    with pytest.raises(ValueError, match="quality_gate.json: not a quality gate"):
        QualityGate.load(tmp_path)
    (tmp_path / "quality_gate.json").write_text(json.dumps({**json.loads(json.dumps(gate.__dict__)), "u": [1.0]}))
    with pytest.raises(ValueError, match="weights do not match its 2 kinds"):
        QualityGate.load(tmp_path)
    assert QualityGate.load(tmp_path / "nothing") is None


def test_shipped_default_judge_weighs_the_shipped_reader():
    """The gate names the shipped reader by identity (a retrained reader needs a refitted gate): the substance
    reader's quality head, reading from the judge's own bank of readings (one pass an answer for both terms);
    its per-criterion rows plus the answer term sum to the decision, quality share included."""
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    judge = load_judge("default")
    assert judge.quality is not None
    assert judge.quality.gate.reader_identity == load_judge("substance").identity
    assert judge.quality.reader.bank is judge.substance
    crit = Criteria(("The answer is helpful, accurate and well written.", "Be concise"), ())
    q, a, b = ["What is 2 + 2?"], ["4."], ["The answer is 4, since two and two make four."]
    judge.quality.bank.add([pair_key(q[0], a[0], b[0])], np.array([3.0]))   # a stored reading: no model run
    _, per, qual = judge.criterion_matrix(crit, q, a, b)
    p = judge.judge_matrix(crit, q, a, b)
    assert 1 / (1 + np.exp(-(per.sum() + qual.sum()))) == pytest.approx(p[0])
    shares = judge.quality_share(crit)
    assert all(0 < s < 1 for s in shares) and shares[0] > shares[1]     # quality asks more of Q than concision
    # the same answer but for a trailing space, its reading stored the other way round: the judge follows it
    judge.quality.bank.add([pair_key(q[0], b[0], a[0] + " ")], np.array([3.0]))
    logit = lambda x: np.log(x) - np.log1p(-x)
    assert logit(judge.judge_matrix(crit, q, [a[0] + " "], b)[0]) < logit(p[0]) - 0.5


def test_the_gate_weighs_the_kinds_the_page_shows_and_refuses_kinds_read_another_way(tmp_path):
    """One reading of kinds: the kinds the gate weighs are the criteria reader's, as the page shows them; the
    same weights with a gate fitted on the kind classifier's kinds are refused, naming the refit."""
    import os
    import shutil

    from usl.judges.fast import FastJudge
    from usl.judges.registry import load_judge
    from usl.quality.gate import GATE_FILE
    from usl.types import Criteria

    judge = load_judge("default")
    crit = ["Get to the point", "Uses examples", "Avoid: Jargon", "The code is correct."]
    assert judge.kinds_from == "criteria_reader" and judge.quality.gate.kinds_from == "criteria_reader"
    kinds, _ = judge._kinds_and_signs(crit)
    assert np.allclose(kinds, judge.reader.probabilities(crit)[0])
    shown = [r.kind for r in judge.criteria_reading(Criteria(tuple(crit[:2]) + (crit[3],), ("Jargon",)))]
    assert shown == [judge.kinds.kinds[int(i)] for i in kinds[[0, 1, 3, 2]].argmax(1)]

    weights = tmp_path / "fast-crm"
    shutil.copytree(judge.weights, weights, copy_function=os.symlink)
    (weights / GATE_FILE).unlink()
    dataclasses.replace(judge.quality.gate, kinds_from="kind_model").save(weights)
    with pytest.raises(ValueError, match="fitted on kinds read by the kind model.*refit the gate with usl quality fit-gate"):
        FastJudge(weights, home=str(tmp_path / "home"))


def test_readings_another_process_stored_are_taken_and_kept(tmp_path):
    """A running server and ``usl data add-model`` share a data directory: the server takes the pairs
    the other process read instead of reading them again, and its own saves keep them."""
    from usl.judges.fast import quality_reading
    from usl.weights import shipped

    server = quality_reading(shipped("fast-crm"), tmp_path)
    other = quality_reading(shipped("fast-crm"), tmp_path)
    assert server.missing(["q1"], ["a1"], ["b1"]) == 1

    fill(other.bank, lambda *_: np.array([2.5]), ["q1"], ["a1"], ["b1"], path=other._path)
    fill(server.bank, lambda *_: np.array([-1.0]), ["q2"], ["a2"], ["b2"], path=server._path)
    stored = QualityBank.load(server._path)
    np.testing.assert_allclose(stored.lookup(["q1", "q2"], ["a1", "a2"], ["b1", "b2"]), [2.5, -1.0])

    fill(other.bank, lambda *_: np.array([0.5]), ["q3"], ["a3"], ["b3"], path=other._path)
    server._reader = object()                 # reading a pair with the model would fail here
    assert server.missing(["q3"], ["a3"], ["b3"]) == 0
    np.testing.assert_allclose(server.readings(["q1", "q3"], ["a1", "a3"], ["b1", "b3"]), [2.5, 0.5])


def test_the_length_control_is_the_slope_of_the_readings_on_length():
    """Planted: r rises by 0.6 a unit of log length plus noise; the fit finds the slope, and a reading with no
    tie to length gets a slope near 0 and a small r2."""
    from usl.judges.substance import fit_length_correction

    rng = np.random.default_rng(0)
    ws = rng.integers(20, 80, 500)
    wl = np.round(ws * rng.uniform(1.3, 6.0, 500)).astype(int)
    texts = lambda counts: [" ".join(["word"] * int(n)) for n in counts]   # noqa: E731
    short, long = texts(ws), texts(wl)
    rs = rng.normal(0, 1, 500)
    rl = rs + 0.6 * np.log(wl / ws) + rng.normal(0, 0.3, 500)
    got = fit_length_correction(rs, rl, short, long)
    assert got["slope"] == pytest.approx(0.6, abs=0.05) and got["r2"] > 0.5 and got["pairs"] == 500
    flat = fit_length_correction(rs, rs + rng.normal(0, 1, 500), short, long)
    assert abs(flat["slope"]) < 0.15 and flat["r2"] < 0.05
    with pytest.raises(ValueError, match="too few pairs"):
        fit_length_correction(rs[:3], rl[:3], short[:3], short[:3])


def test_the_quality_reading_takes_length_out_as_fitted_and_names_it(tmp_path):
    """With ``length_correction.json`` beside the reader, Q(A, B) is r(A) - r(B) less lambda times the log length
    ratio, and the reader's identity says so (stored readings of the plain reading are not taken for it); a
    torn file is named."""
    import shutil

    from usl.fast.substance import key
    from usl.judges.substance import LENGTH_FILE, SubstanceQuality
    from usl.weights import shipped

    src = shipped("fast-crm") / "substance"
    folder = tmp_path / "reader"
    folder.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors", "head.safetensors", "card.json"):
        shutil.copy(src / name, folder / name)
    q, a, b = "Name a colour.", "Red.", "Red is a colour, the colour of blood and of ripe strawberries."
    plain = SubstanceQuality(folder, home=str(tmp_path / "home"))
    plain.bank.values.update({key(q, a): (5.0, 1.0), key(q, b): (5.0, 2.0)})   # stored readings: no model run
    assert plain.readings([q], [a], [b])[0] == pytest.approx(-1.0)
    (folder / LENGTH_FILE).write_text(json.dumps({"slope": 0.5}))
    controlled = SubstanceQuality(folder, home=str(tmp_path / "home"))
    assert controlled.identity != plain.identity and controlled.identity.startswith(plain.identity)
    ratio = np.log(len(a.split()) / len(b.split()))
    assert controlled.readings([q], [a], [b])[0] == pytest.approx(-1.0 - 0.5 * ratio, abs=1e-5)
    assert controlled.readings([q], [b], [a])[0] == pytest.approx(1.0 + 0.5 * ratio, abs=1e-5)
    (folder / LENGTH_FILE).write_text("{")
    with pytest.raises(ValueError, match="length_correction.json: not a length correction"):
        SubstanceQuality(folder, home=str(tmp_path / "home"))
