"""The keyword reader: the criteria lexicon's keyword axes, learned, and read by the judge in its place."""

from __future__ import annotations

import json

import numpy as np
import pytest

from usl.fast import criteria_lexicon
from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix
from usl.fast.criteria_reading import _norm, library_held_out_set
from usl.fast.keyword_reader import KEYWORD_DIR, KeywordReader, KeywordReaderConfig, _head, agreement, corpus, fit
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.weights import shipped

TINY = KeywordReaderConfig(pairs=20, embedded=20, hidden=8, epochs=2, batch=8)


def test_the_training_texts_hold_the_lexicons_words_and_no_held_out_wording():
    texts = corpus(TINY)
    held = {_norm(x.text) for x in library_held_out_set(0)}
    assert held and not held & {_norm(t) for t in texts}
    assert {"Keep it succinct.", "I can't stand rambling replies."} <= set(texts)  # the lexicon's words, framed
    rows = lexicon_matrix(texts)
    short, long = LEXICON_AXES.index("short"), LEXICON_AXES.index("long")
    for axis in (short, long):  # each length axis taught both ways
        assert (rows[:, axis] > 0).sum() > 200 and (rows[:, axis] < 0).sum() > 200


def test_a_tiny_reader_runs_the_same_in_numpy_as_in_torch_and_survives_saving(tmp_path):
    import torch

    texts = ["Keep it short.", "No walls of text.", "Use examples.", "Be formal and precise.", "I like jokes.",
             "Never use bullet points.", "Explain in depth.", "Cite your sources."]
    reader = fit(TINY, texts)
    head = _head(TINY)
    head.load_state_dict({k: torch.from_numpy(v) for k, v in reader.state.items()})
    h, m = reader.states(texts)
    with torch.inference_mode():
        want = head(torch.from_numpy(h), torch.from_numpy(m)).numpy()
    np.testing.assert_allclose(reader.from_states(h, m), want, atol=1e-5)
    assert reader.matrix(texts).shape == (len(texts), len(LEXICON_AXES))

    reader.save(tmp_path)
    back = KeywordReader.load(tmp_path)
    assert back.cfg == TINY and back.taught_by == lexicon_fingerprint()
    np.testing.assert_allclose(back.matrix(texts), reader.matrix(texts), atol=2e-2)  # fp16 on disk
    assert KeywordReader.load(tmp_path / "elsewhere") is None

    cfg = json.loads((tmp_path / KEYWORD_DIR / "config.json").read_text())
    (tmp_path / KEYWORD_DIR / "config.json").write_text(json.dumps(cfg | {"axes": ["short", "long"]}))
    with pytest.raises(ValueError, match="reads the keyword axes.*usl train-keywords"):
        KeywordReader.load(tmp_path)
    (tmp_path / KEYWORD_DIR / "config.json").write_text("{torn")
    with pytest.raises(ValueError, match=f"{KEYWORD_DIR}: not a keyword reader"):
        KeywordReader.load(tmp_path)


def test_weights_whose_keyword_reader_another_lexicon_taught_are_refused(tmp_path):
    from usl.fast.model import FastCRM, FastCRMConfig

    FastCRM(FastCRMConfig(hidden=8, lexicon_fingerprint=lexicon_fingerprint())).save(tmp_path)
    reader = fit(TINY, ["Keep it short.", "Explain in depth."])
    reader.save(tmp_path)
    assert FastCRM.load(tmp_path) is not None
    cfg = json.loads((tmp_path / KEYWORD_DIR / "config.json").read_text())
    (tmp_path / KEYWORD_DIR / "config.json").write_text(json.dumps(cfg | {"taught_by": "0" * 16}))
    with pytest.raises(ValueError, match="keyword reader was taught by a criteria lexicon.*usl train-keywords"):
        FastCRM.load(tmp_path)


def test_the_shipped_reader_reads_held_out_wordings_as_the_lexicon_does():
    reader = KeywordReader.load(shipped("fast-crm"))
    assert reader is not None and reader.taught_by == lexicon_fingerprint()
    got = agreement(reader, [x.text for x in library_held_out_set(0)])
    assert got["texts"] > 150
    assert got["short"] >= 0.95 and got["long"] >= 0.95 and got["negation"] >= 0.95, got


def test_the_judge_reads_criteria_without_the_lexicon(tmp_path, monkeypatch):
    """The shipped judge's keyword features come from the keyword reader: with the lexicon's reading broken,
    new criteria are still judged, and a wish for brevity still prefers the short answer."""
    from usl.fast.length_intent import LengthReading
    from usl.judges.fast import FastJudge
    from usl.types import Criteria

    def broken(text):
        raise AssertionError(f"the lexicon read {text!r}")

    criteria_lexicon._lexicon_row.cache_clear()
    monkeypatch.setattr(criteria_lexicon, "lexicon_features", broken)
    judge = FastJudge(home=str(tmp_path))
    crit = Criteria(("Keep the replies for this test short.",))
    p = judge.judge_matrix(crit, ["What is the capital of France?"],
                           ["The capital of France is Paris."],
                           ["The capital of France is Paris, a city on the Seine that has been the country's political, "
                            "economic and cultural centre for centuries, home to the Louvre and the Eiffel Tower."])
    assert p[0] > 0.5
    assert LengthReading.load(shipped("fast-crm")).probs(["Keep the replies for this test tiny."]).shape == (1, 3)
    criteria_lexicon._lexicon_row.cache_clear()


def test_the_recipe_file_sets_every_field_and_refuses_unknown_ones(tmp_path):
    from dataclasses import fields
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[1] / "configs" / "keyword_reader.yaml"
    assert set(yaml.safe_load(path.read_text())) == {f.name for f in fields(KeywordReaderConfig)}
    cfg = KeywordReaderConfig.from_yaml(path, ["epochs=3"])
    assert cfg.epochs == 3 and cfg.layers == (-1, -3) and cfg.train == ("artifacts/data/train.jsonl",)
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 2\nwidth: 9\n")
    with pytest.raises(ValueError, match=r"bad.yaml: unknown field\(s\) \['width'\]"):
        KeywordReaderConfig.from_yaml(bad)
