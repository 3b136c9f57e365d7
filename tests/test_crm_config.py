"""TrainConfig: YAML + overrides, closed sets, help on every field; the shipped configs load."""

from pathlib import Path

import pytest

from usl.crm.config import TrainConfig, parse_overrides

REPO = Path(__file__).resolve().parents[1]


def test_every_field_has_help():
    helps = TrainConfig.help()
    assert helps and all(len(h) > 10 for h in helps.values())


def test_yaml_then_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("loss: pointwise\nlearning_rate: 1e-5\nmax_length: 512\n")
    cfg = TrainConfig.from_yaml(p, ["data_noise=random", "learning_rate=2e-4", "lora_target_modules=[q_proj, v_proj]",
                                    "swap_positions=false"])
    assert (cfg.loss, cfg.max_length, cfg.data_noise, cfg.swap_positions) == ("pointwise", 512, "random", False)
    assert cfg.learning_rate == pytest.approx(2e-4)
    assert cfg.lora_target_modules == ["q_proj", "v_proj"]
    assert TrainConfig.from_yaml(None, [cfg.to_yaml() and "loss=pairwise"]).loss == "pairwise"


@pytest.mark.parametrize("override,match", [
    ("loss=listwise", r"loss='listwise': expected one of \['pairwise', 'pointwise'\]"),
    ("data_noise=shuffle", "data_noise"),
    ("max_length=1.5", "expected an integer"),
    ("learning_rate=fast", "expected a number"),
    ("swap_positions=maybe", "expected true/false"),
    ("lr=1e-4", r"unknown config key\(s\) \['lr'\]"),
    ("max_length=16", "too small"),
    ("head_lr=-1e-3", "head_lr=-0.001: must be >= 0"),
])
def test_bad_values_raise(override, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig.from_yaml(None, [override])


def test_override_syntax():
    assert parse_overrides(["a=1", "b=x=y", "c="]) == {"a": 1, "b": "x=y", "c": ""}
    with pytest.raises(ValueError, match="not key=value"):
        parse_overrides(["novalue"])


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="config file not found"):
        TrainConfig.from_yaml("/nonexistent.yaml")


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs").glob("crm_*.yaml")))
def test_shipped_configs_load(name):
    cfg = TrainConfig.from_yaml(REPO / "configs" / name)
    assert cfg.loss in ("pairwise", "pointwise")
