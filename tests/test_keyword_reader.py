"""The keyword reader: the criteria lexicon's keyword axes, learned, and read by the judge in its place."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix
from usl.fast.criteria_reading import _norm, library_held_out_set
from usl.fast.keyword_reader import KEYWORD_DIR, KeywordReader, KeywordReaderConfig, _head, agreement, corpus, fit
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.weights import shipped

ROOT = Path(__file__).resolve().parents[1]
TINY = KeywordReaderConfig(criteria_reader=str(ROOT / "configs" / "criteria_reader.yaml"), pairs=20, embedded=20,
                           hidden=8, epochs=2, batch=8)


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


def test_weights_whose_keyword_reader_another_lexicon_taught_are_refused(tmp_path, monkeypatch):
    from usl.fast.model import FastCRM, FastCRMConfig

    FastCRM(FastCRMConfig(hidden=8, lexicon_fingerprint=lexicon_fingerprint())).save(tmp_path)
    reader = fit(TINY, ["Keep it short.", "Explain in depth."])
    reader.save(tmp_path)
    assert FastCRM.load(tmp_path) is not None
    cfg = json.loads((tmp_path / KEYWORD_DIR / "config.json").read_text())
    (tmp_path / KEYWORD_DIR / "config.json").write_text(json.dumps(cfg | {"taught_by": "0" * 16}))
    with pytest.raises(ValueError, match="keyword reader was taught by a criteria lexicon.*usl train-keywords"):
        FastCRM.load(tmp_path)
    (tmp_path / KEYWORD_DIR / "config.json").write_text(json.dumps(cfg))
    with monkeypatch.context() as m:  # the code's lexicon edited since: refused, keyword reader or not
        from usl.fast import lexicon_probe

        m.setattr(lexicon_probe, "lexicon_fingerprint", lambda: "f" * 16)
        with pytest.raises(ValueError, match="criteria lexicon whose reading differs"):
            FastCRM.load(tmp_path)


def test_the_shipped_reader_reads_held_out_wordings_as_the_lexicon_does():
    reader = KeywordReader.load(shipped("fast-crm"))
    assert reader is not None and reader.taught_by == lexicon_fingerprint()
    got = agreement(reader, [x.text for x in library_held_out_set(0)])
    assert got["texts"] > 150
    assert got["short"] >= 0.95 and got["long"] >= 0.95 and got["negation"] >= 0.95, got


def test_the_judge_reads_keyword_axes_with_the_reader_not_the_lexicon(tmp_path, monkeypatch):
    """The shipped judge's criteria tower and length reader take their keyword features from the keyword
    reader: on a criterion the two read differently, the judge's input row holds the reader's axes, not the
    lexicon's; and a wish for brevity still prefers the short answer."""
    from usl.judges.fast import FastJudge
    from usl.types import Criteria

    judge = FastJudge(home=str(tmp_path))
    assert judge.model.keywords is not None and judge.model.reader.keywords is judge.model.keywords
    text = "Keep it short. I don't have time to read an essay, and this test knows it."
    rows = []
    real = judge.model.criteria_repr
    monkeypatch.setattr(judge.model, "criteria_repr", lambda x: rows.append(x) or real(x))
    p = judge.judge_matrix(Criteria((text,)), ["What is the capital of France?"],
                           ["The capital of France is Paris."],
                           ["The capital of France is Paris, a city on the Seine that has been the country's political, "
                            "economic and cultural centre for centuries, home to the Louvre and the Eiffel Tower."])
    assert p[0] > 0.5
    dim, long = judge.model.cfg.dim, LEXICON_AXES.index("long")
    axes = rows[0][0, dim:dim + len(LEXICON_AXES)]
    np.testing.assert_allclose(axes, judge.model.keywords.matrix([text])[0], atol=1e-6)
    assert axes[long] < 0 < lexicon_matrix([text])[0, long]  # the lexicon counts the essay as a wish for length


def test_the_memo_keeps_every_text_of_a_call_when_it_is_emptied(monkeypatch):
    reader = KeywordReader(TINY, {}, "x")
    monkeypatch.setattr(reader, "states", lambda texts, pad_to=None: (np.zeros((len(texts), 1, 1)), None))
    monkeypatch.setattr(reader, "from_states", lambda h, m: np.ones((len(h), len(LEXICON_AXES)), np.float32))
    reader._memo = {f"t{i}": np.zeros(len(LEXICON_AXES), np.float32) for i in range(50_000)}
    got = reader.matrix(["t0", "new"] + [f"n{i}" for i in range(200)])
    assert got.shape == (202, len(LEXICON_AXES)) and got[0].sum() == 0 and got[1].sum() == len(LEXICON_AXES)
    assert "new" in reader._memo


def test_training_needs_the_evaluation_pairs_it_must_hold_out(tmp_path):
    from dataclasses import replace

    with pytest.raises(FileNotFoundError, match="no evaluation pairs"):
        corpus(replace(TINY, eval_dir=str(tmp_path)))


def test_the_recipe_file_sets_every_field_and_refuses_unknown_ones(tmp_path):
    from dataclasses import fields

    import yaml

    path = Path(__file__).resolve().parents[1] / "configs" / "keyword_reader.yaml"
    assert set(yaml.safe_load(path.read_text())) == {f.name for f in fields(KeywordReaderConfig)}
    cfg = KeywordReaderConfig.from_yaml(path, ["epochs=3"])
    assert cfg.epochs == 3 and cfg.layers == (-1, -3) and cfg.train == ("artifacts/data/train.jsonl",)
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 2\nwidth: 9\n")
    with pytest.raises(ValueError, match=r"bad.yaml: unknown field\(s\) \['width'\]"):
        KeywordReaderConfig.from_yaml(bad)
