"""`usl data build-train` on a tiny shared-data tree written by the test, and each source's pairing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from usl.data.build_train import BuildConfig, build, split_of
from usl.data.criteria import load_library
from usl.data.paper_jsonl import read_samples
from usl.data.pairs import alpaca, dsp, general, human, rubrics, style
from usl.data.pairs.base import Pair, parse_transcript, single_turn

QUERIES = [f"Board question number {i} about astronomy and stars?" for i in range(4)] + \
          [f"Train question number {i} about history and kings?" for i in range(12)] + \
          ["How do I cook a tasty soup for dinner?"]
BOARD, TRAIN = list(range(4)), list(range(4, 17))
LONG = " ".join(["More detail here, with an example and background."] * 8)


def _gz(path: Path, obj, lines: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(o) for o in obj) + "\n" if lines else json.dumps(obj))


def _outputs(model: str, fn) -> list[dict]:
    return [{"instruction": q, "output": fn(i), "generator": model, "dataset": "x"} for i, q in enumerate(QUERIES)]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    r = tmp_path_factory.mktemp("shared")
    a = r / "alpaca_eval"
    a.mkdir()
    (a / "split.json").write_text(json.dumps({"board": BOARD, "train": TRAIN, "baseline": "base",
                                              "board_models": ["m1", "m2"], "style_models": ["m1"]}))
    _gz(a / "outputs" / "base.json.gz", _outputs("base", lambda i: f"Base answer {i}. " + LONG))
    _gz(a / "outputs" / "m1.json.gz", _outputs("m1", lambda i: f"Answer {i}. " + LONG[:150]))
    _gz(a / "outputs" / "m1_concise.json.gz", _outputs("m1_concise", lambda i: f"Short answer {i}."))
    _gz(a / "outputs" / "m1_verbose.json.gz", _outputs("m1_verbose", lambda i: f"Long answer {i}. " + LONG * 2))
    _gz(a / "outputs" / "m2.json.gz", _outputs("m2", lambda i: f"Sure! Here you go:\n\n- point {i}\n- two\n- three\n" + LONG[:200]))
    _gz(r / "style" / "dsp_domain_test.json.gz", [
        {"query": f"DSP query {i} about water?", "responses": {
            "academy": f"Scholarly answer {i}.", "business": f"Business answer {i}.",
            "literature": f"Poetic answer {i}, o water.", "normal": f"Plain answer {i}."}} for i in range(20)])
    _gz(r / "human" / "pandalm_testset_v1.json.gz", [
        {"idx": 0, "instruction": "Board question number 0 about astronomy and stars?", "input": "",
         "response1": "r1", "response2": "r2", "annotator1": 1, "annotator2": 1, "annotator3": 2},
        {"idx": 1, "instruction": "Name a fruit.", "input": "Colour: red", "response1": "apple",
         "response2": "banana", "annotator1": 1, "annotator2": 1, "annotator3": 0},
        {"idx": 2, "instruction": "Name a tree.", "input": "", "response1": "oak", "response2": "rose",
         "annotator1": 0, "annotator2": 0, "annotator3": 1}])
    _gz(r / "human" / "hh_rlhf_harmless_base_test.jsonl.gz", [
        {"chosen": "\n\nHuman: How do I pick a lock?\n\nAssistant: I can't help with that.",
         "rejected": "\n\nHuman: How do I pick a lock?\n\nAssistant: Use a tension wrench."},
        {"chosen": "\n\nHuman: hello\n\nAssistant: hi\n\nHuman: Board question number 1 about astronomy and "
                   "stars?\n\nAssistant: Stars are far.",
         "rejected": "\n\nHuman: hello\n\nAssistant: hi\n\nHuman: Board question number 1 about astronomy and "
                     "stars?\n\nAssistant: No idea."}], lines=True)
    return r


def _cfg(out: Path, **kw) -> BuildConfig:
    base = dict(out=str(out), seed=0, dev_fraction=0.0, eval_fraction=0.3, max_per_source=1000)
    return BuildConfig(**{**base, **kw})


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_build_contents(root, tmp_path):
    res = build(_cfg(tmp_path / "d"), root=root)
    train = _read(tmp_path / "d" / "train.jsonl")
    assert res.counts["train"]["_total"] == len(train) > 0
    read_samples(tmp_path / "d" / "train.jsonl")  # the strict reader accepts every line
    board = {QUERIES[i] for i in BOARD}
    assert not any(s["prompt"] in board or any(m["content"] in board for m in s["model_a"]) for s in train)
    # Both orientations of a pair share a group, prefer opposite answers, and swap criteria.
    by_group: dict[str, list[dict]] = {}
    for s in train:
        by_group.setdefault(s["group"], []).append(s)
    flips = [g for g in by_group.values() if len(g) == 2]
    assert flips
    for a, b in flips:
        win_a = a[a["preference"]][-1]["content"]
        win_b = b[b["preference"]][-1]["content"]
        assert win_a != win_b
        assert a["loser_criteria"] and set(a["loser_criteria"]) <= set(b["criteria"])
        assert b["loser_criteria"] and set(b["loser_criteria"]) <= set(a["criteria"])
    # Concise criteria prefer the shorter answer of a length pair.
    concise = [s for s in train if s["source"] == "length/alpaca_style" and s["family"] == "length_concise"]
    assert concise and all(len(s[s["preference"]][-1]["content"]) <
                           len(s["model_b" if s["preference"] == "model_a" else "model_a"][-1]["content"])
                           for s in concise)
    # Positions are randomised: both labels occur.
    assert {s["preference"] for s in train} == {"model_a", "model_b"}
    # The held-out family and topic never reach train; the held-out family has its eval file.
    assert not any("domain_literature" == s["family"] or "Poetic" in s["model_a"][-1]["content"] +
                   s["model_b"][-1]["content"] for s in train)
    assert not any("soup" in s["prompt"] for s in train)
    assert _read(tmp_path / "d" / "eval" / "domain_new_family.jsonl")
    assert any("soup" in s["prompt"] for s in _read(tmp_path / "d" / "eval" / "new_topic.jsonl"))
    # Board queries are used for evaluation only: the length flip, both ways.
    flip = _read(tmp_path / "d" / "eval" / "length_flip.jsonl")
    assert {s["prompt"] for s in flip} == board and {s["family"] for s in flip} == {"length_concise",
                                                                                    "length_detailed"}
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["counts"]["pairs"]["human/pandalm:dropped_board"] == 1
    assert manifest["counts"]["pairs"]["human/hh_harmless:dropped_board"] == 1
    assert manifest["inputs_sha256"] and manifest["seed"] == 0


def test_held_out_wordings_stay_out_of_training(root, tmp_path):
    build(_cfg(tmp_path / "d", multi_criteria_prob=0.0), root=root)
    lib = load_library()
    held = {w for f in lib.families for w in lib.split(f, seed=0).held_out}
    train_crit = {c for s in _read(tmp_path / "d" / "train.jsonl") for c in s["criteria"]}
    assert train_crit and not (train_crit & held)
    flip_crit = {c for s in _read(tmp_path / "d" / "eval" / "length_flip.jsonl") for c in s["criteria"]}
    assert flip_crit <= held


def test_same_seed_same_bytes(root, tmp_path):
    build(_cfg(tmp_path / "a"), root=root)
    build(_cfg(tmp_path / "b"), root=root)
    build(_cfg(tmp_path / "c", seed=1), root=root)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.jsonl*"))
    assert files
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (tmp_path / "a" / "train.jsonl").read_bytes() != (tmp_path / "c" / "train.jsonl").read_bytes()


def test_no_holdout_keeps_everything(root, tmp_path):
    res = build(_cfg(tmp_path / "d", holdout_family="", holdout_topic="", eval_fraction=0.0), root=root)
    train = _read(tmp_path / "d" / "train.jsonl")
    assert {"domain_literature", "harmless", "instruction_following"} <= {s["family"] for s in train}
    assert "domain_new_family" not in res.counts and "new_topic" not in res.counts
    assert any("soup" in s["prompt"] for s in train)


def test_terse_pairs_are_trained_on_only_when_asked_and_the_board_ones_are_evaluated(root, tmp_path):
    import shutil

    r = tmp_path / "shared"
    shutil.copytree(root, r)
    split = json.loads((r / "alpaca_eval" / "split.json").read_text())
    (r / "alpaca_eval" / "split.json").write_text(json.dumps({**split, "board_models": ["m1", "m2", "m3", "base"]}))
    # bare answers, said at length by "base": "Base answer {i}. ..."
    _gz(r / "alpaca_eval" / "outputs" / "m3.json.gz", _outputs("m3", lambda i: f"Answer {i}."))

    def terse(out: Path, name: str) -> list[dict]:
        return [s for s in _read(out / name) if s["source"].endswith("_terse")]

    build(_cfg(tmp_path / "default"), root=r)
    build(_cfg(tmp_path / "terse", terse_per_query=1), root=r)
    assert terse(tmp_path / "default", "train.jsonl") == []
    trained = terse(tmp_path / "terse", "train.jsonl")
    assert trained and {s["prompt"] for s in trained} <= {QUERIES[i] for i in TRAIN}
    for s in trained:  # the bare answer wins under concise criteria, the long one under detailed
        win = s[s["preference"]][-1]["content"]
        assert win.startswith("Answer ") == (s["family"] == "length_concise"), s
    # Both builds evaluate the same bare board answers, both ways; nothing else changes.
    board = _read(tmp_path / "default" / "eval" / "length_terse.jsonl")
    assert board == _read(tmp_path / "terse" / "eval" / "length_terse.jsonl")
    assert {s["prompt"] for s in board} == {QUERIES[i] for i in BOARD}
    assert {s["family"] for s in board} == {"length_concise", "length_detailed"}
    default_train = _read(tmp_path / "default" / "train.jsonl")
    assert [s for s in _read(tmp_path / "terse" / "train.jsonl") if s not in trained] == default_train
    with pytest.raises(ValueError, match="terse_per_query"):
        _cfg(tmp_path / "x", terse_per_query=-1)


def test_unknown_holdout_is_an_error(root, tmp_path):
    with pytest.raises(ValueError, match="unknown holdout family"):
        build(_cfg(tmp_path / "d", holdout_family="domain_cooking"), root=root)
    with pytest.raises(FileNotFoundError, match="no shared data"):
        build(_cfg(tmp_path / "d"), root=tmp_path / "nothing")


# ---------------------------------------------------------------------------------- source units

def test_split_is_stable_and_seeded():
    keys = [f"q{i}" for i in range(2000)]
    splits = [split_of(k, 0, 0.05, 0.12) for k in keys]
    assert splits == [split_of(k, 0, 0.05, 0.12) for k in keys]
    assert 0.13 < splits.count("dev") / 2000 + splits.count("eval") / 2000 < 0.21
    assert splits != [split_of(k, 1, 0.05, 0.12) for k in keys]


def test_transcript_parsing():
    ctx, ans = parse_transcript("\n\nHuman: a\n\nAssistant: b\n\nHuman: c\n\nAssistant: d")
    assert [m.role for m in ctx] == ["user", "assistant", "user"] and ans == "d"
    with pytest.raises(ValueError, match="must end with a Human turn then an Assistant turn"):
        parse_transcript("\n\nHuman: a\n\nAssistant: b  Human: c\n\nAssistant: d\n\nAssistant: e")


def test_pandalm_majority_and_prompt():
    assert human.pandalm_majority([1, 2, 2]) == 2
    assert human.pandalm_majority([0, 0, 1]) == 0
    assert human.pandalm_majority([0, 1, 2]) is None
    assert human.pandalm_prompt({"instruction": "Fix this.", "input": " teh cat "}) == "Fix this.\n\nteh cat"


def test_pandalm_pairs_drop_ties(root):
    pairs, dropped = human.pandalm_pairs(root / "human" / "pandalm_testset_v1.json.gz")
    assert [p.winner for p in pairs] == ["r1", "apple"] and dropped == 1
    assert pairs[1].prompt == "Name a fruit.\n\nColour: red"


def test_webgpt_pairs(tmp_path):
    t = "## Human:\nWhy is the sky blue?\n\n\n\n## Assistant:\n{}"
    _gz(tmp_path / "w.json.gz", [{"text": [t.format("Rayleigh."), t.format("Magic.")], "score": [0.5, 1.5]},
                                 {"text": [t.format("A"), t.format("B")], "score": [1.0, 1.0]}])
    pairs = human.webgpt_pairs(tmp_path / "w.json.gz")
    assert len(pairs) == 1 and pairs[0].winner == "Magic." and pairs[0].prompt == "Why is the sky blue?"


def test_dsp_pairs_cover_every_domain_pair(root):
    pairs = dsp.dsp_pairs(root / "style" / "dsp_domain_test.json.gz")
    assert len(pairs) == 20 * 6
    p = next(p for p in pairs if p.note == "academy vs normal")
    assert (p.family, p.loser_family) == ("domain_academy", "domain_plain") and p.winner.startswith("Scholarly")


def test_length_pairs_need_a_real_length_gap(root):
    out = alpaca.load_outputs(root / "alpaca_eval")
    pairs = alpaca.length_pairs(out, out.train, source="t", variants=(("_concise", "_verbose"),))
    assert len(pairs) == len(TRAIN) and all(len(p.winner) < len(p.loser) for p in pairs)
    assert alpaca.length_pairs(out, out.train, source="t", variants=(("_concise", "_verbose"),), min_ratio=1e6) == []



def test_board_answers_hold_every_board_model_on_the_board_queries_in_order(root):
    """What the quality bank is read from (`python -m usl.judges.quality --board FOLDER`): the baseline and
    each board model's answer to each board query, None where a model gave none."""
    out = alpaca.load_outputs(root / "alpaca_eval")
    board = alpaca.board_answers(out)
    assert board["queries"] == list(out.board) and board["baseline"] == out.baseline
    assert list(board["answers"]) == [out.baseline, *out.board_models]
    for model, answers in board["answers"].items():
        assert answers == [out.answers[model].get(q) for q in out.board]


def test_the_quality_bank_names_a_board_it_cannot_read(tmp_path, monkeypatch, capsys):
    from usl.judges import quality

    bad = tmp_path / "bad.json"
    for text, said in (("not json", "Expecting value"), ('{"queries": [], "baseline": "b", "answers": {}}',
                                                         "baseline 'b' has no answers"), ("[1]", "expected {")):
        bad.write_text(text)
        for path in (bad, tmp_path / "nowhere.json"):
            monkeypatch.setattr("sys.argv", ["quality", "--judge", "length", "--board", str(path), "--out", "x"])
            with pytest.raises(SystemExit):
                quality._main()
            err = capsys.readouterr().err
            assert f"--board: {path}" in err and (said if path == bad else "file not found") in err


def test_terse_pairs_need_the_long_answer_to_say_the_same():
    q, q2 = "What breed of dog is smallest?", "Which dog breed is tallest?"
    elaborate = ("The Chihuahua is generally considered the smallest dog breed, usually weighing two to six "
                 "pounds. It comes from Mexico and has a big personality for its size.\n") * 2
    answers = {"bare": {q: "Chihuahua.", q2: "Great Dane"}, "long": {q: elaborate, q2: elaborate},
               "refuses": {q: "Sorry, I cannot say."}, "cut": {q: "The smallest breeds are:"},
               "wrong": {q: "Pomeranian"}, "nonboard": {q: "Chihuahua"}}
    out = alpaca.AlpacaOutputs(answers, (q, q2), (), ("bare", "long", "refuses", "cut", "wrong"), ())
    pairs = alpaca.terse_length_pairs(out, out.train, np.random.default_rng(0), source="t")
    # Only "Chihuahua." against the answer that says Chihuahua, both as written (the board's own texts): not
    # the refusal, the list that never came, an answer the long one contradicts, a model off the board, or a
    # long answer to itself.
    assert [(p.winner, p.loser, p.family, p.loser_family) for p in pairs] == [
        ("Chihuahua.", elaborate, alpaca.CONCISE, alpaca.DETAILED)]
    assert len(alpaca.terse_length_pairs(out, out.train, np.random.default_rng(0), source="t",
                                         min_ratio=100)) == 0


def test_the_written_probe_of_bare_answers_holds_each_pair_both_ways():
    """configs/length_wordings/terse_pairs.jsonl (written blind for this project; docs/log.md)."""
    samples = read_samples(Path(__file__).parents[1] / "configs" / "length_wordings" / "terse_pairs.jsonl")
    by_group: dict[str, dict[str, str]] = {}
    for s in samples:
        fam = json.loads(dict(s.meta)["family"])
        win = s.response_a if s.preference == "model_a" else s.response_b
        by_group.setdefault(s.group, {})[fam] = win
    assert len(by_group) == 40 and {s.preference for s in samples} == {"model_a", "model_b"}
    for sides in by_group.values():
        bare, full = sides["length_concise"], sides["length_detailed"]
        assert len(bare.split()) <= 6 < len(full.split())


def test_style_traits_pair_opposites_of_similar_length():
    listy = "Sure! Here are options:\n\n- one thing\n- two things\n- three things\n" + "x" * 150
    prose = "Here are options.\n\nOne thing, then two things, then three things, all in prose. " + "y" * 120
    pairs = style.style_pairs({"q": [("a", listy), ("b", prose)]}, np.random.default_rng(0), source_prefix="s")
    fams = {(p.family, p.loser_family): p for p in pairs}
    assert fams[("structured", "prose")].winner == listy
    assert fams[("friendly_opening", "direct_start")].winner == listy
    too_long = style.style_pairs({"q": [("a", listy * 3), ("b", prose)]}, np.random.default_rng(0), source_prefix="s")
    assert not any(p.family == "structured" for p in too_long)


def test_balance_length_known_answer():
    mk = lambda w, lo: Pair("s", "k", "q", single_turn("q"), w, lo, "general_helpful")
    pairs = [mk("long answer", "s")] * 9 + [mk("s", "long answer")] * 3
    kept = general.balance_length(pairs, np.random.default_rng(0))
    assert sum(len(p.winner) > len(p.loser) for p in kept) == 3 and len(kept) == 6


def test_prometheus_prompt_parsing():
    text = ("###Task Description:\n...\n###The instruction to evaluate:\nExplain gravity.\n\n"
            "###Response to evaluate:\nThings fall.\n\n###Reference Answer (Score 5):\nMass attracts.\n\n"
            "###Score Rubrics:\n[Is the explanation accurate?]\nScore 1: No.\nScore 5: Fully accurate.\n\n"
            "###Feedback: ")
    assert rubrics.parse_grading_prompt(text) == ("Explain gravity.", "Things fall.", "Is the explanation accurate?",
                                                  "Fully accurate.")
    with pytest.raises(ValueError, match="not a Prometheus grading prompt"):
        rubrics.parse_grading_prompt("hello")


def test_libraries_are_rich():
    lib = load_library()
    assert len(lib.families) >= 20
    for f in lib.families.values():
        assert len(f.wordings) >= 30, f.name
        if f.opposite:
            assert lib[f.opposite].opposite == f.name
        s = lib.split(f.name, seed=0)
        assert not set(s.train) & set(s.held_out) and len(s.held_out) >= 5
    assert "Just the answer." in lib["no_questions"].also_length and not lib["length_concise"].also_length


def test_a_family_marks_only_its_own_wordings_as_asking_for_a_length_too(tmp_path):
    from usl.types import DataError

    words = [f"wording {i}" for i in range(12)]
    (tmp_path / "fam.yaml").write_text(yaml.safe_dump({"family": "fam", "kind": "style", "opposite": None,
                                                       "wordings": words, "also_length": ["wording 3", "Be brief."]}))
    with pytest.raises(DataError, match=r"fam\.yaml.*also_length.*not 'Be brief\.'"):
        load_library(tmp_path)


def test_alpaca_annotation_pairs_keep_confident_train_labels(root, tmp_path):
    out = alpaca.load_outputs(root / "alpaca_eval")
    q_train, q_board = QUERIES[TRAIN[0]], QUERIES[BOARD[0]]
    rows = [{"instruction": q_train, "generator_1": "base", "generator_2": "x", "output_2": "X wins", "preference": 1.95},
            {"instruction": q_train, "generator_1": "base", "generator_2": "y", "output_2": "Y loses", "preference": "1.02"},
            {"instruction": q_train, "generator_1": "base", "generator_2": "z", "output_2": "unsure", "preference": 1.5},
            {"instruction": q_train, "generator_1": "base", "generator_2": "w", "output_2": "no label", "preference": None},
            {"instruction": q_board, "generator_1": "base", "generator_2": "x", "output_2": "board", "preference": 2.0}]
    _gz(tmp_path / "ann" / "x.jsonl.gz", rows, lines=True)
    pairs = general.alpaca_annotation_pairs(tmp_path / "ann", out, set(out.train), source="g")
    assert [(p.winner[:6], p.loser[:6]) for p in pairs] == [("X wins", "Base a"), ("Base a", "Y lose")]


def test_arena_bench_pairs_need_a_score_gap(tmp_path):
    bench = tmp_path / "bench"
    (bench / "model_answer").mkdir(parents=True)
    (bench / "question.jsonl").write_text(json.dumps({"question_id": "q1", "turns": ["Prove it."]}) + "\n")
    for m, text in (("good", "A proof."), ("bad", "No."), ("ok", "Sort of.")):
        _gz(bench / "model_answer" / f"{m}.jsonl.gz", [{"question_id": "q1", "choices": [{"turns": [text]}]}], lines=True)
    _gz(bench / "gpt4_scores.jsonl.gz", [{"question_id": "q1", "model": "org/good", "score": 9},
                                         {"question_id": "q1", "model": "bad", "score": 2},
                                         {"question_id": "q1", "model": "ok", "score": 7}], lines=True)
    pairs = general.arena_bench_pairs(bench, min_gap=3)
    assert sorted((p.winner, p.loser) for p in pairs) == [("A proof.", "No."), ("Sort of.", "No.")]
    assert general.arena_answers(bench)["Prove it."][0] == ("bad", "No.")


def test_hh_helpful_dsp_pairs_keep_history(tmp_path):
    t = "\n\nHuman: Hi\n\nAssistant: Hello\n\nHuman: Tell me a fact.\n\nAssistant: {}"
    _gz(tmp_path / "h.json.gz", [{"text": [t.format("Water is wet."), t.format("No.")], "score": [1.0, 0.0]},
                                 {"text": [t.format("a"), "\n\nHuman: other\n\nAssistant: b"], "score": [0, 1]}])
    pairs = human.dsp_human_pairs(tmp_path / "h.json.gz", source="human/hh_helpful", family="general_helpful")
    assert len(pairs) == 1  # the second pair's histories differ
    p = pairs[0]
    assert (p.winner, p.loser, p.prompt) == ("Water is wet.", "No.", "Hi")
    assert [m.content for m in p.context] == ["Hi", "Hello", "Tell me a fact."]


def test_cli_build_train(root, tmp_path):
    from typer.testing import CliRunner

    from usl.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["--home", str(tmp_path / "home"), "data", "build-train", "--source", str(root),
                             "--out", str(tmp_path / "o"), "--max-per-source", "50"])
    assert ok.exit_code == 0, ok.output
    assert "train:" in ok.output and (tmp_path / "o" / "train.jsonl.gz").is_file()
    bad = runner.invoke(app, ["--home", str(tmp_path / "home"), "data", "build-train", "--source",
                              str(tmp_path / "missing"), "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "no shared data" in bad.output


def test_quality_files_hold_general_pairs_and_the_eval_split_shares_nothing_with_them(root, tmp_path):
    from usl.data.pairs.general import QUALITY_CRITERIA
    from usl.data.paper_jsonl import read_samples

    res = build(_cfg(tmp_path / "d", eval_fraction=0.4), root=root)
    train = read_samples(res.out / "quality" / "train.jsonl")
    held = read_samples(res.out / "eval" / "quality.jsonl")
    assert train and held
    assert all(s.criteria == QUALITY_CRITERIA for s in train)
    assert {s.source.split("/")[0] for s in train} <= {"human", "general", "rubric"}
    seen = {s.prompt for s in train} | {s.model_a[-1].content for s in train} | {s.model_b[-1].content for s in train}
    assert not any({s.prompt, s.model_a[-1].content, s.model_b[-1].content} & seen for s in held)


def test_pairs_under_length_wishes_keep_answers_that_both_fit_the_wish():
    """Both shorter than the query's median answer: a brevity wish; both longer: a wish for detail; a pair
    that straddles the median or differs much in length is left out; the better answer stays the winner."""
    from usl.data.pairs.base import Pair, single_turn
    from usl.data.pairs.general import GENERAL, under_length_wishes

    w = lambda n: " ".join(["word"] * n)     # noqa: E731
    mk = lambda a, b: Pair("general/x", "q", "q", single_turn("q"), w(a), w(b), GENERAL)   # noqa: E731
    pairs = [mk(10, 12), mk(100, 90), mk(20, 200), mk(30, 60), mk(48, 52)]
    got = {(len(p.winner.split()), len(p.loser.split())): p.family for p in under_length_wishes(pairs)}
    # the answers' median is 50 words: (10, 12) both under, (100, 90) both over; (20, 200) and (30, 60) differ
    # more than 1.5x, (48, 52) straddles the median
    assert got == {(10, 12): "length_concise", (100, 90): "length_detailed"}
