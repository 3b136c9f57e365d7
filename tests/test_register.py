"""The register scorer (answer style scores learned within a query) and its place in the fast CRM."""

import json
from pathlib import Path

import numpy as np
import pytest

from crm_fixtures import STYLE_TOPICS, domain_rows, styled_groups
from usl.fast.register import RegisterConfig, RegisterScorer, fit_register

TOPICS = STYLE_TOPICS


def test_register_scores_rank_the_answer_written_in_the_style_and_cross_fit_every_answer():
    groups = styled_groups(TOPICS)
    scorer, held = fit_register(groups, RegisterConfig(labels=("domain_academy", "domain_business")))
    assert scorer.names == ("register_domain_academy", "register_domain_business")
    assert set(held) == {t for g in groups for t in g.values()}
    for g in groups:  # held-out scores (from folds that never saw this query) still rank the styles
        assert held[g["domain_academy"]][0] > held[g["domain_business"]][0]
        assert held[g["domain_business"]][1] > held[g["domain_academy"]][1]
    # a query on a topic it never saw
    s = scorer.scores(["Studies in the literature suggest that further research on kites is warranted.",
                       "Kites drive revenue growth and deliver value for our customers."])
    assert s.shape == (2, 2) and s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]


def test_register_scorer_round_trips_and_a_bad_file_is_named(tmp_path):
    scorer, _ = fit_register(styled_groups(TOPICS[:8]), RegisterConfig(labels=("domain_academy", "domain_business")))
    texts = ["The literature suggests further research.", "Revenue growth for customers."]
    scorer.save(tmp_path)
    back = RegisterScorer.load(tmp_path)
    assert back.cfg == scorer.cfg
    np.testing.assert_allclose(back.scores(texts), scorer.scores(texts), atol=2e-2)  # stored as float16
    assert RegisterScorer.load(tmp_path / "elsewhere") is None
    (tmp_path / "register.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="register.npz"):
        RegisterScorer.load(tmp_path)


def test_fit_register_refuses_no_data():
    with pytest.raises(ValueError, match="no labelled answers"):
        fit_register([], RegisterConfig(labels=("a",)))


def test_train_fast_fits_a_register_scorer_on_domain_pairs_and_the_judge_uses_it(tmp_path, home):
    from usl.fast.model import FastCRM
    from usl.fast.train import FastTrainConfig, train_fast
    from usl.judges.fast import FastJudge

    rows = domain_rows(TOPICS)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "model"
    train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(out), epochs=2, batch_size=16,
                               hidden=8), Path(home) / "cache")
    assert (out / "register.npz").exists()
    model = FastCRM.load(out)
    assert model.cfg.features[-2:] == ("register_domain_academy", "register_domain_business")
    judge = FastJudge(out, home=home)
    assert judge.bank.register is not None and judge.bank.feats.shape[1] == len(model.cfg.features)

    (out / "register.npz").unlink()  # the weights expect register features: a clear error, not a crash
    with pytest.raises(ValueError, match="register.npz is missing"):
        FastCRM.load(out)

    none = tmp_path / "plain"
    train_fast(FastTrainConfig(train=[str(train)], dev=[str(train)], out=str(none), epochs=1, batch_size=16,
                               hidden=8, register_prefix=""), Path(home) / "cache")
    assert not (none / "register.npz").exists() and FastCRM.load(none).register is None
