"""The style scorer (a LoRA-tuned sentence encoder scoring answer styles) and its place in the fast CRM.

The encoder is a tiny random BERT built from a config, with the packaged MiniLM's tokenizer: no download.
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from crm_fixtures import STYLE_TOPICS, domain_rows, styled_groups
from usl.fast.style_scorer import (
    StyleScorer,
    StyleScorerConfig,
    combine_dirs,
    fit_style,
    read_table,
    reading_prefix,
    text_key,
    write_table,
)

TOPICS = STYLE_TOPICS[:12]
LABELS = ("domain_academy", "domain_business")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from usl.data.encoder import encoder_path

    out = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(encoder_path())
    tok.save_pretrained(str(out))
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(str(out))
    return str(out)


CFG = StyleScorerConfig(labels=LABELS, lora_r=4, lr=5e-3, head_lr=1e-2, epochs=12, max_len=48, batch=4, folds=3)


@pytest.fixture(scope="module")
def fitted(base):
    return fit_style(styled_groups(TOPICS), CFG, base_path=base, device="cpu")


def test_style_scores_rank_the_answer_written_in_the_style_and_cross_fit_every_answer(fitted):
    scorer, held = fitted
    groups = styled_groups(TOPICS)
    assert scorer.names == ("style_domain_academy", "style_domain_business")
    assert set(held) == {t for g in groups for t in g.values()}
    # held-out scores come from folds that never saw the query, and still rank the styles
    right = [held[g["domain_academy"]][0] > held[g["domain_business"]][0] for g in groups]
    right += [held[g["domain_business"]][1] > held[g["domain_academy"]][1] for g in groups]
    assert np.mean(right) >= 0.9
    s = scorer.scores(["Studies in the literature suggest that further research on kites is warranted.",
                       "Kites drive revenue growth and deliver value for our customers."])
    assert s.shape == (2, 2) and s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]


def test_style_scorer_round_trips_looks_up_known_answers_and_caches_the_rest(fitted, base, tmp_path, monkeypatch):
    scorer, _ = fitted
    texts = ["The literature suggests further research.", "Revenue growth for customers.", "Plain words."]
    scorer.known = {text_key(texts[0]): np.array([7.0, -7.0], np.float32)}
    scorer.save(tmp_path)
    back = StyleScorer.load(tmp_path, base_path=base)
    assert back.cfg == scorer.cfg and back.fingerprint == scorer.fingerprint
    np.testing.assert_allclose(back.compute(texts[1:]), scorer.compute(texts[1:]), atol=1e-5)  # weights are fp16
    back.cache_dir = tmp_path / "cache"
    got = back.scores(texts)
    np.testing.assert_allclose(got[0], [7.0, -7.0])  # from the shipped table, not the network
    assert (tmp_path / "cache" / f"style_{back.fingerprint}.npz").exists()

    again = StyleScorer.load(tmp_path, base_path=base)
    again.cache_dir = tmp_path / "cache"
    monkeypatch.setattr(again, "compute", lambda *a, **k: pytest.fail("recomputed a cached answer"))
    np.testing.assert_allclose(again.scores(texts), got)
    assert StyleScorer.load(tmp_path / "elsewhere") is None

    cache = tmp_path / "cache" / f"style_{back.fingerprint}.npz"
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])  # a torn cache: recomputed, not fatal
    torn = StyleScorer.load(tmp_path, base_path=base)
    torn.cache_dir = tmp_path / "cache"
    np.testing.assert_allclose(torn.scores(texts), got, atol=1e-5)
    assert len(read_table(cache, 2)) == 2  # rewritten whole: the two answers the network scored

    one, two = (StyleScorer.load(tmp_path, base_path=base) for _ in range(2))   # two processes, one home
    for sc in (one, two):
        sc.cache_dir = tmp_path / "shared"
        sc.scores(["Warm."])
    one.scores(["Only the first process read this."])
    two.scores(["Only the second process read this."])
    assert len(read_table(tmp_path / "shared" / cache.name, 2)) == 3    # neither save dropped the other's

    scorer.known = {}
    scorer.save(tmp_path)  # no table now: the old one, another model's scores, must not stay behind
    assert not (tmp_path / "style_scorer" / "known.npz").exists()


def _peft_scores(scorer: StyleScorer, texts: list[str], batch: int = 32) -> np.ndarray:
    """The scores as peft's merge_and_unload gives them, in batches sorted by characters: the way the
    scorer read answers before it merged LoRA itself and sorted by tokens."""
    import torch
    from peft import set_peft_model_state_dict

    from usl.fast.style_scorer import _member_state, _network, _pooled_scores

    out = np.zeros((len(texts), len(scorer.cfg.labels)), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for i in range(scorer.cfg.members):
        tok, enc, head = _network(scorer.cfg, scorer.base_path)
        state = _member_state(scorer.state, i)
        set_peft_model_state_dict(enc, {k[5:]: torch.as_tensor(v).float() for k, v in state.items() if k.startswith("lora.")})
        head.load_state_dict({k[5:]: torch.as_tensor(v).float() for k, v in state.items() if k.startswith("head.")})
        enc = enc.merge_and_unload().eval()
        with torch.inference_mode():
            for s in range(0, len(order), batch):
                idx = order[s:s + batch]
                out[idx] += _pooled_scores(tok, enc, head.eval(), [texts[j] for j in idx], scorer.cfg.max_len,
                                           "cpu").numpy() / scorer.cfg.members
    return out


def _answers_of_many_lengths() -> list[str]:
    words = "the results of the study suggest that revenue growth depends on careful kite design".split()
    return [" ".join(words[j % len(words)] for j in range(n)) + f" ({n})" for n in (1, 3, 9, 30, 31, 70, 200)]


def test_style_scores_match_peft_merged_networks_for_every_member(fitted, base, monkeypatch):
    """Two members (the second one's LoRA halved), texts shorter and longer than max_len, batches of 3; in
    float32 on any CPU (bfloat16, where a CPU reads in it, is held to the shipped table elsewhere:
    ``tests/test_substance_reading.py``)."""
    from dataclasses import replace

    import usl.fast.style_scorer as style_scorer

    monkeypatch.setattr(style_scorer, "cpu_reads_bf16", lambda device: False)

    scorer, _ = fitted
    state = dict(scorer.state)
    state |= {f"m1.{k}": (v * 0.5 if "lora_B" in k else v) for k, v in scorer.state.items()}
    two = StyleScorer(replace(scorer.cfg, members=2), state, base_path=base)
    texts = _answers_of_many_lengths()
    np.testing.assert_allclose(two.compute(texts, batch=3), _peft_scores(two, texts, batch=3), atol=1e-5)
    one = StyleScorer(scorer.cfg, scorer.state, base_path=base).compute(texts)
    assert np.abs(two.compute(texts) - one).max() > 1e-3   # the second member counts


def test_merging_lora_that_fits_no_layer_is_named(fitted, base):
    scorer, _ = fitted
    bad = {k.replace("query", "quarry"): v for k, v in scorer.state.items()}
    with pytest.raises(ValueError, match="do not fit the encoder.*quarry"):
        StyleScorer(scorer.cfg, bad, base_path=base).compute(["a"])


def test_the_shipped_style_scorer_matches_peft_merged_networks(monkeypatch):
    """The default judge's style scorer, on the packaged MiniLM, in float32."""
    import usl.fast.style_scorer as style_scorer
    from usl.weights import shipped

    monkeypatch.setattr(style_scorer, "cpu_reads_bf16", lambda device: False)
    texts = _answers_of_many_lengths() + [" ".join(["word"] * 400)]
    scorer = StyleScorer.load(shipped("fast-crm"))
    np.testing.assert_allclose(scorer.compute(texts, batch=3), _peft_scores(scorer, texts, batch=3), atol=1e-4)


def test_scorers_of_two_seeds_combine_into_one_whose_scores_are_their_mean(fitted, base, tmp_path):
    from dataclasses import replace

    from typer.testing import CliRunner

    from usl.cli import app

    texts = ["The literature suggests further research.", "Revenue growth for customers.", "Plain words."]
    one, held_one = fitted
    two, held_two = fit_style(styled_groups(TOPICS), replace(CFG, seed=1, epochs=4), base_path=base, device="cpu")
    for d, sc, held, known in ((tmp_path / "s0", one, held_one, [1.0, 3.0]), (tmp_path / "s1", two, held_two, [3.0, 5.0])):
        sc.known = {text_key(texts[0]): np.array(known, np.float32), text_key(d.name): np.zeros(2, np.float32)}
        sc.save(d)
        write_table(d / "heldout.npz", {text_key(t): s for t, s in held.items()})
    a, b = (StyleScorer.load(tmp_path / n, base_path=base) for n in ("s0", "s1"))
    want = (a.compute(texts) + b.compute(texts)) / 2
    assert not np.allclose(a.compute(texts), b.compute(texts), atol=1e-3)  # two seeds: two scorers

    r = CliRunner().invoke(app, ["train-style", "--combine", str(tmp_path / "s0"), "--combine", str(tmp_path / "s1"),
                                 "--out", str(tmp_path / "both")])
    assert r.exit_code == 0, r.output
    both = StyleScorer.load(tmp_path / "both", base_path=base)
    assert both.cfg.members == 2 and both.fingerprint not in (a.fingerprint, b.fingerprint)
    np.testing.assert_allclose(both.compute(texts), want, atol=1e-5)
    # tables: the mean where every member scored the answer; an answer one member lacks is left to compute
    assert set(both.known) == {text_key(texts[0])}
    np.testing.assert_allclose(both.known[text_key(texts[0])], [2.0, 4.0])
    held = read_table(tmp_path / "both" / "heldout.npz", 2)
    t = next(iter(held_one))
    np.testing.assert_allclose(held[text_key(t)], (held_one[t] + held_two[t]) / 2, atol=1e-6)
    assert not (tmp_path / "both" / "scores.npz").exists()  # the members had none

    three = combine_dirs([tmp_path / "both", tmp_path / "s0"], tmp_path / "three")  # an ensemble joins like a member
    assert three.cfg.members == 3
    np.testing.assert_allclose(StyleScorer.load(tmp_path / "three", base_path=base).compute(texts),
                               (2 * want + a.compute(texts)) / 3, atol=1e-5)

    wider = replace(CFG, labels=LABELS + ("domain_plain",))
    StyleScorer(wider, one.state).save(tmp_path / "wide")
    with pytest.raises(ValueError, match="wide.*labels"):
        combine_dirs([tmp_path / "s0", tmp_path / "wide"], tmp_path / "x")
    r = CliRunner().invoke(app, ["train-style", "--combine", str(tmp_path / "s0"), "--combine", str(tmp_path / "s1"),
                                 "--train", "t.jsonl", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--combine" in r.output
    r = CliRunner().invoke(app, ["train-style", "--combine", str(tmp_path / "s0"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "two directories" in r.output


def test_a_bad_style_scorer_file_is_named(fitted, tmp_path):
    fitted[0].save(tmp_path)
    (tmp_path / "style_scorer" / "known.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="known.npz"):
        StyleScorer.load(tmp_path)


def test_score_tables_keep_keys_that_end_in_zero_bytes(tmp_path):
    # numpy's fixed-width bytes type drops trailing zeros: 1 key in 256 would be lost
    keys = [b"abcdefghijk\0", b"\0" * 12, text_key("x")]
    write_table(tmp_path / "t.npz", {k: np.full(3, i, np.float32) for i, k in enumerate(keys)})
    back = read_table(tmp_path / "t.npz", 3)
    assert list(back) == keys and back[b"\0" * 12][0] == 1
    with pytest.raises(ValueError, match="t.npz.*2 labels"):
        read_table(tmp_path / "t.npz", 2)


def test_reading_prefix_keeps_every_token_the_scorer_reads():
    from transformers import AutoTokenizer

    from usl.data.encoder import encoder_path

    tok = AutoTokenizer.from_pretrained(encoder_path())
    text = " ".join(f"word{i} unbelievably-long,tokenisation" for i in range(60))
    cut = reading_prefix(text, tok, 32)
    assert len(cut) < len(text) / 5 and text.startswith(cut)
    ids = lambda t: tok(t, truncation=True, max_length=32)["input_ids"]
    assert ids(cut) == ids(text)
    assert reading_prefix("short answer", tok, 32) == "short answer"


def test_fit_style_refuses_unknown_labels_and_too_little_data(base):
    with pytest.raises(ValueError, match="domain_poetry"):
        fit_style([{"domain_poetry": "a", "domain_academy": "b"}] * 2, CFG, base_path=base, device="cpu")
    with pytest.raises(ValueError, match="at least two queries"):
        fit_style(styled_groups(TOPICS[:1]), CFG, base_path=base, device="cpu")


def test_usl_train_style_then_train_fast_ship_the_scorer_and_the_judge_reads_it(tmp_path, base, home, monkeypatch):
    from typer.testing import CliRunner

    from usl.cli import app
    from usl.fast.model import FastCRM
    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in domain_rows(TOPICS)))
    board = ["Our kites drive revenue growth.", "Studies of kites suggest further research."]
    (tmp_path / "board.json.gz").write_bytes(gzip.compress(json.dumps(board).encode()))
    cut = {"keys": [text_key("A long answer, cut.").hex()], "texts": ["A long answer"]}
    (tmp_path / "cut.json").write_text(json.dumps(cut))
    style = tmp_path / "style"
    r = CliRunner().invoke(app, ["train-style", "--train", str(train), "--out", str(style), "--base", base,
                                 "--known", str(tmp_path / "board.json.gz"), "--score", str(tmp_path / "cut.json"),
                                 "--score", str(train),
                                 "--epochs", "2", "--folds", "2", "--lora-r", "2", "--max-len", "32"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index('{"out"'):])
    assert report["known"] == 2 and report["heldout"] == 2 * len(TOPICS)
    assert report["scored"] == 1 + 2 * len(TOPICS)  # the cut answer and every answer of the training pairs
    scored = read_table(style / "scores.npz", 2)
    assert text_key("A long answer, cut.") in scored and text_key(styled_groups(TOPICS)[0]["domain_academy"]) in scored

    import usl.fast.style_scorer as ss

    # a saved scorer names its base by hub id and loads the packaged MiniLM; the tiny one stands in for it
    monkeypatch.setattr(ss, "_base_path", lambda cfg, path: path or base)
    out = tmp_path / "model"
    train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(out), epochs=1, batch_size=16,
                               hidden=8, style_scorer=str(style)), Path(home) / "cache")
    assert (out / "style_scorer" / "weights.safetensors").exists()
    assert set(read_table(out / "style_scorer" / "known.npz", 2)) == {text_key(t) for t in board}
    model = FastCRM.load(out)
    assert model.cfg.features[-4:] == ("register_domain_academy", "register_domain_business",
                                       "style_domain_academy", "style_domain_business")
    judge = FastJudge(out, home=home)
    judge.bank.rows(["q", "q"], board)
    assert judge.bank.feats.shape[1] == len(model.cfg.features)
    np.testing.assert_allclose(judge.bank.feats[-2:, -2:], np.stack([model.register.parts[1].known[text_key(t)]
                                                                     for t in board]))

    import shutil

    shutil.rmtree(out / "style_scorer")  # the weights expect style features: a clear error, not a crash
    with pytest.raises(ValueError, match="style_scorer/ is missing"):
        FastCRM.load(out)

    short = tmp_path / "short.json"
    short.write_text(json.dumps({"keys": ["00ff00ff"], "texts": ["a"]}))
    r = CliRunner().invoke(app, ["train-style", "--train", str(train), "--out", str(tmp_path / "s2"), "--base", base,
                                 "--known", str(short)])
    assert r.exit_code == 2 and "short.json" in r.output and "keys[0]" in r.output

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"keys": ["zz"], "texts": ["a"]}))
    r = CliRunner().invoke(app, ["train-style", "--train", str(train), "--out", str(tmp_path / "s2"), "--base", base,
                                 "--known", str(bad)])
    assert r.exit_code == 2 and "bad.json" in r.output and "keys[0]" in r.output
    with pytest.raises(ValueError, match="differ from the training"):
        other = tmp_path / "other.jsonl"
        rows = [r | {"family": r["family"].replace("academy", "poetry")} for r in domain_rows(TOPICS)]
        other.write_text("".join(json.dumps(r) + "\n" for r in rows))
        train_fast(FastTrainConfig(train=[str(other)], dev=[str(other)], out=str(tmp_path / "m2"), epochs=1,
                                   batch_size=16, hidden=8, style_scorer=str(style)), Path(home) / "cache")


def _written_registers(tmp_path):
    """Domain pairs over TOPICS and three answers written in registers, one to a query of those pairs and
    two to a query no pair has: (rows, written, the pairs' file, the registers' file)."""
    rows = domain_rows(TOPICS)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = [{"query": rows[0]["prompt"], "register": "humorous", "answer": "Kites! Strings attached, jokes free."},
               {"query": "A query no pair has", "register": "humorous", "answer": "Ha, a kite walks into a bar."},
               {"query": "A query no pair has", "register": "news", "answer": "Officials confirmed kites fly."}]
    regs = tmp_path / "regs.jsonl"
    regs.write_text("".join(json.dumps(w) + "\n" for w in written))
    return rows, written, train, regs


def test_train_style_joins_answers_written_in_registers_to_their_query_and_names_a_bad_line(tmp_path, base):
    from typer.testing import CliRunner

    from usl.cli import app

    _, written, train, regs = _written_registers(tmp_path)
    out = tmp_path / "aux"
    args = ["train-style", "--train", str(train), "--base", base, "--epochs", "1", "--folds", "2", "--lora-r", "2",
            "--max-len", "32"]
    r = CliRunner().invoke(app, args + ["--aux-registers", str(regs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index('{"out"'):])
    assert report["labels"] == list(LABELS)                   # the registers' heads are dropped after training
    assert (report["register_answers"], report["register_queries_joined"]) == (3, 1)
    assert report["queries"] == len(TOPICS) + 1  # the new query's two answers make a group of their own
    assert StyleScorer.load(out).names == ("style_domain_academy", "style_domain_business")

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(written[0]) + "\n" + json.dumps({"query": "q", "register": "news"}) + "\n")
    r = CliRunner().invoke(app, args + ["--aux-registers", str(bad), "--out", str(tmp_path / "b2")])
    assert r.exit_code == 2 and "bad.jsonl:2" in r.output and "'answer'" in r.output
    assert not (tmp_path / "b2").exists()


def test_a_scorer_keeps_some_heads_with_their_scores_unchanged(fitted, base, tmp_path):
    scorer, _ = fitted
    texts = ["The literature suggests further research.", "Revenue growth for customers."]
    scorer.known = {text_key(texts[0]): np.array([1.0, 2.0], np.float32)}
    business = scorer.only(("domain_business",))
    assert business.names == ("style_domain_business",) and business.cfg.members == scorer.cfg.members
    np.testing.assert_allclose(business.compute(texts)[:, 0], scorer.compute(texts)[:, 1], atol=1e-5)
    np.testing.assert_allclose(business.known[text_key(texts[0])], [2.0])
    business.save(tmp_path / "b")  # and it loads as a scorer of that label alone
    np.testing.assert_allclose(StyleScorer.load(tmp_path / "b", base_path=base).compute(texts)[:, 0],
                               scorer.compute(texts)[:, 1], atol=1e-5)
    combine_dirs([tmp_path / "b", tmp_path / "b"], tmp_path / "bb")  # members carry a prefix: sliced as well
    two = StyleScorer.load(tmp_path / "bb", base_path=base)
    np.testing.assert_allclose(two.only(("domain_business",)).compute(texts), business.compute(texts), atol=1e-5)
    with pytest.raises(ValueError, match="domain_poetry"):
        scorer.only(("domain_poetry",))
    with pytest.raises(ValueError, match="cannot keep"):
        scorer.only(())


def test_the_style_carry_keeps_whole_text_keys_the_scorers_tokens_and_only_the_styled_pairs(tmp_path):
    """scripts/make_gpu_carry.py --style: what `usl train-style` reads on a GPU box, made smaller
    without changing what it learns from or the keys its tables are looked up by."""
    import importlib.util
    import lzma

    from transformers import AutoTokenizer

    from usl.fast.commands import _texts_file
    from usl.data.encoder import encoder_path

    spec = importlib.util.spec_from_file_location("carry", Path(__file__).resolve().parents[1] / "scripts"
                                                  / "make_gpu_carry.py")
    carry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(carry)
    data = tmp_path / "data"
    data.mkdir()
    long = " ".join(f"Kites{i} soar gracefully above the windswept dunes." for i in range(80))
    rows = domain_rows(TOPICS)
    rows[0]["model_a"][-1]["content"] = long
    other = dict(rows[1], family="length_concise", idx="x1")
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + [other]))
    (data / "dev.jsonl").write_text(json.dumps(dict(rows[2], idx="d0")) + "\n")
    (tmp_path / "board.json").write_text(json.dumps(["Board answer one.", long]))
    counts = carry.pack_style_inputs(data, tmp_path / "board.json", tmp_path / "a", max_len=32)
    n_score = sum(len(_texts_file(str(data / f))[0]) for f in ("train.jsonl", "dev.jsonl"))
    assert counts == {"board": 2, "score": n_score, "styled_pairs": len(rows)}
    keys, texts = _texts_file(str(tmp_path / "a" / "board.json.xz"))
    assert keys == [text_key("Board answer one."), text_key(long)]
    tok = AutoTokenizer.from_pretrained(encoder_path())
    ids = lambda t: tok(t, truncation=True, max_length=32)["input_ids"]
    assert texts[0] == "Board answer one." and len(texts[1]) < len(long) / 10 and ids(texts[1]) == ids(long)
    with lzma.open(tmp_path / "a" / "train_styled.jsonl.xz", "rt") as f:
        assert [json.loads(line)["idx"] for line in f] == [r["idx"] for r in rows]
    (data / "train.jsonl").write_text(json.dumps(other) + "\n")
    with pytest.raises(ValueError, match="train.jsonl: no pair whose criteria family starts with 'domain_'"):
        carry.pack_style_inputs(data, tmp_path / "board.json", tmp_path / "a2")
    (data / "train.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match="train.jsonl:line 2"):
        carry.pack_style_inputs(data, tmp_path / "board.json", tmp_path / "a2")
    assert not (tmp_path / "a2").exists()  # a bad input writes nothing


def test_the_style_carry_spreads_the_encoder_over_folders_that_each_fit_their_room(tmp_path, monkeypatch):
    """A device call sends the tracked tree and one carry folder, 64 MiB in all: the encoder's weights are
    cut into parts so that no folder is over its room, and joined in order they are the weights again."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("carry", Path(__file__).resolve().parents[1] / "scripts"
                                                  / "make_gpu_carry.py")
    carry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(carry)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "inputs.bin").write_bytes(b"x" * 300)
    weights = bytes(range(256)) * 10
    folders = carry.split_parts(weights, tmp_path, room=1000)
    assert [f.name for f in folders] == ["a", "b", "c"]  # 700 bytes beside the inputs, 1000, 860
    for f in folders:
        assert sum(p.stat().st_size for p in f.iterdir()) <= 1000
    parts = sorted(tmp_path.glob("*/model.part*"), key=lambda p: int(p.name.removeprefix("model.part")))
    assert b"".join(p.read_bytes() for p in parts) == weights
    (tmp_path / "full" / "a").mkdir(parents=True)
    (tmp_path / "full" / "a" / "inputs.bin").write_bytes(b"x" * 1000)
    with pytest.raises(SystemExit, match="leave no room"):
        carry.split_parts(weights, tmp_path / "full", room=1000)
    monkeypatch.chdir(tmp_path)  # no git repository here: the room cannot be measured, and it says so
    with pytest.raises(SystemExit, match="not a git repository.*--room"):
        carry.carry_room()
