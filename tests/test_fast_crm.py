"""The fast CRM: style features, criteria keywords, the antisymmetric scorer, training and the
shipped default judge (real all-MiniLM-L6-v2 from the installed package, no network)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_features
from usl.fast.criteria_lexicon import split_sign
from usl.fast.model import FastCRM, FastCRMConfig
from usl.fast.features import FEATURES, features_one
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.judges.base import JudgeRequest
from usl.types import Criteria

SHORT = "Paris."
LONG = ("The capital of France is Paris. It has been the capital for centuries, it is the largest city "
        "in the country, and it is home to the national government, the Louvre and the Eiffel Tower. "
        "Paris sits on the Seine in the north of the country.")


def feat(text: str, name: str) -> float:
    return features_one(text)[FEATURES.index(name)]


def test_style_features_known_values():
    text = "Intro line\n- one\n- two\n1. three\n\n**bold** here?"
    assert feat(text, "log_words") == pytest.approx(np.log1p(8))
    assert feat(text, "bullet_frac") == pytest.approx(2 / 5)
    assert feat(text, "numbered_frac") == pytest.approx(1 / 5)
    assert feat(text, "log_bold") == pytest.approx(np.log1p(1))
    assert feat("I'm sorry, but I cannot help with that.", "refusal") == 1.0
    assert feat("Sure, here it is.", "refusal") == 0.0


@pytest.mark.parametrize("text, axis, sign", [
    ("keep it short", "short", 1),
    ("I prefer detailed answers.", "long", 1),
    ("I get annoyed by overly long responses.", "long", -1),
    ("Please answer briefly; I don't need all the background.", "short", 1),
    ("Please answer briefly; I don't need all the background.", "long", -1),
    ("Go deep, not short.", "short", -1),
    ("Use vivid imagery.", "literary", 1),
    ("I belong here", "long", 0),          # "long" inside "belong" is not a hit
    ("No jargon", "academic", -1),         # jargon is specialist language: turning it down is no dislike of plain
    ("No jargon", "plain", 1),
    ("Explain it without jargon.", "academic", -1),
    ("Jargon-free explanations", "plain", 1),
    ("Jargon-free explanations", "academic", 0),
    ("Feel free to use jargon.", "academic", 1),
    ("Keep jargon to a minimum", "plain", 1),
    ("Keep jargon to a minimum", "academic", 0),
    ("Minimal jargon", "plain", 1),
    ("Jargon should be avoided", "plain", 1),
    ("Steer clear of technical jargon", "academic", 0),
    ("Steer clear of technical jargon", "plain", 1),
    ("Defines any jargon it uses", "plain", 1),
])
def test_lexicon_signs_follow_negation_scope(text, axis, sign):
    value = lexicon_features(text)[LEXICON_AXES.index(axis)]
    assert np.sign(value) == sign


@pytest.mark.parametrize("text", ["Avoid: unethical suggestions", "Don't encourage harmful behaviour.",
                                  "Avoid: false or misleading claims", "No toxicity.", "Avoid: made-up facts",
                                  "Never assist with violence, crime or abuse."])
def test_a_dislike_of_faults_is_read_whole_as_a_wish_for_the_virtue(text):
    assert split_sign(text) == (text, 1.0)
    safe, helpful = (lexicon_features(text)[LEXICON_AXES.index(a)] for a in ("safe", "helpful"))
    assert max(safe, helpful) > 0 and min(safe, helpful) >= 0


def test_faults_do_not_touch_style_dislikes_or_virtue_words():
    assert split_sign("Avoid: long, error-prone answers") == ("long, error-prone answers", -1.0)
    assert split_sign("Avoid: jargon") == ("jargon", -1.0)
    assert lexicon_features("harmless")[LEXICON_AXES.index("safe")] > 0
    assert lexicon_features("No safety lectures")[LEXICON_AXES.index("safe")] < 0  # a virtue can be disliked
    assert lexicon_features("wrongly placed")[LEXICON_AXES.index("helpful")] == 0  # whole words only


@pytest.mark.parametrize("text", ["No particular register, please.", "No special tone.", "Without any special framing.",
                                  "Avoid: any particular style", "No specific voice, just answer."])
def test_asking_for_no_particular_style_is_a_wish_for_the_ordinary_one(text):
    # not "Avoid: <a register>": read whole, as a like, for the domain reader to read as plain
    assert split_sign(text) == (text, 1.0)


def test_no_particular_style_leaves_other_dislikes_alone():
    assert split_sign("No particular order.") == ("particular order", -1.0)
    assert split_sign("No special formatting.") == ("special formatting", -1.0)
    assert split_sign("Avoid: a formal tone") == ("a formal tone", -1.0)


def test_split_sign_keeps_a_dislike_followed_by_a_wish_whole():
    # "Skip X and keep it brief" is read by the keyword scope, not as "Avoid: X and keep it brief"
    assert split_sign("Skip the intro and keep it brief.")[1] == 1.0
    assert split_sign("Skip the intro and the outro.") == ("the intro and the outro", -1.0)


def test_split_sign():
    assert split_sign("Avoid: jargon") == ("jargon", -1.0)
    # a criterion that only negates is read as a dislike of the rest
    assert split_sign("avoid jargon") == ("jargon", -1.0)
    assert split_sign("No walls of text.") == ("walls of text", -1.0)
    assert split_sign("I can't stand long-winded replies.") == ("long-winded replies", -1.0)
    assert split_sign("Please don't over-explain.") == ("over-explain", -1.0)
    # dislike openers, and intensifiers dropped from what is disliked
    assert split_sign("I get annoyed by overly long responses.") == ("long responses", -1.0)
    assert split_sign("Avoid: overly long answers") == ("long answers", -1.0)
    assert split_sign("I'm tired of walls of text") == ("walls of text", -1.0)
    # double negations and nested negations stay likes, for the keyword scope to read
    for like in ("Don't hold back on detail.", "Don't leave out any details.", "Not too long please",
                 "No need to be brief", "Don't skimp on the details.", "I prefer short answers",
                 "No more than three bullet points", "Never mind the length; be accurate"):
        assert split_sign(like) == (like, 1.0)


@pytest.mark.parametrize("text,axis,sign", [
    ("Don't skimp on the details.", "long", 1), ("I never mind a long answer.", "long", 1),
    ("Cut to the chase.", "short", 1), ("I hate rambling", "long", -1), ("Spell everything out.", "long", 1),
])
def test_lexicon_idioms(text, axis, sign):
    assert np.sign(lexicon_features(text)[LEXICON_AXES.index(axis)]) == sign


@pytest.mark.parametrize("text,short,long", [
    # contrasts: what is turned down is read as a dislike
    ("Summaries over essays", 1, -1), ("Essays over summaries", -1, 1),
    ("Give me the gist rather than the full story.", 1, -1),
    ("I prefer a quick reply to a thorough one.", 1, -1), ("I prefer a thorough reply to a quick one.", -1, 1),
    ("I'd rather have a short answer than a long one.", 1, -1),
    ("Thorough coverage beats brevity for me.", -1, 1),
    # stated amounts
    ("Keep it under 50 words.", 1, 0), ("A single paragraph at most.", 1, 0),
    ("No more than three sentences, please.", 1, 0), ("Write at least five paragraphs.", 0, 1),
    ("Several paragraphs at least.", 0, 1), ("Don't under-explain.", -1, 0),
    ("Two or three sentences will do.", 1, 0), ("A couple of pages is fine.", 0, 1),
    ("Reply in 40 words.", 1, 0), ("Reply in 400 words.", 0, 1),
    # a predicate after the subject dislikes it; hyphenated words read as apart
    ("Wordy replies are a waste of my time.", 0, -1), ("One-line answers frustrate me.", -1, 0),
    ("Brevity is not a virtue here.", -1, 0), ("Long answers are fine, short ones annoy me.", -1, 1),
    ("Err on the side of too long.", 0, 1),
])
def test_lexicon_contrasts_and_amounts(text, short, long):
    f = lexicon_features(text)
    assert (np.sign(f[LEXICON_AXES.index("short")]), np.sign(f[LEXICON_AXES.index("long")])) == (short, long)


@pytest.mark.parametrize("text,short,long", [
    # a clause's subject judged by a negative predicate (VADER polarity, not a list of ours)
    ("Lengthy write-ups bore me to tears.", 0, -1), ("Terse replies never answer my follow-ups.", -1, 0),
    ("Detailed explanations don't bother me at all.", 0, 1), ("I find brief replies unhelpful.", -1, 0),
    # chained negation: a negated negator likes
    ("I don't like answers that don't go in depth.", 0, 1), ("Never give me answers that aren't brief.", 1, 0),
    ("I don't want replies that are too long.", 0, -1),  # an excess word dislikes whatever negates it
    # "when"/"if" clauses judged by their main clause, and the negations inside them
    ("When a reply drags on at length, I get bored.", 0, -1), ("I hate it when replies are short.", -1, 0),
    ("It drives me mad when replies aren't detailed.", 0, 1),
    ("If it can be said in two lines, don't use twenty.", 1, 0),  # a directive is no judgement of the "if"
    # rhetorical questions and rejected fragments complain
    ("Why are these replies always so verbose?", 0, -1), ("Summaries? Ugh, no.", -1, 0),
    # comparatives and preferences over
    ("Compact replies are more useful to me than exhaustive ones.", 1, -1),
    ("I'd pick an elaborate reply over a terse one.", -1, 1),
    # a wish after a comma is no part of the dislike before it
    ("I don't need the background, just the gist.", 1, -1), ("Please don't condense, elaborate.", -1, 1),
    # amounts in words and reading time
    ("A three-word reply is ideal.", 1, 0), ("Spend a few hundred words on it.", 0, 1),
    ("It should take under 20 seconds to read.", 1, 0),
    # what an answer can do without, and agents as subjects
    ("Just give me the verdict, nothing else.", 1, 0), ("A whole paragraph is too much for me.", 0, -1),
    ("Do not walk me through every step.", 0, -1), ("Assistants that pad their replies lose me.", 0, -1),
    ("Skimming over the tricky parts is not okay.", -1, 0),
])
def test_lexicon_reads_judgements_of_length(text, short, long):
    f = lexicon_features(text)
    assert (np.sign(f[LEXICON_AXES.index("short")]), np.sign(f[LEXICON_AXES.index("long")])) == (short, long)


@pytest.mark.parametrize("text,axis,sign", [
    # found by review: ordinary criteria the judgement rules must leave alone
    ("No emojis and no bullet points.", "structure", -1), ("No jokes and no emojis please.", "fun", -1),
    ("Detailed answers prevent confusion.", "long", 1), ("Short replies avoid confusion.", "short", 1),
    ("Examples that aren't boring.", "examples", 1), ("When writing code, avoid global variables.", "code", 1),
    ("If the question is ambiguous, ask a clarifying question.", "question", 1),
    ("Avoid jargon when explaining, and give examples.", "examples", 1),
    ("I'm often tired, so if possible keep it short.", "short", 1),
    ("Is the answer detailed? Otherwise it fails.", "long", 1), ("Jokes? Absolutely not.", "fun", -1),
    ("Keep it short and stop with the emojis.", "fun", -1), ("Give more than one example.", "examples", 1),
    ("Why is a concise answer better? Because it saves time.", "short", 1),
    ("I prefer short passages over long essays.", "long", -1), ("Lengthy write-ups bore me to tears.", "long", -1),
])
def test_lexicon_leaves_ordinary_criteria_alone(text, axis, sign):
    t, s = split_sign(text)
    assert np.sign(s * lexicon_features(t)[LEXICON_AXES.index(axis)]) == sign


def test_polarity_reads_phrases_it_has_no_entry_for():
    from usl.fast.text_polarity import polarity
    assert polarity("tire me out") < 0 and polarity("are unhelpful") < 0 and polarity("no thanks") < 0
    assert polarity("are perfect") > 0 and polarity("as much as possible") == 0  # "as" is no "ass"


@pytest.mark.parametrize("text", [
    "I prefer answers that stick to the task as specified.",   # "prefer X to Y" needs a noun phrase Y
    "Answers should read like a memo to a manager.",
    "Acknowledge the question before diving in.",
    "Go over the steps one by one.",
])
def test_lexicon_reads_no_contrast_where_there_is_none(text):
    assert lexicon_features(text)[LEXICON_AXES.index("negation")] == 0.0


def test_pair_logits_antisymmetric_and_sum_of_criteria():
    torch.manual_seed(0)
    model = FastCRM(FastCRMConfig(hidden=16)).eval()
    n, d, F = 5, 384, len(FEATURES)
    A = model.answer_repr(torch.nn.functional.normalize(torch.randn(n, d), dim=-1), torch.randn(n, F),
                          torch.rand(n))
    C = model.criteria_repr(torch.cat([torch.nn.functional.normalize(torch.randn(2, d), dim=-1),
                                       torch.zeros(2, len(LEXICON_AXES))], -1))
    a, b = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 0])
    crit = torch.tensor([0, 1, 0, 1, 0])
    pair = torch.tensor([0, 0, 1, 1, 2])
    sign = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0])
    ab = model.pair_logits(C, A, a, b, crit, sign, pair, 3)
    ba = model.pair_logits(C, A, b, a, crit, sign, pair, 3)
    torch.testing.assert_close(ab, -ba)
    S = model.criterion_scores(C, A)
    by_hand = 0.5 * ((S[0, 0] - S[0, 3]) - (S[1, 0] - S[1, 3])) + model.beta * (A.quality[0] - A.quality[3])
    torch.testing.assert_close(ab[0], by_hand)


def test_the_length_boost_scales_only_the_length_prior_when_judging_and_training(tmp_path):
    torch.manual_seed(0)
    model = FastCRM(FastCRMConfig(hidden=16, lexicon_fingerprint=lexicon_fingerprint())).eval()
    n, d, F = 4, 384, len(FEATURES)
    A = model.answer_repr(torch.nn.functional.normalize(torch.randn(n, d), dim=-1), torch.randn(n, F),
                          torch.rand(n))
    lex = torch.zeros(2, len(LEXICON_AXES))
    lex[0, LEXICON_AXES.index("short")] = 1.0  # the first criterion asks for shorter answers, the second not
    C = model.criteria_repr(torch.cat([torch.nn.functional.normalize(torch.randn(2, d), dim=-1), lex], -1))
    assert C.length.tolist() == [-1.0, 0.0]
    a, b = torch.tensor([0, 1]), torch.tensor([2, 3])
    crit, pair, sign = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.ones(2)
    S1, L1 = model.criterion_scores(C, A), model.pair_logits(C, A, a, b, crit, sign, pair, 2)
    model.cfg.length_boost = 3.0
    S3, L3 = model.criterion_scores(C, A), model.pair_logits(C, A, a, b, crit, sign, pair, 2)
    prior = torch.nn.functional.softplus(model.gamma) * -A.f[:, FEATURES.index("log_words")]
    torch.testing.assert_close(S3[0] - S1[0], 2 * prior)  # the length wish's prior, three times over
    torch.testing.assert_close(S3[1], S1[1])  # a criterion that asks nothing of length: unchanged
    torch.testing.assert_close(L3 - L1, torch.stack([2 * (prior[0] - prior[2]), torch.tensor(0.0)]))
    model.save(tmp_path / "m")
    assert FastCRM.load(tmp_path / "m").cfg.length_boost == 3.0


def test_the_length_boost_tuning_keeps_the_smallest_best_factor_that_costs_no_kind_of_guard_pair():
    from usl.evaluation import length_boost as mod

    g = lambda human, style: {"all": (human + style) / 2, "human": human, "style": style}  # noqa: E731
    rows = {1.0: (0.90, g(0.60, 0.80)), 2.0: (0.95, g(0.60, 0.80)), 4.0: (0.97, g(0.59, 0.81)),
            8.0: (0.99, g(0.55, 0.85)), 12.0: (0.99, g(0.60, 0.80))}
    assert mod.choose(rows, tolerance=0.005) == 12.0  # 4 and 8 cost human pairs; 12 ties 8 and costs none
    rows[12.0] = (0.96, g(0.60, 0.80))
    assert mod.choose(rows, tolerance=0.005) == 12.0
    assert mod.choose(rows, tolerance=0.02) == 4.0  # within this tolerance 4 is allowed, 8 still not
    rows[2.0] = rows[12.0] = (0.90, g(0.60, 0.80))
    assert mod.choose(rows, tolerance=0.005) == 1.0  # the smallest of the best


def _pairs(n: int) -> list[dict]:
    out = []
    for i in range(n):
        concise = i % 2 == 0
        short, long = f"{SHORT} ({i})", f"{LONG} ({i})"
        a, b = (short, long) if i % 4 < 2 else (long, short)
        wins_a = (a == short) == concise
        q = f"What is the capital of France? #{i}"
        out.append({"idx": str(i), "prompt": q,
                    "model_a": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
                    "model_b": [{"role": "user", "content": q}, {"role": "assistant", "content": b}],
                    "criteria": ["Keep it short." if concise else "Give me all the details."],
                    "preference": "model_a" if wins_a else "model_b", "source": "length/toy"})
    return out


def test_train_fast_learns_and_round_trips(tmp_path, home):
    from pathlib import Path

    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text("".join(json.dumps(p) + "\n" for p in _pairs(64)))
    dev.write_text("".join(json.dumps(p) + "\n" for p in _pairs(16)))
    out = tmp_path / "model"
    report = train_fast(FastTrainConfig(train=[str(train)], dev=[str(dev)], out=str(out), epochs=6,
                                        batch_size=16, lr=5e-3, hidden=16, patience=6),
                        Path(home) / "cache")
    losses = [e["train_loss"] for e in report["curve"]]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert report["best_dev_accuracy"] >= 0.9
    extra = json.loads((out / "config.json").read_text())["extra"]   # what made the weights
    assert extra["recipe"]["epochs"] == 6 and extra["recipe"]["hidden"] == 16
    assert extra["data_sha256"][str(train)] == hashlib.sha256(train.read_bytes()).hexdigest()
    assert set(extra["versions"]) >= {"torch", "numpy"} and "git_commit" in extra
    assert extra["lexicon_fingerprint"] == lexicon_fingerprint()
    judge = FastJudge(out, home=home)  # saved, loaded back, judging through the public protocol
    pairs = _pairs(16)
    reqs = [JudgeRequest(Criteria(tuple(p["criteria"])), p["prompt"], p["model_a"][1]["content"],
                         p["model_b"][1]["content"]) for p in pairs]
    agree = [(v.p_a > 0.5) == (p["preference"] == "model_a") for v, p in zip(judge.judge(reqs), pairs)]
    assert np.mean(agree) == pytest.approx(report["best_dev_accuracy"])
    # the version names the weights, not their documentation: a model card edit keeps stored judgments
    (out / "MODEL_CARD.md").write_text("# notes\n")
    assert FastJudge(out, home=home).version == judge.version
    (out / "config.json").write_text((out / "config.json").read_text() + "\n")
    assert FastJudge(out, home=home).version != judge.version



def test_train_fast_without_the_keyword_features_reads_criteria_by_embedding_alone(tmp_path, home):
    """`lexicon: []` (the recipe's ablation of the criteria lexicon): the scorer's criterion input is the
    sentence embedding alone, and the weights load and judge with no keyword column; an axis the lexicon
    does not have is named."""
    from pathlib import Path

    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(p) + "\n" for p in _pairs(64)))
    out = tmp_path / "model"
    report = train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(out), epochs=6,
                                        batch_size=16, lr=5e-3, hidden=16, lexicon=[]), Path(home) / "cache")
    assert json.loads((out / "config.json").read_text())["lexicon"] == []
    judge = FastJudge(out, home=home)
    assert judge.model.cfg.lexicon == () and judge.model.state["crit_sem.0.weight"].shape[1] == judge.model.cfg.dim
    pairs = _pairs(16)
    reqs = [JudgeRequest(Criteria(tuple(p["criteria"])), p["prompt"], p["model_a"][1]["content"],
                         p["model_b"][1]["content"]) for p in pairs]
    agree = [(v.p_a > 0.5) == (p["preference"] == "model_a") for v, p in zip(judge.judge(reqs), pairs)]
    assert report["best_dev_accuracy"] >= 0.8 and np.mean(agree) >= 0.8
    with pytest.raises(ValueError, match=r"no keyword axis \['lenght'\]"):
        FastTrainConfig(train=[str(train)], lexicon=["short", "lenght"])

def test_shipped_default_judge_follows_length_criteria_and_is_swap_consistent(home):
    from usl.judges.registry import load_judge

    judge = load_judge("default", home=home)
    q = "What is the capital of France?"
    short = "The capital of France is Paris."
    reqs = [JudgeRequest(Criteria(("I want short, to-the-point answers.",)), q, short, LONG),
            JudgeRequest(Criteria(("I want short, to-the-point answers.",)), q, LONG, short),
            JudgeRequest(Criteria(("Explain in depth, with lots of detail.",)), q, short, LONG),
            JudgeRequest(Criteria((), ("Long-winded answers",)), q, short, LONG)]
    v = judge.judge(reqs)
    assert v[0].p_a > 0.5 and v[2].p_a < 0.5 and v[3].p_a > 0.5
    # the grader register, which the keyword reading gets backwards, is read by the length reader
    # (wordings written for this test, in no training file; the reader reads what split_sign leaves)
    p = judge.model.reader.probs(["Deduct points from any response that rambles past the answer.",
                                  "Responses that stop at a bare fact should lose points."])
    assert p[0].argmax() == 1 and p[1].argmax() == 2  # shorter, then longer
    assert v[0].p_a == pytest.approx(1 - v[1].p_a, abs=1e-6)
    assert judge.identity.startswith("default@fast-")


def test_a_one_word_answer_wins_under_a_wish_for_brevity(home):
    """Substance first must not take a complete one-word answer for a non-answer (a substance reader that
    learned what answers from AlpacaEval's answers alone did, and lost this pair)."""
    from usl.judges.registry import load_judge

    v = load_judge("default", home=home).judge(
        [JudgeRequest(Criteria(("I want short, to-the-point answers.",)), "What is the capital of France?", SHORT, LONG)])
    assert v[0].p_a > 0.5


def test_a_model_from_an_older_version_fails_with_a_clear_error(tmp_path):
    from safetensors.torch import load_file, save_file

    model = FastCRM(FastCRMConfig(hidden=8, lexicon_fingerprint=lexicon_fingerprint()))
    model.save(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    del state["gamma"]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="older usl.*gamma.*retrain"):
        FastCRM.load(tmp_path)


def test_rewording_draws_only_wordings_of_the_same_family_and_keeps_signs():
    from usl.fast.train import FastTrainConfig, _Encoded, _family_wordings, _noisy

    # criteria ids 0-2 belong to family "concise" (2 is a dislike), 3-4 to "formal"
    enc = _Encoded(a=np.zeros(4, np.int64), b=np.ones(4, np.int64), y=np.ones(4, np.float32),
                   crit=[[0], [1, 2], [3], [4]], sign=[[1.0], [1.0, -1.0], [1.0], [1.0]],
                   source=["s"] * 4, family=["concise", "concise", "formal", "formal"])
    words = _family_wordings(enc)
    assert words == {"concise": [(0, 1.0), (1, 1.0), (2, -1.0)], "formal": [(3, 1.0), (4, 1.0)]}
    cfg = FastTrainConfig(reword_prob=1.0, drop_prob=0.0, add_prob=0.0)
    seen = set()
    for seed in range(20):
        crit, sign = _noisy(enc, np.arange(4), np.random.default_rng(seed), {}, cfg, words)
        assert len(crit[1]) == 2 and len(set(crit[1])) == 2                 # as many criteria, no repeats
        for i, (cs, gs) in enumerate(zip(crit, sign)):
            pool = dict(words[enc.family[i]])
            assert all(pool[c] == g for c, g in zip(cs, gs))               # a wording keeps its own sign
        seen.update(crit[0])
    assert seen == {0, 1, 2}                                               # and every wording comes up
    crit, _ = _noisy(enc, np.arange(4), np.random.default_rng(0), {}, FastTrainConfig(reword_prob=0.0,
                     drop_prob=0.0, add_prob=0.0), words)
    assert crit == enc.crit


@pytest.mark.parametrize("field", ["reword_prob", "add_prob", "drop_prob"])
def test_train_fast_rejects_a_probability_outside_0_1(field):
    from usl.fast.train import FastTrainConfig

    with pytest.raises(ValueError, match=field):
        FastTrainConfig(**{field: 1.5})


def test_weights_read_with_another_criteria_lexicon_are_refused(tmp_path, monkeypatch):
    from usl.fast import criteria_lexicon, lexicon_probe

    model = FastCRM(FastCRMConfig(hidden=8, lexicon_fingerprint=lexicon_fingerprint()))
    model.save(tmp_path)
    assert FastCRM.load(tmp_path).cfg.lexicon_fingerprint == lexicon_fingerprint()
    # one pattern read differently: "brief" no longer counts for the short axis
    real = criteria_lexicon.lexicon_matrix

    def edited(texts):
        m = real(texts)
        m[[i for i, t in enumerate(texts) if "brief" in t.lower()], LEXICON_AXES.index("short")] = 0.0
        return m
    with monkeypatch.context() as m:
        m.setattr(criteria_lexicon, "lexicon_matrix", edited)
        lexicon_probe.lexicon_fingerprint.cache_clear()
        try:
            with pytest.raises(ValueError, match=r"criteria lexicon whose reading differs.*make judge"):
                FastCRM.load(tmp_path)
        finally:
            lexicon_probe.lexicon_fingerprint.cache_clear()
    FastCRM.load(tmp_path)   # the code's own reading again
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["lexicon_fingerprint"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"no criteria-lexicon fingerprint.*make judge"):
        FastCRM.load(tmp_path)


def test_the_shipped_weights_match_this_codes_lexicon_and_record_their_recipe():
    from usl.weights import shipped
    from usl.fast.train import FastTrainConfig

    cfg = json.loads((shipped("fast-crm") / "config.json").read_text())
    assert cfg["lexicon_fingerprint"] == lexicon_fingerprint()
    recipe = FastTrainConfig.from_yaml(Path(__file__).resolve().parents[1] / "configs" / "fast_crm.yaml")
    # the recorded recipe as this code reads it (a key added since takes its default) is the recipe file's
    assert FastTrainConfig.from_dict(cfg["extra"]["recipe"]).to_dict() == recipe.to_dict()
    assert cfg["lexicon"] == recipe.lexicon
    assert cfg["length_boost"] == 4.0 and cfg["score_boost"] == 12.0


def test_the_recipe_file_sets_every_key_and_refuses_unknown_ones(tmp_path):
    import yaml

    from usl.fast.train import FastTrainConfig

    path = Path(__file__).resolve().parents[1] / "configs" / "fast_crm.yaml"
    assert set(yaml.safe_load(path.read_text())) == set(FastTrainConfig.help())   # nothing left to a default
    assert all(FastTrainConfig.help().values())
    cfg = FastTrainConfig.from_yaml(path, ["seed=0", "length_boosts=[1, 2]"])
    assert cfg.seed == 0 and cfg.length_boosts == [1.0, 2.0] and cfg.epochs == 16
    with pytest.raises(ValueError, match=r"fast_crm.yaml: unknown config key\(s\) \['other_reader'\]"):
        FastTrainConfig.from_yaml(path, ["other_reader=x"])
    with pytest.raises(ValueError, match="length_boosts"):
        FastTrainConfig.from_yaml(path, ["length_boosts=[0]"])


def test_usl_train_fast_builds_from_a_recipe_file_and_its_overrides(tmp_path, home):
    import yaml
    from typer.testing import CliRunner

    from usl.cli import app

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(p) + "\n" for p in _pairs(32)))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"train": [str(train)], "dev": [str(train)], "out": str(tmp_path / "m"),
                                      "epochs": 1, "batch_size": 16, "hidden": 8}))
    r = CliRunner().invoke(app, ["--home", home, "train-fast", "--config", str(recipe), "--set", "seed=3"])
    assert r.exit_code == 0, r.output
    got = json.loads((tmp_path / "m" / "config.json").read_text())["extra"]["recipe"]
    assert got["seed"] == 3 and got["hidden"] == 8 and got["train"] == [str(train)]
    r = CliRunner().invoke(app, ["--home", home, "train-fast", "--config", str(recipe), "--set", "patience=x"])
    assert r.exit_code == 2 and "patience='x': expected an integer" in r.output


def test_answer_representations_grow_by_the_new_rows_alone(home):
    """A request with new answers computes their representations and keeps the others: the same arrays as
    computing every row again (each row's representation is its own)."""
    from usl.judges.fast import FastJudge

    judge = FastJudge(home=home)
    judge.bank.preload(["What is 2+2?"] * 2, ["4", "Two plus two is four."])
    before = judge._answers()
    judge.bank.preload(["Name a colour."] * 2, ["Blue.", "Red is a colour, and so is blue."])
    grown = judge._answers()
    full = judge.model.answer_repr(judge.bank.r, judge.bank.feats, judge.bank.cos_q)
    assert len(grown.quality) == len(judge.bank) == len(before.quality) + 2
    assert np.array_equal(grown.z[:len(before.z)], before.z)
    for name in ("f", "z", "quality"):
        assert np.allclose(getattr(grown, name), getattr(full, name), atol=1e-5), name
