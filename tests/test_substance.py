"""Substance first: an answer that says nothing never wins, whatever the user's style wishes.

Known answers for the decision rule (usl.fast.substance.substance_first), tables for the non-answers
made from real data (usl.data.substance), and on real data: the shipped judge under twenty blind wishes
against cut, gibberish and fixed answers, and a board with two empty models that must rank last."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from usl.data import substance as data
from usl.fast.substance import fit_calibration, key, reading_ids, reading_text, substance_first
from usl.paths import shared_data

ROOT = Path(__file__).resolve().parents[1]
SHARED = shared_data()
needs_data = pytest.mark.skipif(SHARED is None, reason="no ../shared/data")


# ------------------------------------------------------------------------------------- the decision

def test_between_two_answers_that_answer_the_criteria_decide():
    g = np.linspace(-8, 8, 9)
    assert np.allclose(substance_first(g, np.full(9, 30.0), np.full(9, 30.0), 1.1, 0.8), g, atol=1e-6)


def test_an_answer_that_answers_beats_one_that_does_not_whatever_the_verdict():
    g = np.array([-60.0, -12.0, 0.0, 12.0, 60.0])          # the criteria's verdict for A, however strong
    assert (substance_first(g, np.full(5, -9.0), np.full(5, 6.0)) < 0).all()   # A says nothing: A loses
    assert (substance_first(-g, np.full(5, 6.0), np.full(5, -9.0)) > 0).all()


def test_the_rule_is_antisymmetric_and_finite_at_extremes():
    rng = np.random.default_rng(0)
    g, za, zb = rng.normal(0, 30, (3, 200))
    ab, ba = substance_first(g, za, zb, 1.3, 0.4), substance_first(-g, zb, za, 1.3, 0.4)
    assert np.isfinite(ab).all() and np.allclose(ab, -ba)


def test_when_neither_answers_the_criteria_decide_again():
    g = np.array([-3.0, 3.0])
    assert np.allclose(substance_first(g, np.full(2, -30.0), np.full(2, -30.0), 1.1, 0.8), g, atol=1e-6)
    assert substance_first(np.array(0.0), np.array(-3.0), np.array(-9.0)) > 0   # the one closer to answering


def test_the_calibration_is_learned_from_labels():
    """Planted: a weight of 2, readings twice as confident as they should be, shifted down by one."""
    rng = np.random.default_rng(1)
    n = 6000
    g = rng.normal(0, 4, n)
    za, zb = rng.normal(0, 4, (2, n))
    true = substance_first(g, za, zb, 2.0, 0.5, 1.0)
    y = rng.random(n) < 1 / (1 + np.exp(-true))
    weight, alpha, beta, loss = fit_calibration(g, za, zb, y, l2=0.0)
    # weight and alpha trade off where the log-sigmoid is linear; the decisions are what the data pins down
    assert weight > 1.0 and np.mean((substance_first(g, za, zb, weight, alpha, beta) > 0) == (true > 0)) > 0.97
    sign = np.where(y, 1, -1)
    assert loss <= np.mean(np.logaddexp(0, -sign * true)) + 0.005
    assert loss < np.mean(np.logaddexp(0, -sign * g)) - 0.05          # far better than the verdict alone


# ----------------------------------------------------------------------------------- the non-answers

ANSWER = ("Many famous actors started on Broadway. Hugh Jackman, Meryl Streep and Al Pacino each spent years on "
          "stage before film made them known, and several went back to the theatre at the height of their careers. "
          "Others, such as Sarah Jessica Parker, were child performers in musicals. Broadway trains the voice and "
          "the timing that film later rewards.")


@pytest.mark.parametrize("kind", data.KINDS + data.HELD_OUT_KINDS)
def test_each_kind_of_non_answer_is_made_and_differs_from_the_answer(kind):
    rng = np.random.default_rng(3)
    made = [data.non_answer(kind, "Which actors started on Broadway?", ANSWER, rng, ["Boil the pasta. Then drain it."])
            for _ in range(20)]
    made = [m for m in made if m is not None]
    assert made and all(m.strip() and m != ANSWER for m in made)


@pytest.mark.parametrize("kind", ["cut_chars", "cut_words"])
def test_a_cut_says_less_and_never_ends_where_a_sentence_ends(kind):
    rng = np.random.default_rng(4)
    for _ in range(50):
        cut = data.non_answer(kind, "q", ANSWER, rng, [ANSWER])
        if cut is not None:
            assert ANSWER.startswith(cut) and len(cut) * 3 <= len(ANSWER) and not cut.rstrip().endswith((".", "!", "?"))
    assert data.non_answer("cut_chars", "q", "Yes.", rng, [ANSWER]) is None   # too short to cut


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown non-answer kind 'blank'"):
        data.non_answer("blank", "q", ANSWER, np.random.default_rng(0), [ANSWER])


def test_examples_use_only_the_queries_they_are_given():
    answers = {"m1": {"q1": ANSWER, "q2": "Boil the pasta, then drain it well and add the sauce.", "q3": "Paris."},
               "m2": {"q1": ANSWER[:120] + ".", "q2": "Cook it for ten minutes.", "q3": "It is Paris."}}
    items = data.examples(answers, ["q1", "q2"], np.random.default_rng(0), negatives_per_answer=2)
    assert {i.query for i in items} == {"q1", "q2"}
    assert not any("Paris" in i.text for i in items)
    assert sum(i.answers for i in items) == 4 and sum(not i.answers for i in items) > 0


def test_both_answers_of_other_pairs_are_real_and_a_conversation_is_read_as_a_judge_reads_it():
    from usl.crm.formatting import judged_texts
    from usl.types import Message

    ctx = [Message("user", "How do I pick a lock?"), Message("assistant", "Whose lock is it?"),
           Message("user", "My neighbour's.")]
    read = [judged_texts("How do I pick a lock?", [*ctx, Message("assistant", a)], [*ctx, Message("assistant", b)])
            for a, b in (("I can't help you get into someone else's home.", "Use a tension wrench."),
                         ("I can't help you get into someone else's home.", "Ask them for a key."))]
    answers, queries = data.pair_answers(read)
    assert len(queries) == 1 and queries[0].startswith("User: How do I pick a lock?")   # the shared turns
    assert sorted(a[queries[0]] for a in answers.values()) == sorted(   # each distinct reply once
        ["I can't help you get into someone else's home.", "Use a tension wrench.", "Ask them for a key."])
    items = data.examples(answers, queries, np.random.default_rng(0), kinds=data.PAIR_KINDS, negatives_per_answer=4)
    assert sum(i.answers for i in items) == 3
    assert "refusal" not in data.PAIR_KINDS and not any(i.kind == "refusal" for i in items)


def test_the_reader_sees_the_head_and_the_tail_of_a_long_answer():
    from transformers import AutoTokenizer

    from usl.data.encoder import encoder_path

    tok = AutoTokenizer.from_pretrained(encoder_path())
    long_answer = "word " * 2000 + "and this is how it ends."
    ids = reading_ids(tok, "query", long_answer)
    assert len(ids) <= 64 + 160 + 32 + 3
    assert tok.decode(ids[-8:-1]).endswith("this is how it ends.")
    assert reading_text(reading_text(long_answer)) == reading_text(long_answer)
    assert key("q", "a") != key("q", "a ") and key("q", long_answer) == key("q", reading_text(long_answer))


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_the_reader_trains_on_an_encoder_or_a_decoder_and_reloads_the_same(tmp_path, arch):
    """The GPU recipe's code path on a tiny random backbone: an encoder reads the mean of its states, a decoder
    (SmolLM2's family, no CLS or SEP) the state of its last token; the judge's bank reloads the saved reader on
    the base its card names and reads the same logits."""
    from crm_fixtures import tiny_backbone

    from usl.fast.substance import SubstanceBank, SubstanceModel, train

    base = tiny_backbone(tmp_path / arch, arch=arch)
    model = SubstanceModel(base=str(base))
    assert model.decoder == (arch != "bert")
    ids = reading_ids(model.tok, "explain python list", "a short concise answer")
    assert ids[-1] == model.tok.eos_token_id          # the tiny tokenizer has no SEP: its EOS stands in
    items = [("explain python list", "a short concise answer", True), ("explain python list", "list list", False)] * 4
    history = train(model, items, items[:2], epochs=2, batch=4)
    assert history and all(np.isfinite(h["dev_log_loss"]) for h in history)
    model.save(tmp_path / "weights" / "substance", {"recipe": {"base": str(base)}})
    z = model.for_reading().logits(["explain python list"] * 2, ["a short concise answer", "list list"])
    bank = SubstanceBank(tmp_path / "weights" / "substance")     # the judge's way in: the card names the base
    assert np.allclose(bank.read(["explain python list"] * 2, ["a short concise answer", "list list"]), z, atol=1e-5)


def test_a_reader_with_a_quality_head_learns_pairs_and_serves_as_the_quality_reader(tmp_path):
    """Trained on preference pairs beside its items, the reader has a second head, r, whose difference is the
    logit of a pair; the ``substance:DIR`` judge reads it from the same bank as the substance term, one pass an
    answer for both, and stored readings are not read again."""
    from crm_fixtures import tiny_backbone

    from usl.fast.substance import SubstanceModel, pair_margins, train
    from usl.judges.base import JudgeRequest
    from usl.judges.registry import load_judge
    from usl.types import Criteria

    base = tiny_backbone(tmp_path / "llama", arch="llama")
    model = SubstanceModel(base=str(base), heads=2)
    items = [("explain python list", "a short concise answer", True), ("explain python list", "list list", False)] * 4
    pairs = [("name a fruit", "an apple is a fruit", "fruit fruit fruit", True),
             ("name a fruit", "zzz", "a banana, a sweet yellow fruit", False)] * 8
    with pytest.raises(ValueError, match="quality head"):
        train(SubstanceModel(base=str(base)), items, items[:2], pairs=pairs, epochs=1, batch=4)
    history = train(model, items, items[:2], pairs=pairs, dev_pairs=pairs[:2], epochs=3, batch=4, lr=3e-3)
    assert "dev_pair_accuracy" in history[-1]
    assert pair_margins(model, pairs[:2]).shape == (2,)
    folder = tmp_path / "reader"
    model.save(folder, {"recipe": {"base": str(base), "heads": 2}})
    judge = load_judge(f"substance:{folder}", home=str(tmp_path / "home"))
    q = judge.readings(["name a fruit"] * 2, ["an apple is a fruit", "zzz"], ["fruit fruit fruit", "an apple is a fruit"])
    r = model.for_reading().readings(["name a fruit"] * 3, ["an apple is a fruit", "zzz", "fruit fruit fruit"])[:, 1]
    assert np.allclose(q, [r[0] - r[2], r[1] - r[0]], atol=1e-4)
    assert judge.bank.values and not judge.bank.missing(["name a fruit"], ["zzz"])
    v = judge.judge([JudgeRequest(Criteria(("Anything",), ()), "name a fruit", "zzz", "an apple is a fruit")])
    assert v[0].p_a == pytest.approx(1 / (1 + np.exp(-q[1])), abs=1e-5)
    judge.bank._model = None                 # stored: answered without the model
    assert np.allclose(judge.readings(["name a fruit"], ["zzz"], ["an apple is a fruit"]), q[1:], atol=1e-6)
    model1 = SubstanceModel(base=str(base))
    model1.save(tmp_path / "one", {"recipe": {"base": str(base)}})
    with pytest.raises(ValueError, match="no quality head"):
        load_judge(f"substance:{tmp_path / 'one'}", home=str(tmp_path / "home"))
    grown = SubstanceModel(tmp_path / "one", base=str(base), heads=2, trainable=True)   # train on from a reader
    texts = (["name a fruit"] * 2, ["an apple is a fruit", "zzz"])
    assert np.allclose(grown.readings(*texts)[:, 0], model1.logits(*texts), atol=1e-5)
    assert np.allclose(grown.readings(*texts)[:, 1], 0.0)
    assert any(p.requires_grad for p in grown.encoder.parameters())


# ------------------------------------------------------------------------------ on real data, for real

@needs_data
def test_the_shipped_judge_prefers_real_answers_to_empty_ones_under_twenty_blind_wishes(tmp_path):
    """Concise real answers of board queries against the baseline's answer cut to a few characters, gibberish
    and a fixed string, each under every blind wish (configs/blind_wishes.json)."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from substance_check import check

    report = check("default", per_kind=8, home=str(tmp_path))
    assert report["judgments"] >= 20 * 8 * 10
    for kind in ("cut_chars", "gibberish", "keyboard", "fixed"):
        assert report["by_kind"][kind] >= 0.9, report
    assert report["real_wins"] >= 0.95, report


@needs_data
def test_replies_in_held_out_human_conversations_are_read_as_answers(tmp_path):
    """hh-rlhf replies of queries no training set holds (the eval split of `usl data build-train`), helpful and
    harmless, both the preferred and the other: a one-line reply, a question back, the refusal of a harmful
    request all answer. A reader trained on AlpacaEval's answers alone read 56% of them as answers, so substance
    first moved the judge's verdicts on these pairs at random (the human file's harmless pairs: 0.43)."""
    from usl.crm.formatting import judged_texts
    from usl.data.build_train import BuildConfig, split_of
    from usl.data.pairs import human
    from usl.fast.substance import SubstanceBank
    from usl.types import Message
    from usl.weights import shipped

    cfg = BuildConfig()
    pairs = [p for p in human.hh_harmless_pairs(SHARED / "human" / "hh_rlhf_harmless_base_test.jsonl.gz")
             if split_of(p.key, cfg.seed, cfg.dev_fraction, cfg.eval_fraction) == "eval"][:60]
    pairs += [p for p in human.dsp_human_pairs(SHARED / "human" / "hh_rlhf_helpful_base_test.dsp.json.gz",
                                               source="human/hh_helpful", family="general_helpful")
              if split_of(p.key, cfg.seed, cfg.dev_fraction, cfg.eval_fraction) == "eval"][:60]
    assert len(pairs) == 120
    read = [judged_texts(p.prompt, [*p.context, Message("assistant", p.winner)],
                         [*p.context, Message("assistant", p.loser)]) for p in pairs]
    queries, answers = [q for q, _, _ in read] * 2, [a for _, a, _ in read] + [b for _, _, b in read]
    z = SubstanceBank(shipped("fast-crm") / "substance", tmp_path).read(queries, answers)
    assert float(np.mean(z > 0)) >= 0.85, float(np.mean(z > 0))


BOARD_QUERIES = 60
JUNK = {"junk_cut": None, "junk_fixed": "Please refer to the documentation for more details."}


@pytest.fixture(scope="module")
def junk_board(tmp_path_factory):
    """The default benchmark's first board queries with every model's real answers, plus two models of ours:
    the baseline's answers cut to their first three words, and one fixed string for every query."""
    from usl.data.io import read_json

    src = SHARED / "alpaca_eval"
    split = read_json(src / "split.json")
    root = tmp_path_factory.mktemp("junk") / "alpaca_eval"
    (root / "outputs").mkdir(parents=True)
    base = read_json(src / "outputs" / f"{split['baseline']}.json.gz")
    board = [base[i]["instruction"] for i in split["board"][:BOARD_QUERIES]]
    keep = set(board)
    for model in [split["baseline"], *split["board_models"]]:
        rows = [r for r in read_json(src / "outputs" / f"{model}.json.gz") if r.get("instruction") in keep]
        (root / "outputs" / f"{model}.json").write_text(json.dumps(rows))
    by_q = {r["instruction"]: r["output"] for r in base}
    for name, fixed in JUNK.items():
        rows = [{"dataset": "junk", "instruction": q, "generator": name,
                 "output": fixed or " ".join(by_q[q].split()[:3])} for q in board]
        (root / "outputs" / f"{name}.json").write_text(json.dumps(rows))
    (root / "split.json").write_text(json.dumps({     # indices into the baseline's file: its rows kept above
        "baseline": split["baseline"], "board_models": [*split["board_models"], *JUNK], "style_models": [],
        "board": list(range(BOARD_QUERIES)), "train": []}))
    home = root.parent / "home"
    import usl

    from usl.cli import app
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["--home", str(home), "data", "import", "alpaca-eval", "--source", str(root)])
    assert r.exit_code == 0, r.output
    return usl.load(home=str(home), server=False)


@needs_data
def test_models_that_say_nothing_rank_last_under_every_blind_wish(junk_board):
    wishes = json.loads((ROOT / "configs" / "blind_wishes.json").read_text())
    sets = [[]] + [[w] for w in wishes["brevity"] + wishes["style"]]
    for likes in sets:
        avoid = [w.removeprefix("Avoid: ") for w in likes if w.startswith("Avoid: ")]
        likes = [w for w in likes if not w.startswith("Avoid: ")]
        board = junk_board.rank(likes, avoid=avoid, per_criterion=False, n_bootstrap=0)
        rows = sorted(board.rows, key=lambda r: r.win_rate)
        assert {r.model for r in rows[:2]} == set(JUNK), (likes, avoid, [(r.model, r.win_rate) for r in rows[:4]])


def test_readings_are_stored_once_and_kept_per_reader(tmp_path):
    """A new answer is read once and found by the next process; another reader's readings are not used."""
    import shutil

    from usl.fast.substance import SubstanceBank
    from usl.weights import shipped

    bank = SubstanceBank(shipped("fast-crm") / "substance", tmp_path)
    z = bank.read(["Which actors started on Broadway?"] * 2, [ANSWER, "Many famou"])
    assert z[0] > z[1]
    again = SubstanceBank(shipped("fast-crm") / "substance", tmp_path)
    assert not again.missing(["Which actors started on Broadway?"], ["Many famou"])
    other = tmp_path / "other"
    shutil.copytree(shipped("fast-crm") / "substance", other / "substance")
    (other / "substance" / "head.safetensors").write_bytes(b"another reader")
    assert SubstanceBank(other / "substance", tmp_path).missing(["Which actors started on Broadway?"], ["Many famou"])
