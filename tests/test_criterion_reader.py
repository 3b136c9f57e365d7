"""The length reader (which way a criterion points on length) and its place in the fast CRM.

It reads frozen token states of the packaged all-MiniLM-L6-v2 (real weights, offline); only its small
heads are trained here, on toy wordings.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from crm_fixtures import STYLE_TOPICS, domain_rows
from usl.fast.criterion_reader import (
    LENGTH,
    CriterionReader,
    ReaderConfig,
    direction_accuracy,
    fit_reader,
    in_reader_frame,
    read_readings,
    read_wordings,
    write_readings,
)

SHORT = ["Keep it short.", "Be brief.", "Short answers, please.", "Concise and to the point.", "I want brevity.",
         "Get to the point quickly.", "One line is enough.", "Avoid: long answers", "Avoid: rambling",
         "No walls of text.", "Just the gist.", "A sentence or two at most."]
LONG = ["Explain in depth.", "Be thorough.", "Detailed answers, please.", "I want the full picture.",
        "Walk me through every step.", "Cover everything.", "Long, complete answers.", "Avoid: short answers",
        "Avoid: one-line replies", "Leave nothing out.", "Elaborate on each point.", "Give me lots of detail."]
NEITHER = ["Use a friendly tone.", "Cite your sources.", "Write in a formal register.", "Use bullet points.",
           "Avoid: jargon", "Be polite.", "Include a code example.", "No emojis.", "Sound like a poet.",
           "Use plain words.", "Be honest about uncertainty.", "Avoid: made-up facts"]


def _toy(tmp_path: Path) -> Path:
    f = tmp_path / "toy.json"
    f.write_text(json.dumps({"concise": SHORT, "detailed": LONG, "neutral": NEITHER}))
    return f


def test_wordings_files_are_read_by_side_and_bad_ones_are_named(tmp_path):
    got = read_wordings(_toy(tmp_path))
    assert {label for t, label in got if t in SHORT} == {1} and {label for t, label in got if t in LONG} == {2}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"concise": ["ok"], "medium": ["?"]}))
    with pytest.raises(ValueError, match=r"bad.json.*'medium'"):
        read_wordings(bad)
    bad.write_text(json.dumps({"detailed": "Be thorough."}))
    with pytest.raises(ValueError, match=r"bad.json.*'detailed'.*list"):
        read_wordings(bad)


def test_a_dislike_is_read_in_the_frame_of_what_it_names():
    frame = dict(in_reader_frame([("Avoid: long answers", 1), ("Keep it short.", 1), ("Avoid: jargon", 0),
                                  ("No walls of text.", 1)]))
    # "Avoid: long answers" asks for shorter answers by naming longer ones
    assert frame == {"long answers": 2, "Keep it short.": 1, "jargon": 0, "walls of text": 2}


@pytest.fixture(scope="module")
def reader_and_held():
    examples = in_reader_frame([(t, 1) for t in SHORT] + [(t, 2) for t in LONG] + [(t, 0) for t in NEITHER])
    cfg = ReaderConfig(epochs=40, heads=2, folds=2, lr=3e-3)
    crossfit = [t for t, _ in examples[::3]]
    return fit_reader(examples, cfg, crossfit=crossfit), crossfit


def test_a_later_wordings_file_restates_an_earlier_ones_wording_under_another_side(tmp_path):
    """configs/domain_wordings/extra_g.json turns a few "none" wordings of earlier files into "other": the
    length and domain readers see the very same examples (both read "other" as none)."""
    first, later = tmp_path / "first.json", tmp_path / "later.json"
    first.write_text(json.dumps({"none": ["Make it hilarious.", "Be polite."], "concise": ["Be brief."]}))
    later.write_text(json.dumps({"other": ["Make it hilarious.", "Tone: legal"]}))
    for kind, restated in (("length", 0), ("domain", 0)):
        both = in_reader_frame(read_wordings(first, kind) + read_wordings(later, kind), kind)
        assert both[0] == ("Make it hilarious.", restated), kind
        assert [t for t, _ in both] == ["Make it hilarious.", "Be polite.", "Be brief.", "Tone: legal"]
    # to the domain reader the later file only adds what the earlier one lacks
    domain = in_reader_frame(read_wordings(first, "domain") + read_wordings(later, "domain"), "domain")
    assert domain == in_reader_frame(read_wordings(first, "domain"), "domain") + [("Tone: legal", 0)]


def test_the_reader_learns_directions_and_cross_fits_what_it_is_asked_to(reader_and_held, tmp_path):
    (reader, held), crossfit = reader_and_held
    as_written = [(t, 1) for t in SHORT] + [(t, 2) for t in LONG]
    acc = direction_accuracy(reader, as_written)
    assert acc["concise"] >= 0.9 and acc["detailed"] >= 0.9, acc
    assert set(held) == set(crossfit)
    assert all(v.shape == (3,) and abs(v.sum() - 1) < 1e-4 for v in held.values())
    # readings from heads that never saw a text differ from the full fit's
    assert any(not np.allclose(held[t], reader.probs([t])[0], atol=1e-3) for t in crossfit)

    reader.save(tmp_path)
    again = CriterionReader.load(tmp_path)
    texts = ["Keep answers short, thanks.", "I need every detail.", "Use a table."]
    np.testing.assert_allclose(again.read(texts), reader.read(texts), atol=5e-3)  # heads are stored as fp16
    assert CriterionReader.load(tmp_path / "nowhere") is None

    # padding is masked out: a text reads the same alone and beside a longer one
    alone = CriterionReader.load(tmp_path).probs(["Be brief."])[0]
    beside = CriterionReader.load(tmp_path).probs(["I would like every answer to cover the whole topic, step by step, "
                                                "with examples and the reasons behind each step.", "Be brief."])[1]
    np.testing.assert_allclose(alone, beside, atol=1e-4)
    many = [f"answer {i}: " + "more words " * (i % 30) for i in range(300)]  # several batches of other lengths
    assert CriterionReader.load(tmp_path).probs(many).shape == (300, 3)
    (tmp_path / "length_reader" / "heads.safetensors").write_bytes(b"torn")
    with pytest.raises(ValueError, match="length_reader.*usl train-reader"):
        CriterionReader.load(tmp_path)

    write_readings(tmp_path / "held.json", held)
    back = read_readings(tmp_path / "held.json")
    assert set(back) == set(held) and all(np.allclose(back[t], held[t], atol=1e-4) for t in held)
    (tmp_path / "bad.json").write_text(json.dumps({"x": [0.5, 0.5]}))
    with pytest.raises(ValueError, match="bad.json"):
        read_readings(tmp_path / "bad.json")


def test_a_reader_without_the_keyword_features_reads_token_states_alone(tmp_path):
    """`usl train-reader --no-lexicon`: the heads take the pooled states only, and say so in their config."""
    examples = in_reader_frame([(t, 1) for t in SHORT] + [(t, 2) for t in LONG] + [(t, 0) for t in NEITHER])
    reader, _ = fit_reader(examples, ReaderConfig(epochs=40, heads=1, folds=2, lr=3e-3, lexicon=False))
    assert reader.heads[0]["out.0.weight"].shape == (128, reader.cfg.hidden)
    reader.save(tmp_path)
    again = CriterionReader.load(tmp_path)
    assert again.cfg.lexicon is False
    texts = ["Keep answers short, thanks.", "I need every detail."]
    np.testing.assert_allclose(again.read(texts), reader.read(texts), atol=5e-3)
    assert again.read(texts)[:, 0].argmax() == 0  # shorter, then longer


def test_usl_train_reader_then_train_fast_ship_the_reader_and_the_judge_reads_it(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from usl.cli import app
    from usl.fast.model import FastCRM, criteria_inputs
    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    toy = _toy(tmp_path)
    test = tmp_path / "test.json"
    test.write_text(json.dumps({"concise": ["Brevity, please.", "Keep it short."], "detailed": ["Go deep."]}))
    out = tmp_path / "reader"
    evals = tmp_path / "eval_wording.json"  # a held-out wording of the library (seed 0): it words evaluation pairs
    evals.write_text(json.dumps({"neutral": ["Just answer normally."]}))
    r = CliRunner().invoke(app, ["train-reader", "--out", str(out), "--wordings", str(toy), "--wordings", str(evals),
                                 "--test", str(test), "--epochs", "1", "--heads", "1", "--folds", "2"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index('{"out"'):])
    assert report["dropped_as_test"] >= 1  # "Keep it short." is a toy wording and a test one: never trained on
    assert report["dropped_as_held_out_library"] >= 1
    r = CliRunner().invoke(app, ["train-reader", "--out", str(tmp_path / "x"), "--kind", "tone"])
    assert r.exit_code != 0 and "reader kind 'tone'" in r.output and not (tmp_path / "x").exists()
    assert set(report["test"][str(test)]) == {"concise", "detailed"}
    held = read_readings(out / "heldout.json")
    assert report["library_wordings"] > 100 and "Be brief." in held  # every training wording, cross-fitted
    assert "Keep it short." not in held and "Just answer normally." not in held

    home, train, model_dir = _tiny_crm(tmp_path, length_reader=str(out))
    assert (model_dir / "length_reader" / "heads.safetensors").exists()
    model = FastCRM.load(model_dir)
    assert model.cfg.reader == LENGTH.features and model.reader is not None
    import torch

    x = criteria_inputs(model, ["Keep it short.", "Avoid: jargon"], torch.zeros((2, 384)))
    assert x.shape == (2, 384 + len(model.cfg.lexicon) + 2)
    np.testing.assert_allclose(x[:, -2:].numpy(), model.reader.read(["Keep it short.", "Avoid: jargon"]))
    judge = FastJudge(model_dir, home=str(home))
    assert judge.model.reader._minilm() is judge.encoder  # one MiniLM in memory, not two
    new = "Answers for this test, as short as they can be."
    judge.encoder.encode([new])
    assert new in judge.model.reader._memo  # read from the criteria tower's own pass: no second pass
    np.testing.assert_allclose(judge.model.reader.probs([new]), CriterionReader.load(model_dir).probs([new]), atol=1e-4)
    p = judge.judge_matrix(_criteria("Keep it short."), ["q"], ["A short reply."],
                           ["A much longer reply that goes on and on about many things in detail."])
    assert p.shape == (1,) and 0.0 < p[0] < 1.0

    shutil.rmtree(model_dir / "length_reader")  # the weights expect reader features: a clear error
    with pytest.raises(ValueError, match="length_reader/ is missing"):
        FastCRM.load(model_dir)
    (tmp_path / "manifest.json").write_text(json.dumps({"seed": 3}))  # data built on another library split
    with pytest.raises(ValueError, match="seed 0.*seed 3"):
        train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(tmp_path / "m2"), epochs=1,
                                   batch_size=16, hidden=8, length_reader=str(out)), home / "cache")
    with pytest.raises(FileNotFoundError, match="no length_reader"):
        train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(tmp_path / "m2"), epochs=1,
                                   batch_size=16, hidden=8, length_reader=str(tmp_path)), home / "cache")


def _tiny_crm(tmp_path: Path, name: str = "model", **readers: str) -> tuple[Path, Path, Path]:
    """A fast CRM trained for one epoch on toy domain pairs with the given readers: (home, train file, model)."""
    from usl.fast.train import FastTrainConfig, train_fast

    home, train, model_dir = tmp_path / "home", tmp_path / "train.jsonl", tmp_path / name
    train.write_text("".join(json.dumps(row) + "\n" for row in domain_rows(STYLE_TOPICS[:8])))
    train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(model_dir), epochs=1, batch_size=16,
                               hidden=8, **readers), home / "cache")
    return home, train, model_dir


def _criteria(text: str):
    from usl.types import Criteria

    return Criteria(likes=(text,))


# -- the domain reader -----------------------------------------------------------------------------

STYLES = {
    "domain_academy": ["Write like a professor.", "Scholarly, please.", "I am citing this in my thesis.",
                       "Use academic terminology.", "Sound like a research paper.", "Formal and analytical."],
    "domain_business": ["Write like a consultant.", "Focus on the bottom line.", "I pitch to investors on Monday.",
                        "Corporate tone.", "Sound like a business report.", "Think about customers and costs."],
    "domain_literature": ["Write like a poet.", "Vivid imagery, please.", "Tell it as a bedtime story.",
                          "Use metaphors and rhyme.", "Sound like a novel.", "Lyrical and imaginative."],
    "domain_plain": ["Just answer normally.", "Plain everyday words.", "No special style.",
                     "Like a friend would say it.", "Simple and neutral.", "Unadorned, ordinary answers."],
}


def _domain_reader(tmp_path: Path) -> tuple[CriterionReader, Path]:
    """A domain reader fitted on the toy wordings above, saved with its cross-fitted readings."""
    from usl.fast.criterion_reader import DOMAIN

    examples = in_reader_frame([(t, DOMAIN.sides[side]) for side, ts in STYLES.items() for t in ts]
                               + [(t, 0) for t in SHORT + NEITHER], "domain")
    reader, held = fit_reader(examples, ReaderConfig(kind="domain", epochs=40, heads=1, folds=2, lr=3e-3),
                              crossfit=[t for t, _ in examples])
    out = tmp_path / "dreader"
    reader.save(out)
    write_readings(out / "heldout.json", held)
    return reader, out


def test_domain_wordings_are_read_by_style_and_length_sides_are_none_to_it(tmp_path):
    f = tmp_path / "dom.json"
    f.write_text(json.dumps(STYLES | {"concise": ["Be brief."], "neutral": ["Use bullet points."]}))
    got = dict(read_wordings(f, "domain"))
    assert got["Write like a poet."] == 3 and got["Just answer normally."] == 4 and got["Be brief."] == 0
    assert dict(read_wordings(f, "length"))["Write like a poet."] == 0  # and the other way round
    # a dislike names some other style than its family: left out of the domain reader's examples
    frame = dict(in_reader_frame([("Avoid: poetic or flowery writing", 1), ("Scholarly, please.", 1),
                                  ("Avoid: jargon", 0)], "domain"))
    assert frame == {"Scholarly, please.": 1, "jargon": 0}
    with pytest.raises(ValueError, match="reader kind 'tone'"):
        ReaderConfig(kind="tone")


def test_a_domain_reader_ships_with_the_fast_crm_and_the_judge_reads_it(tmp_path):
    import torch

    from usl.fast.criterion_reader import DOMAIN
    from usl.fast.model import FastCRM, criteria_inputs
    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    reader, out = _domain_reader(tmp_path)
    acc = direction_accuracy(reader, [(t, DOMAIN.sides[side]) for side, ts in STYLES.items() for t in ts])
    assert set(acc) == {"academy", "business", "literature", "plain"} and min(acc.values()) >= 0.8, acc
    assert (out / "domain_reader" / "config.json").exists() and CriterionReader.load(out) is None
    with pytest.raises(ValueError, match="a domain reader, not a length reader"):
        (out / "length_reader").mkdir()
        shutil.copy(out / "domain_reader" / "config.json", out / "length_reader" / "config.json")
        shutil.copy(out / "domain_reader" / "heads.safetensors", out / "length_reader" / "heads.safetensors")
        CriterionReader.load(out, "length")
    shutil.rmtree(out / "length_reader")

    home, train, model_dir = _tiny_crm(tmp_path, domain_reader=str(out))
    model = FastCRM.load(model_dir)
    assert model.cfg.domain == DOMAIN.features and model.domain_reader is not None and model.reader is None
    x = criteria_inputs(model, ["Write like a poet.", "Use bullet points."], torch.zeros((2, 384)))
    assert x.shape == (2, 384 + len(model.cfg.lexicon) + 4)
    np.testing.assert_allclose(x[:, -4:].numpy(), reader.read(["Write like a poet.", "Use bullet points."]),
                               atol=5e-3)
    # the toy pairs are academic and business only: the style-score prior reads those two styles' scores
    assert model.cfg.score_prior == ("register_domain_academy", "register_domain_business", "", "")
    judge = FastJudge(model_dir, home=str(home))
    assert judge.model.domain_reader._minilm() is judge.encoder  # one MiniLM in memory
    p = judge.judge_matrix(_criteria("Write like a poet."), ["q"], ["Moonlight spills like silver wine."],
                           ["The moon reflects sunlight."])
    assert p.shape == (1,) and 0.0 < p[0] < 1.0
    shutil.rmtree(model_dir / "domain_reader")
    with pytest.raises(ValueError, match="domain_reader/ is missing"):
        FastCRM.load(model_dir)
    with pytest.raises(FileNotFoundError, match="no domain_reader"):
        train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(tmp_path / "m2"), epochs=1,
                                   batch_size=16, hidden=8, domain_reader=str(tmp_path)), home / "cache")


def test_the_style_score_prior_favours_the_answer_scored_higher_in_the_style_the_criterion_is_read_as():
    from types import SimpleNamespace

    import torch

    from usl.fast.criterion_reader import DOMAIN
    from usl.fast.model import FastCRM, FastCRMConfig
    from usl.fast.train import _score_prior
    from usl.fast.features import FEATURES

    styles = ("academy", "business", "literature", "plain")
    names = FEATURES + tuple(f"register_domain_{s}" for s in styles) + tuple(f"style_domain_{s}" for s in styles)
    assert _score_prior(names) == names[-4:]  # the style scorer's scores where the answers have them
    assert _score_prior(names[:-4]) == names[-8:-4]  # else the register scorer's
    assert _score_prior(names[:-1]) == names[-4:-1] + ("register_domain_plain",)  # per style
    no_literature = tuple(n for n in names if "literature" not in n)  # a build that holds literature out
    assert _score_prior(no_literature) == ("style_domain_academy", "style_domain_business", "", "style_domain_plain")
    assert _score_prior(FEATURES) == ()

    cfg = FastCRMConfig(n_features=len(names), features=names, domain=DOMAIN.features, score_prior=names[-4:])
    model = FastCRM(cfg, register=SimpleNamespace(names=names[len(FEATURES):]), domain_reader=SimpleNamespace()).eval()
    x = torch.zeros((2, cfg.dim + len(cfg.lexicon) + 4))
    x[0, -4:] = torch.tensor([0.0, 0.0, 0.9, 0.1])  # read as literature; the second criterion as no style
    with torch.no_grad():
        model.delta.fill_(1.0)
        prior = model.criteria_repr(x).g - model.crit_feat(x)  # the style prior W is still zero
    w = float(torch.nn.functional.softplus(torch.tensor(1.0)))
    want = np.zeros((2, len(names)), np.float32)
    want[0, names.index("style_domain_literature")] = 0.9 * w
    want[0, names.index("style_domain_plain")] = 0.1 * w
    np.testing.assert_allclose(prior.numpy(), want, atol=1e-6)
    model.cfg.score_boost = 3.0  # the factor --tune-wordings chooses scales the prior
    with torch.no_grad():
        boosted = model.criteria_repr(x).g - model.crit_feat(x)
    np.testing.assert_allclose(boosted.numpy(), 3.0 * want, atol=1e-5)
    held_out = FastCRM(FastCRMConfig(n_features=len(no_literature), features=no_literature, domain=DOMAIN.features,
                                     score_prior=_score_prior(no_literature)),
                       register=SimpleNamespace(names=no_literature[len(FEATURES):]), domain_reader=SimpleNamespace())
    with torch.no_grad():
        held_out.delta.fill_(1.0)
        prior = held_out.eval().criteria_repr(x).g - held_out.crit_feat(x)
    np.testing.assert_allclose(prior[0].numpy().sum(), 0.1 * w, atol=1e-6)  # plain's share; literature has no score
    with pytest.raises(ValueError, match="one answer feature"):
        FastCRM(FastCRMConfig(n_features=len(names), features=names, domain=DOMAIN.features,
                              score_prior=names[-3:]),
                register=SimpleNamespace(names=names[len(FEATURES):]), domain_reader=SimpleNamespace())


FOUR = {"domain_academy": "Empirical studies of {t} suggest, per the literature, that {t} vary in kind.",
        "domain_business": "Our {t} deliver strong value for customers and drive revenue growth this quarter.",
        "domain_literature": "Like moonlight on water, {t} shimmer and sing in the dreaming dusk.",
        "domain_plain": "{t} are things people use every day, and most of them work fine."}


def test_tune_wordings_choose_the_style_score_prior_factor_on_reworded_dev_pairs(tmp_path):
    from usl.fast.criterion_reader import library_held_out
    from usl.fast.model import FastCRM
    from usl.fast.train import FastTrainConfig, _tuning_wordings, train_fast

    rows, families = [], list(FOUR)
    for i, t in enumerate(STYLE_TOPICS[:10]):
        for j, fam in enumerate(families):
            other = families[(j + 1 + i) % 4] if families[(j + 1 + i) % 4] != fam else families[(j + 2) % 4]
            a, b = (FOUR[fam], FOUR[other]) if (i + j) % 2 else (FOUR[other], FOUR[fam])
            rows.append({"idx": f"{i}-{fam}", "prompt": f"Tell me about {t}.", "family": fam, "source": "domain/toy",
                         "criteria": [STYLES[fam][i % 3]], "preference": "model_a" if a == FOUR[fam] else "model_b",
                         "model_a": [{"role": "user", "content": f"Tell me about {t}."},
                                     {"role": "assistant", "content": a.format(t=t)}],
                         "model_b": [{"role": "user", "content": f"Tell me about {t}."},
                                     {"role": "assistant", "content": b.format(t=t)}]})
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, dreader = _domain_reader(tmp_path)
    leak = sorted(library_held_out(0))[0]  # a wording that words evaluation pairs: never used to tune
    tune = tmp_path / "tune.json"
    # nor in another form that reads the same (compared as split_sign leaves it)
    tune.write_text(json.dumps({fam: STYLES[fam][3:] for fam in families}
                               | {"academy": [leak, f"  {leak} "], "neutral": ["x"]}))
    pool = _tuning_wordings([str(tune)], [str(train)])
    assert set(pool) == set(families) and pool["domain_academy"] == STYLES["domain_academy"][3:]
    assert pool["domain_plain"] == STYLES["domain_plain"][3:]

    out = tmp_path / "model"
    report = train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(out), epochs=2, batch_size=16,
                                        hidden=8, domain_reader=str(dreader), tune_wordings=[str(tune)]),
                        tmp_path / "home" / "cache")
    tuned = report["score_boost"]
    assert tuned["pairs"] == 3 * len(rows) and set(tuned["accuracy"]) == {str(b) for b in FastTrainConfig().score_boosts}
    best = max(tuned["accuracy"].values())
    assert tuned["score_boost"] == min(b for b in FastTrainConfig().score_boosts if tuned["accuracy"][str(b)] == best)
    model = FastCRM.load(out)
    assert model.cfg.score_prior == tuple(f"register_{f}" for f in families)  # no style scorer: the n-gram one
    assert model.cfg.score_boost == tuned["score_boost"]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"domain_academy": "not a list"}))
    with pytest.raises(ValueError, match="bad.json"):
        _tuning_wordings([str(bad)], [str(train)])
    with pytest.raises(ValueError, match="needs a domain reader"):
        train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(tmp_path / "m2"), epochs=1,
                                   tune_wordings=[str(tune)]), tmp_path / "home" / "cache")


def test_a_family_held_out_of_the_training_data_is_held_out_of_the_reader_too(tmp_path):
    from usl.fast.criterion_reader import library_wordings
    from usl.fast.train import _check_reader_split

    full = library_wordings(0, "domain")
    held = library_wordings(0, "domain", ["domain_literature"])
    assert any(label == 3 for _, label in full) and not any(label == 3 for _, label in held)
    assert {t for t, _ in held} < {t for t, _ in full}
    # the fast CRM refuses a reader that read a family its training data holds out whole
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"seed": 0, "config": {"holdout_family": "domain_literature"}}))
    reader = tmp_path / "reader"
    reader.mkdir()
    (reader / "training.json").write_text(json.dumps({"library_seed": 0, "holdout_family": []}))
    with pytest.raises(ValueError, match="holds out whole.*--holdout-family domain_literature"):
        _check_reader_split(str(reader), [str(data / "train.jsonl")])
    (reader / "training.json").write_text(json.dumps({"library_seed": 0, "holdout_family": ["domain_literature"]}))
    _check_reader_split(str(reader), [str(data / "train.jsonl")])


def test_train_reader_names_an_unknown_held_out_family(tmp_path):
    from typer.testing import CliRunner

    from usl.cli import app

    r = CliRunner().invoke(app, ["train-reader", "--out", str(tmp_path / "r"), "--kind", "domain",
                                 "--holdout-family", "domain_poetry"])
    assert r.exit_code != 0 and "domain_poetry" in r.output and not (tmp_path / "r").exists()


@pytest.mark.parametrize("kind", ["length", "domain"])
def test_every_shipped_wordings_file_reads_as_a_readers_wordings(kind):
    """The wordings files in configs/ train the readers and tune the style-score prior: each one must
    parse for both kinds of reader, and a file of one kind's sides holds no text twice."""
    root = Path(__file__).resolve().parents[1] / "configs"
    files = sorted((root / "length_wordings").glob("*.json")) + sorted((root / "domain_wordings").glob("*.json"))
    assert len(files) >= 18, files
    for f in files:
        got = read_wordings(f, kind)
        assert got, f
        texts = [t for t, _ in got]
        assert len(set(texts)) == len(texts), (f, [t for t in set(texts) if texts.count(t) > 1])
    # the domain reader's files name its four styles and none (registers no scorer knows, "other", are none)
    extra = dict(read_wordings(root / "domain_wordings" / "extra_d.json", "domain"))
    assert {label for label in extra.values()} == {0, 1, 2, 3, 4}


def _probe_script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "length_reader_probe.py"
    spec = importlib.util.spec_from_file_location("length_reader_probe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_length_reader_probe_scores_directions_in_the_users_frame_and_never_trains_on_a_test_wording(tmp_path):
    from types import SimpleNamespace

    from usl.fast.criteria_lexicon import split_sign

    probe = _probe_script()

    def read(texts):  # a reader that takes "long"/"detail" for longer and anything else for shorter
        longer = np.array([any(w in t.lower() for w in ("long", "detail")) for t in texts], np.float32)
        return np.stack([1 - longer, longer], -1)

    examples = [("Keep it short.", 1), ("Avoid: long answers", 1), ("Avoid: detail", 1),  # read the right way
                ("Give me all the details.", 2), ("Be thorough.", 2)]  # the second one is read the wrong way
    # a dislike names the other side: "long answers" read as longer is a concise wish read right; the probe
    # scores its readers with the reader's own direction_accuracy, which reads a reader's kind and read()
    assert probe.BackboneReader.kind is LENGTH
    assert direction_accuracy(SimpleNamespace(kind=LENGTH, read=read), examples) == {"concise": 1.0, "detailed": 0.5}
    test = _toy(tmp_path)  # SHORT, LONG and NEITHER
    trained = {t for t, _ in probe.examples_for(read_wordings(test), {"t": read_wordings(test)})}
    assert trained and not trained & {split_sign(t)[0] for t in SHORT + LONG + NEITHER}
    # without the test, its wordings are trained on, in the reader's frame
    kept = {t for t, _ in probe.examples_for(read_wordings(test), {})}
    assert {"Keep it short.", "long answers"} <= kept


def test_the_length_reader_probe_names_a_bad_input_before_it_loads_anything(tmp_path, monkeypatch):
    probe = _probe_script()
    good = str(_toy(tmp_path))
    for args, said in ((["--test", str(tmp_path / "nope.json")], "nope.json: file not found"),
                       (["--test", good, "--layers", "1,x"], "--layers '1,x'"),
                       (["--test", good, "--judge-data", str(tmp_path / "none.jsonl")], "none.jsonl: file not found")):
        monkeypatch.setattr("sys.argv", ["length_reader_probe.py", *args])
        with pytest.raises(SystemExit, match=said.replace(".", r"\.")):
            probe.main()
