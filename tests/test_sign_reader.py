"""The sign reader: which criteria are dislikes and of what, learned from ``split_sign``; the judge reads
criteria with it and the keyword reader, and calls no rule of the criteria lexicon."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from usl.data.minilm_onnx import frozen
from usl.fast.criteria_lexicon import split_sign
from usl.fast.criteria_reading import blind_set, library_held_out_set
from usl.fast.keyword_reader import KeywordReaderConfig
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.fast.sign_reader import SIGN_DIR, SignReader, _clean, _head, _offsets, agreement, fit, keep_labels, rebuild
from usl.weights import shipped

ROOT = Path(__file__).resolve().parents[1]
TINY = KeywordReaderConfig(criteria_reader=str(ROOT / "configs" / "criteria_reader.yaml"), pairs=20, embedded=20,
                           hidden=8, sign_epochs=2, sign_recombined=400, batch=4)
TEXTS = ["Keep it short.", "No walls of text.", "Avoid: overly long answers", "I can't stand jargon.",
         "Use examples.", "Never use bullet points.", "Avoid: false or misleading claims", "Explain in depth."]


def test_the_teachers_split_is_rebuilt_from_its_word_pieces():
    """The labels the reader learns (which word pieces the disliked part keeps) give back ``split_sign``'s
    disliked part, on the library's and the blind set's dislikes."""
    texts = sorted({_clean(x.text) for x in [*library_held_out_set(0), *blind_set()]})
    dislikes = [(t, split_sign(t)[0]) for t in texts if split_sign(t)[1] < 0]
    assert len(dislikes) > 40
    spans = _offsets(frozen(), [t for t, _ in dislikes], 48)
    same = [rebuild(t, s, keep_labels(t, rest, s)) == rest for (t, rest), s in zip(dislikes, spans)]
    assert np.mean(same) >= 0.98, [d for d, ok in zip(dislikes, same) if not ok]
    assert keep_labels("No jargon", "fluff", [(0, 0), (0, 2), (3, 9), (0, 0)]) is None  # not a part of the text


def test_the_sign_corpus_adds_rare_ways_of_disliking_and_no_held_out_wording():
    from usl.fast.criteria_reading import _norm
    from usl.fast.keyword_reader import corpus
    from usl.fast.sign_reader import sign_corpus

    base, texts = set(corpus(TINY)), sign_corpus(TINY)
    added = [t for t in texts if t not in base]
    assert 300 <= len(added) <= 400
    held = {_norm(x.text) for x in library_held_out_set(0)}
    assert not held & {_norm(t) for t in texts}
    def openers(texts):
        return Counter(t[:t.rfind(rest)] for t in texts for rest, sign in [split_sign(t)]
                       if sign < 0 and t.rfind(rest) > 0 and not t[t.rfind(rest) + len(rest):].strip(" .!"))
    have, made = openers(base), openers(added)
    rare = [o for o, n in have.items() if n <= 2]
    assert len(have) > 10 and rare and all(made[o] >= 3 for o in rare), {o: made[o] for o in rare}  # as often
    unstyled = [t for t in added if t.lower().startswith(("no particular", "avoid: any special"))]
    assert unstyled and all(split_sign(t)[1] > 0 for t in unstyled)  # the exception the corpus hardly says


def test_words_are_kept_whole_from_where_the_disliked_part_begins():
    from usl.fast.sign_reader import word_keep

    text = "Don't use emojis."
    spans = [(0, 0), (0, 3), (3, 4), (4, 5), (6, 9), (10, 16), (16, 17), (0, 0)]  # don ' t use emojis .
    keep = word_keep(text, spans, [0, -2, 3, 3, 2, 1, -1, 0], [0, 1, 0, 0, 4, 0, 0, 0])
    assert rebuild(text, spans, keep) == "use emojis"  # "t" goes with "don", the final "." is dropped
    keep = word_keep(text, spans, [0, -2, 3, 3, 2, 1, -1, 0], [0, 1, 0, 0, 0, 4, 0, 0])
    assert rebuild(text, spans, keep) == "emojis"


def test_the_shipped_reader_keeps_the_users_characters_and_reads_a_bare_avoid_as_no_dislike():
    reader = SignReader.load(shipped("fast-crm"))
    got = reader.split(["Avoid:", " Avoid: the user\u2019s jargon ", "Keep it short."])
    assert got == [("Avoid:", 1.0), ("the user\u2019s jargon", -1.0), ("Keep it short.", 1.0)]


def test_a_tiny_reader_runs_the_same_in_numpy_as_in_torch_and_survives_saving(tmp_path):
    import torch

    reader = fit(TINY, TEXTS)
    head = _head(TINY)
    head.load_state_dict({k: torch.from_numpy(v) for k, v in reader.state.items()})
    h, m = reader.states(TEXTS)
    with torch.inference_mode():
        want = head(torch.from_numpy(h), torch.from_numpy(m))
    got = reader.from_states(h, m)
    np.testing.assert_allclose(got[0], want[0].numpy(), atol=1e-4)
    for a, b in zip(got[1:], want[1:]):  # per word piece: keep, start
        np.testing.assert_allclose(a * m, b.numpy() * m, atol=1e-4)
    z2 = got[0]
    h1, m1 = reader.states(TEXTS[:1])  # a text reads the same alone as padded in a batch
    np.testing.assert_allclose(reader.from_states(h1, m1)[0], z2[:1], atol=1e-4)
    got = reader.split(TEXTS)
    assert all(sign in (1.0, -1.0) and text for text, sign in got)

    reader.save(tmp_path)
    back = SignReader.load(tmp_path)
    assert back.cfg == TINY and back.taught_by == lexicon_fingerprint()
    assert SignReader.load(tmp_path / "elsewhere") is None
    (tmp_path / SIGN_DIR / "config.json").write_text("{torn")
    with pytest.raises(ValueError, match=f"{SIGN_DIR}: not a sign reader.*usl train-signs"):
        SignReader.load(tmp_path)


def test_weights_whose_sign_reader_another_lexicon_taught_are_refused(tmp_path):
    from usl.fast.keyword_reader import fit as fit_keywords
    from usl.fast.model import FastCRM, FastCRMConfig

    FastCRM(FastCRMConfig(hidden=8, lexicon_fingerprint=lexicon_fingerprint())).save(tmp_path)
    fit_keywords(TINY, TEXTS[:2]).save(tmp_path)
    fit(TINY, TEXTS[:4]).save(tmp_path)
    assert FastCRM.load(tmp_path) is not None
    cfg = json.loads((tmp_path / SIGN_DIR / "config.json").read_text())
    (tmp_path / SIGN_DIR / "config.json").write_text(json.dumps(cfg | {"taught_by": "0" * 16}))
    with pytest.raises(ValueError, match="sign reader was taught by a criteria lexicon.*usl train-signs"):
        FastCRM.load(tmp_path)


def test_the_shipped_reader_splits_held_out_wordings_as_split_sign_does():
    reader = SignReader.load(shipped("fast-crm"))
    assert reader is not None and reader.taught_by == lexicon_fingerprint()
    got = agreement(reader, [x.text for x in library_held_out_set(0)])
    assert got["texts"] > 150 and got["dislikes"] > 20
    assert got["sign"] >= 0.97 and got["split"] >= 0.95, got


def test_the_judge_reads_criteria_with_no_rule_of_the_lexicon(tmp_path, monkeypatch):
    """With every function of the criteria lexicon made to fail, in every module that holds one, the shipped
    judge still loads, judges, reads length wishes and kinds: the learned readers read criteria. And it reads
    dislikes as dislikes: under "Avoid: long answers" the short answer wins, under its like the long one."""
    from usl.fast import criteria_lexicon
    from usl.judges.fast import FastJudge
    from usl.types import Criteria

    def refuse(*args, **kwargs):
        raise AssertionError("the judge called a rule of the criteria lexicon")

    rules = {name for name in vars(criteria_lexicon) if callable(getattr(criteria_lexicon, name))
             and getattr(getattr(criteria_lexicon, name), "__module__", "") == criteria_lexicon.__name__}
    assert {"split_sign", "lexicon_matrix", "leading_negation", "dislikes_only_faults"} <= rules
    for module in [m for name, m in sys.modules.items() if name.startswith("usl")]:
        for name in rules:
            if getattr(module, name, None) is getattr(criteria_lexicon, name):
                monkeypatch.setattr(module, name, refuse)
    from usl.fast import lexicon_probe
    lexicon_probe.lexicon_fingerprint.cache_clear()
    monkeypatch.setattr(lexicon_probe, "lexicon_fingerprint", refuse)

    judge = FastJudge(home=str(tmp_path))
    assert judge.model.split(["Avoid: long answers", "No walls of text.", "Keep it short."]) == [
        ("long answers", -1.0), ("walls of text", -1.0), ("Keep it short.", 1.0)]
    q = ["What is the capital of France?"]
    short = ["The capital of France is Paris."]
    long = ["The capital of France is Paris, a city on the Seine that has been the country's political, economic and "
            "cultural centre for centuries, home to the Louvre and the Eiffel Tower, and its largest city."]
    assert judge.judge_matrix(Criteria((), ("long answers",)), q, short, long)[0] > 0.5
    assert judge.judge_matrix(Criteria(("long answers",)), q, short, long)[0] < 0.5
    reading = judge.read_criteria(Criteria(("Use examples.",), ("long answers",)))
    assert [w.side for w in reading.length if w is not None] == ["shorter"]
    assert len(judge.quality_share(Criteria(("Use examples.",), ("jargon",)))) == 2
