"""Train the fast CRM on paper-format preference pairs (CPU, minutes), from one recipe file.

    usl train-fast --config configs/fast_crm.yaml [--set seed=0 ...]

Criteria noise is redrawn every epoch from a generator seeded by (seed, epoch): irrelevant criteria
are added (``add_prob``), and extra criteria dropped while at least one remains. Ties are not
trained on. Early stopping watches dev accuracy; the best epoch's weights are kept. Then the two
factors set after training are chosen (the style-score prior's on reworded dev pairs, the length
prior's on bare-vs-elaborated pairs: ``usl.evaluation.length_boost``, passed in), and the weights record
the recipe, the git commit, package versions, the training files' sha256 and the criteria lexicon's fingerprint.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.fast.answer_bank import AnswerBank
from usl.fast.criteria_encoder import CriteriaEncoder
from usl.fast.criteria_lexicon import LEXICON_AXES, split_sign
from usl.fast.model import FastCRM, FastCRMConfig, as_tensor, criteria_inputs
from usl.crm.formatting import judged_texts
from usl.crm.config import YamlConfig
from usl.fast.criterion_reader import CriterionReader, DOMAIN, Kind, LENGTH, library_held_out, read_readings, read_wordings
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.fast.register import RegisterConfig, RegisterStack, fit_register
from usl.fast.static_embed import StaticEmbedder, fit_idf
from usl.fast.style_scorer import DIR as STYLE_DIR
from usl.fast.style_scorer import StyleScorer, read_table, text_key
from usl.data.io import file_sha256, read_json
from usl.data.paper_jsonl import read_samples
from usl.types import PreferenceSample
from usl.data.build_train import _git_commit

log = logging.getLogger(__name__)


def _f(default, help: str):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class FastTrainConfig(YamlConfig):
    """The default judge's recipe (``configs/fast_crm.yaml``): every part and every factor chosen after
    training. Loaded like ``usl train``'s: ``FastTrainConfig.from_yaml(path, ["seed=0"])``."""
    # --- data ----------------------------------------------------------------------------------
    train: list[str] = _f([], "Training JSONL files (paper format; `usl data build-train --out DIR`'s train.jsonl).")
    dev: list[str] = _f([], "Dev JSONL files: early stopping, and the pairs the factors are chosen on.")
    out: str = _f("artifacts/fast-crm", "Output directory for the weights.")
    oversample: dict[str, int] = _f({"human/": 3}, "Source prefix -> how many times its samples appear per epoch.")
    # --- optimisation --------------------------------------------------------------------------
    epochs: int = _f(16, "Maximum epochs.")
    patience: int = _f(6, "Epochs without a better dev accuracy before stopping.")
    batch_size: int = _f(128, "Pairs per step.")
    lr: float = _f(2e-3, "Peak AdamW learning rate of the scorer (one-cycle).")
    encoder_lr: float = _f(0.0, "Learning rate of the criteria tower's LoRA (0 = the tower stays frozen).")
    lora_r: int = _f(8, "LoRA rank of the criteria tower (only with encoder_lr > 0).")
    weight_decay: float = _f(1e-4, "AdamW weight decay.")
    hidden: int = _f(128, "Hidden width of the scorer.")
    seed: int = _f(1, "Seed for init, shuffling and noise.")
    # --- criteria noise ------------------------------------------------------------------------
    add_prob: float = _f(0.3, "Per-sample probability of adding 1-2 criteria of unrelated sources.")
    drop_prob: float = _f(0.2, "Per-sample probability of dropping some criteria of a multi-criteria sample.")
    reword_prob: float = _f(0.5, "Per-sample probability of replacing its criteria by other training wordings of "
                            "the same family.")
    # --- answer scorers (answer features) ------------------------------------------------------
    register_prefix: str = _f("domain_", "Criteria families starting with this prefix label answers (the winner of "
                              "each such pair is written in the family's style) for the n-gram register scorer, "
                              "whose scores become answer features (register.py). '' = no register scorer.")
    style_scorer: str = _f("", "Directory written by `usl train-style` (on a GPU): its style scores become answer "
                           "features after the register scorer's, its cross-fitted scores (heldout.npz) stand in "
                           "for the styled training answers and its scores.npz for the other training answers. "
                           "'' = none.")
    # --- criterion readers (criterion features) -------------------------------------------------
    length_reader: str = _f("", "Directory written by `usl train-reader`: its P(shorter), P(longer) become criterion "
                            "features and the direction of the length prior; its cross-fitted readings "
                            "(heldout.json) stand in for the wordings it was trained on. '' = the keyword reading "
                            "gives the direction.")
    domain_reader: str = _f("", "Directory written by `usl train-reader --kind domain`: its P(style) become criterion "
                            "features and weigh the style-score prior. '' = none.")
    lexicon: list[str] = _f(list(LEXICON_AXES), "The keyword features (axes of usl.fast.criteria_lexicon) beside a "
                            "criterion's embedding in the scorer's input; [] = none (the readers may still read "
                            "keywords).")
    score_prior: bool = _f(True, "With a domain reader and style (or register) scores: a criterion's P(style) also "
                           "weighs that style's own score with one learned weight >= 0 (the style-score prior).")
    # --- factors chosen after training ---------------------------------------------------------
    tune_wordings: list[str] = _f([], "Wordings files (as for `usl train-reader`) of domain styles no training pair "
                                  "is worded with: the dev file's domain pairs are reworded with them and the "
                                  "style-score prior's factor (score_boost) is the one of score_boosts that judges "
                                  "them best. [] = factor 1.")
    score_boosts: list[float] = _f([1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0],
                                   "Factors of the style-score prior tried with tune_wordings.")
    length_tune_data: str = _f("", "Paper JSONL of bare-vs-elaborated pairs under length criteria from training "
                               "queries (`usl data build-train --terse-per-query 6`'s train.jsonl): the length "
                               "prior's factor (length_boost) is chosen on them. '' = factor 1.")
    length_tune_source: str = _f("length/alpaca_terse", "Only the samples of length_tune_data with this source.")
    length_boosts: list[float] = _f([1.0, 1.5, 2.0, 3.0, 4.0], "Factors of the length prior tried: the smallest "
                                    "with the best accuracy on length_tune_data among those that keep the dev "
                                    "accuracy of every kind of pair within length_tolerance of factor 1's.")
    length_tolerance: float = _f(0.005, "Largest fall of the dev accuracy of any kind of pair (human, general, "
                                 "style, domain, length) that a length factor may cost.")

    def __post_init__(self) -> None:
        self._coerce_fields()
        for name in ("add_prob", "drop_prob", "reword_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be a probability in [0, 1]")
        for name in ("score_boosts", "length_boosts"):
            if not getattr(self, name) or min(getattr(self, name)) <= 0:
                raise ValueError(f"{name}={getattr(self, name)}: needs factors > 0")
        if not isinstance(self.oversample, dict) or not all(isinstance(v, int) and v >= 1
                                                            for v in self.oversample.values()):
            raise ValueError(f"oversample={self.oversample!r}: expected source prefix -> a count >= 1")
        unknown = [a for a in self.lexicon if a not in LEXICON_AXES]
        if unknown:
            raise ValueError(f"lexicon={self.lexicon}: no keyword axis {unknown} (the axes: {', '.join(LEXICON_AXES)})")
        if self.tune_wordings and not (self.domain_reader and self.score_prior):
            raise ValueError("tune_wordings tunes the style-score prior: it needs a domain reader (domain_reader) "
                             "and score_prior")


def _score_prior(names: Sequence[str]) -> tuple[str, ...]:
    """The answer features the style-score prior reads, one per domain reader style: the style scorer's
    score if the answers have one for it, else the register scorer's, else "" (a style the scorers never
    saw, in a build that holds its family out: no prior for it). () if no style has a score."""
    styles = DOMAIN.labels[1:]
    got = tuple(next((p + s for p in ("style_domain_", "register_domain_") if p + s in names), "") for s in styles)
    missing = [s for s, f in zip(styles, got) if not f]
    if missing:
        log.info("no style or register score for %s: no style-score prior for it", ", ".join(missing))
    return got if any(got) else ()


def _tuning_wordings(files: Sequence[str], train_files: Sequence[str]) -> dict[str, list[str]]:
    """family -> wordings of ``files`` (read as the domain reader's wordings files are), less the criteria
    library's held-out wordings (those word the evaluation pairs)."""
    seeds = {data.get("seed", 0) for _, data in _manifests(train_files)}
    # compared as the readers read them (what split_sign leaves), as `usl train-reader` does
    held = {split_sign(t)[0] for s in seeds or {0} for t in library_held_out(s)}
    pool: dict[str, list[str]] = {}
    for f in files:
        for text, label in read_wordings(f, "domain"):
            if label and split_sign(text)[0] not in held:
                pool.setdefault(f"domain_{DOMAIN.labels[label]}", []).append(text)
    if not pool:
        raise ValueError(f"{', '.join(files)}: no wordings of a domain style (keys domain_academy, ...)")
    return pool


def _tune_score_boost(model: FastCRM, bank: AnswerBank, encoder: CriteriaEncoder, dv: _Encoded,
                      pool: Mapping[str, list[str]], readings: Mapping[str, Mapping[str, np.ndarray]],
                      seed: int, boosts: Sequence[float], per_pair: int = 3) -> dict:
    """Choose ``model.cfg.score_boost``: each dev domain pair, judged under ``per_pair`` wordings of its
    family drawn from ``pool`` (read as the readers' cross-fitted readings where they have them)."""
    if not model.cfg.score_prior:
        log.info("no style-score prior to tune (the answers have no style or register scores)")
        return {"score_boost": None}
    rng = np.random.default_rng([seed, 7])
    idx = np.array([i for i, fam in enumerate(dv.family) if fam in pool and dv.y[i] != 0.5], dtype=np.int64)
    if not len(idx):
        raise ValueError("--tune-wordings: the dev file has no domain pairs of the wordings' families")
    crit, sign, rows = [], [], []
    index: dict[str, int] = {}  # criterion text -> its row among the tuning criteria
    for i in idx:
        for w in rng.choice(pool[dv.family[i]], size=per_pair):
            t, g = split_sign(str(w))
            crit.append([index.setdefault(t, len(index))])
            sign.append([g])
            rows.append(i)
    texts = list(index)
    rows = np.array(rows)
    encoder.eval()
    with torch.inference_mode():
        x = criteria_inputs(model, texts, encoder(texts), readings)
    sub = _Encoded(dv.a[rows], dv.b[rows], dv.y[rows], crit, sign, [dv.source[i] for i in rows],
                   [dv.family[i] for i in rows])
    model.eval()
    accuracy = {}
    for boost in boosts:
        model.cfg.score_boost = boost
        with torch.inference_mode():
            logits = torch.cat([_batch_logits(model, bank, x, sub, np.arange(s, min(s + 512, len(rows))),
                                              crit[s:s + 512], sign[s:s + 512]) for s in range(0, len(rows), 512)])
        accuracy[boost] = float(np.mean((logits.numpy() > 0) == (sub.y > 0.5)))
    model.cfg.score_boost = max(boosts, key=lambda b: (accuracy[b], -b))  # the smallest of the best
    log.info("style-score prior: factor %.1f (accuracy on %d reworded dev pairs: %s)", model.cfg.score_boost,
             len(rows), {b: round(a, 3) for b, a in accuracy.items()})
    return {"score_boost": model.cfg.score_boost, "pairs": len(rows), "wordings": len(texts),
            "accuracy": {str(b): a for b, a in accuracy.items()}}


@dataclass
class _Encoded:
    a: np.ndarray            # (n,) answer rows
    b: np.ndarray
    y: np.ndarray            # (n,) 1.0 if A preferred, 0.0 if B, 0.5 tie
    crit: list[list[int]]    # criterion ids per sample
    sign: list[list[float]]
    source: list[str]
    family: list[str]


def styled_answers_by_query(samples: list[PreferenceSample], prefix: str) -> dict[str, dict[str, str]]:
    """query -> {family: answer text}, from the winners of pairs whose criteria family starts with
    ``prefix`` (a domain-style pair is won by the answer written in the criteria's style); queries with
    answers in two styles or more."""
    groups: dict[str, dict[str, str]] = {}
    for s in samples:
        family = str(s.meta_value("family", ""))
        if not prefix or not family.startswith(prefix) or s.preference == "tie":
            continue
        q, ra, rb = judged_texts(s.prompt, s.model_a, s.model_b)
        # keyed by the query: `group` names a pair, and one answer is in several pairs
        groups.setdefault(q, {})[family] = ra if s.preference == "model_a" else rb
    return {q: g for q, g in groups.items() if len(g) > 1}


def styled_answer_groups(samples: list[PreferenceSample], prefix: str) -> list[dict[str, str]]:
    """The dicts of ``styled_answers_by_query``: one family -> answer text per query."""
    return list(styled_answers_by_query(samples, prefix).values())


def _register(samples: list[PreferenceSample], cfg: FastTrainConfig) -> tuple[RegisterStack | None, dict]:
    """The answer scorers (n-gram register, style) and the cross-fitted scores of the answers they were
    fitted on, answer text -> the stack's scores."""
    groups = styled_answer_groups(samples, cfg.register_prefix)
    if not groups:
        if cfg.register_prefix:
            log.info("no %s* pairs in the training data: no register scorer", cfg.register_prefix)
        if cfg.style_scorer:
            raise ValueError(f"style_scorer={cfg.style_scorer!r} needs {cfg.register_prefix or 'styled'}* pairs in "
                             "the training data")
        return None, {}
    labels = tuple(sorted({label for g in groups for label in g}))
    scorer, held = fit_register(groups, RegisterConfig(labels=labels), seed=cfg.seed)
    log.info("register scorer: %d labels (%s) fitted on %d queries", len(labels), ", ".join(labels), len(groups))
    if not cfg.style_scorer:
        return RegisterStack([scorer]), held
    style = StyleScorer.load(cfg.style_scorer)
    if style is None:
        raise FileNotFoundError(f"{cfg.style_scorer}: no {STYLE_DIR}/ (write one with `usl train-style`)")
    if style.cfg.labels != labels:
        raise ValueError(f"{cfg.style_scorer}: style scorer labels {style.cfg.labels} differ from the training "
                         f"data's {labels}")
    d = Path(cfg.style_scorer)
    style_held = read_table(d / "heldout.npz", len(labels))
    if (d / "scores.npz").exists():
        style.lookup = read_table(d / "scores.npz", len(labels))
    fitted = {t for g in groups if len(set(g.values())) > 1 for t in g.values()}  # what fit_style trains on
    missing = [t for t in fitted if text_key(t) not in style_held]
    if missing:
        raise ValueError(f"{d / 'heldout.npz'}: no cross-fitted scores for {len(missing)} styled training answers "
                         f"(e.g. {missing[0][:60]!r}); was the style scorer fitted on this training data?")
    log.info("style scorer: %s (%d cross-fitted answers, %d known scores)", d, len(style_held), len(style.lookup))
    rest = [t for t in held if text_key(t) not in style_held]  # answers of groups it could not learn from
    style_held.update((text_key(t), v) for t, v in zip(rest, style.scores(rest)))
    return RegisterStack([scorer, style]), {t: np.concatenate([v, style_held[text_key(t)]]) for t, v in held.items()}


def _reader(kind: Kind, reader_dir: str, train_files: list[str]) -> tuple[CriterionReader, dict[str, np.ndarray]]:
    """The reader of ``kind`` written in ``reader_dir`` by `usl train-reader`, and its cross-fitted readings."""
    reader = CriterionReader.load(reader_dir, kind.name)
    if reader is None:
        raise FileNotFoundError(f"{reader_dir}: no {kind.dir}/ (write one with `usl train-reader --kind {kind.name}`)")
    readings = read_readings(Path(reader_dir) / "heldout.json", kind.name)
    _check_reader_split(reader_dir, train_files)
    log.info("%s reader: %s (%d cross-fitted readings)", kind.name, reader_dir, len(readings))
    return reader, readings


def _manifests(train_files: Sequence[str]) -> list[tuple[Path, dict]]:
    """The manifest of each training file's build (`usl data build-train`), where it has one."""
    return [(m, read_json(m)) for f in train_files if (m := Path(f).parent / "manifest.json").exists()]


def _check_reader_split(reader_dir: str, train_files: list[str]) -> None:
    """A reader trained on one split of the criteria library would have read the wordings another split
    holds out for evaluation: refuse a reader whose library seed differs from the training data's, and
    one that read a criteria family the training data holds out whole (``--holdout-family``)."""
    info = Path(reader_dir) / "training.json"
    got = read_json(info) if info.exists() else {}
    seed = got.get("library_seed")
    for manifest, data in _manifests(train_files):
        data_seed = data.get("seed")
        if seed is not None and data_seed is not None and seed != data_seed:
            raise ValueError(f"{info}: the reader read the criteria library split with seed {seed}, and "
                             f"{manifest} was built with seed {data_seed}: retrain the reader with "
                             f"`usl train-reader --library-seed {data_seed}`")
        family = (data.get("config") or {}).get("holdout_family")
        if info.exists() and family and family not in got.get("holdout_family", []):
            raise ValueError(f"{info}: the reader read the wordings of {family}, which {manifest} holds out "
                             f"whole: retrain the reader with `usl train-reader --holdout-family {family}`")


def _encode(samples: list[PreferenceSample], bank: AnswerBank, crit_index: dict[str, int]) -> _Encoded:
    q, ra, rb = zip(*(judged_texts(s.prompt, s.model_a, s.model_b) for s in samples)) if samples else ((), (), ())
    a, b = bank.rows(list(q), list(ra)), bank.rows(list(q), list(rb))
    y = np.array([{"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[s.preference] for s in samples], np.float32)
    crit, sign = [], []
    for s in samples:
        parts = [split_sign(c) for c in s.criteria]
        crit.append([crit_index[t] for t, _ in parts])
        sign.append([g for _, g in parts])
    return _Encoded(a, b, y, crit, sign, [s.source for s in samples], [str(s.meta_value("family", "")) for s in samples])


def _batch_logits(model: FastCRM, bank: AnswerBank, E, enc: _Encoded, idx: np.ndarray,
                  crit: list[list[int]], sign: list[list[float]]) -> torch.Tensor:
    """E: a (n_criteria, d) tensor of criterion embeddings, or a function ids -> embeddings."""
    rows, inv = np.unique(np.concatenate([enc.a[idx], enc.b[idx]]), return_inverse=True)
    A = model.answer_repr(as_tensor(bank.r[rows]), as_tensor(bank.feats[rows]), as_tensor(bank.cos_q[rows]))
    n = len(idx)
    flat = [c for cs in crit for c in cs]
    ucrit, cinv = np.unique(np.asarray(flat, dtype=np.int64), return_inverse=True)
    C = model.criteria_repr(E(ucrit) if callable(E) else E[torch.from_numpy(ucrit)])
    pair = np.repeat(np.arange(n), [len(cs) for cs in crit])
    return model.pair_logits(C, A, torch.from_numpy(inv[:n]), torch.from_numpy(inv[n:]),
                             torch.from_numpy(cinv), torch.tensor([g for gs in sign for g in gs]),
                             torch.from_numpy(pair), n)


def _foreign_pools(enc: _Encoded, n_crit: int) -> dict[str, np.ndarray]:
    """Per source, the criteria never used by that source: "unrelated" criteria for noise."""
    used: dict[str, set[int]] = {}
    for cs, src in zip(enc.crit, enc.source):
        used.setdefault(src, set()).update(cs)
    return {src: np.setdiff1d(np.arange(n_crit), np.fromiter(u, dtype=np.int64)) for src, u in used.items()}


def _family_wordings(enc: _Encoded) -> dict[str, list[tuple[int, float]]]:
    """Per criteria family, every (criterion, sign) its training samples use."""
    out: dict[str, set] = {}
    for cs, gs, fam in zip(enc.crit, enc.sign, enc.family):
        if fam:
            out.setdefault(fam, set()).update(zip(cs, gs))
    return {f: sorted(v) for f, v in out.items()}


def _noisy(enc: _Encoded, idx: np.ndarray, rng: np.random.Generator, pools: dict[str, np.ndarray],
           cfg: FastTrainConfig, wordings: dict[str, list[tuple[int, float]]] | None = None):
    crit, sign = [], []
    batch_salt = int(rng.integers(0, 1 << 30))
    for i in idx:
        cs, gs = list(enc.crit[i]), list(enc.sign[i])
        words = (wordings or {}).get(enc.family[i])
        if words and len(words) > len(cs) and rng.random() < cfg.reword_prob:
            pick = rng.choice(len(words), size=len(cs), replace=False)
            cs, gs = [words[k][0] for k in pick], [words[k][1] for k in pick]
        if len(cs) > 1 and rng.random() < cfg.drop_prob:
            keep = sorted(rng.choice(len(cs), size=int(rng.integers(1, len(cs))), replace=False))
            cs, gs = [cs[k] for k in keep], [gs[k] for k in keep]
        pool = pools.get(enc.source[i])
        if pool is not None and len(pool) > 24:
            pool = pool[(batch_salt + np.arange(24) * 7919) % len(pool)]  # a small per-batch pool
        if pool is not None and len(pool) and rng.random() < cfg.add_prob:
            extra = int(rng.integers(1, max(2, len(cs) // 2 + 1) + 1))
            cs += [int(c) for c in rng.choice(pool, size=extra)]
            gs += [1.0] * extra
        crit.append(cs)
        sign.append(gs)
    return crit, sign


def _grouped_order(enc: _Encoded, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shuffle, but keep samples that share their first criterion together.

    The criteria tower runs forward and backward over every distinct criterion of a batch; grouping
    cuts that from hundreds of texts per batch to tens (4-10x faster steps on a CPU), while the
    groups themselves still arrive in a fresh random order every epoch.
    """
    groups: dict[int, list[int]] = {}
    for i in rng.permutation(idx):
        groups.setdefault(enc.crit[i][0] if enc.crit[i] else -1, []).append(int(i))
    keys = list(groups)
    return np.asarray([i for k in rng.permutation(len(keys)) for i in groups[keys[k]]], dtype=np.int64)


def evaluate(model: FastCRM, bank: AnswerBank, E: torch.Tensor, enc: _Encoded) -> dict:
    model.eval()
    with torch.inference_mode():
        idx = np.arange(len(enc.y))
        logits = torch.cat([_batch_logits(model, bank, E, enc, idx[i:i + 2048], enc.crit[i:i + 2048],
                                          enc.sign[i:i + 2048]) for i in range(0, len(idx), 2048)])
    p = logits.numpy()
    mask = enc.y != 0.5
    correct = ((p > 0) == (enc.y > 0.5))[mask]
    by_src: dict[str, list[bool]] = {}
    for s, c in zip(np.asarray(enc.source)[mask], correct):
        by_src.setdefault(s, []).append(bool(c))
    return {"accuracy": float(correct.mean()) if mask.any() else float("nan"),
            "n": int(mask.sum()), "by_source": {k: float(np.mean(v)) for k, v in sorted(by_src.items())}}


def provenance(cfg: FastTrainConfig) -> dict:
    """What made the weights: the recipe, the code (git commit, package versions), the data (sha256 of
    every file read) and the criteria lexicon's reading (``lexicon_probe``)."""
    import importlib.metadata as md

    versions = {}
    for pkg in ("usl", "torch", "numpy", "transformers", "safetensors"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    files = [*cfg.train, *cfg.dev, *cfg.tune_wordings, *([cfg.length_tune_data] if cfg.length_tune_data else [])]
    return {"recipe": cfg.to_dict(), "git_commit": _git_commit(), "versions": versions,
            "data_sha256": {f: file_sha256(f) for f in dict.fromkeys(files)},
            "lexicon_fingerprint": lexicon_fingerprint()}


# (weights folder, data, guard files, factors, tolerance, source=, home=) -> what was measured; it writes the
# chosen factor into the weights' config.json (``usl.evaluation.length_boost.tune_length_boost``, which judges
# the saved weights, so it is passed in from above the judges)
LengthTuner = Callable[..., dict]


def train_fast(cfg: FastTrainConfig, cache_dir: Path, home: str | None = None,
               tune_length: LengthTuner | None = None) -> dict:
    """Train, choose the factors, save to ``cfg.out``. ``home``: the data home whose answer caches the
    length factor's judge uses (``cache_dir`` is its cache folder); ``tune_length`` chooses that factor when
    the recipe names ``length_tune_data``."""
    torch.manual_seed(cfg.seed)
    if cfg.length_tune_data and tune_length is None:
        raise ValueError("length_tune_data needs a length tuner (usl.evaluation.length_boost.tune_length_boost)")
    for f in [*cfg.train, *cfg.dev, *cfg.tune_wordings, *([cfg.length_tune_data] if cfg.length_tune_data else [])]:
        if not Path(f).is_file():
            raise FileNotFoundError(f"{f}: not found (a file the recipe names; `make judge` builds the data first)")
    if cfg.length_tune_data and not cfg.dev:
        raise ValueError("length_tune_data needs dev files: they guard the other kinds of pair")
    train = [s for f in cfg.train for s in read_samples(f)]
    dev = [s for f in cfg.dev for s in read_samples(f)]
    log.info("fast CRM: %d train, %d dev samples", len(train), len(dev))
    t0 = time.time()
    # the readers first: a missing or mismatched one fails before minutes of encoding
    readers: dict[str, CriterionReader | None] = {"length": None, "domain": None}
    readings: dict[str, dict[str, np.ndarray]] = {}
    for kind, where in ((LENGTH, cfg.length_reader), (DOMAIN, cfg.domain_reader)):
        if where:
            readers[kind.name], readings[kind.name] = _reader(kind, where, cfg.train)
    pool = _tuning_wordings(cfg.tune_wordings, cfg.train) if cfg.tune_wordings else {}

    static = StaticEmbedder(cache_dir / "static")
    answers = list(dict.fromkeys(x for s in train for x in judged_texts(s.prompt, s.model_a, s.model_b)[1:]))
    static.idf = fit_idf(static.token_ids(answers), static.table.shape[0])
    register, held = _register(train, cfg)
    bank = AnswerBank(static, register=register, register_overrides=held)
    crit_texts = sorted({split_sign(c)[0] for s in train + dev for c in s.criteria})
    crit_index = {t: i for i, t in enumerate(crit_texts)}
    tune = cfg.encoder_lr > 0
    encoder = CriteriaEncoder(lora_r=cfg.lora_r, trainable=tune)
    tr, dv = _encode(train, bank, crit_index), _encode(dev, bank, crit_index)
    log.info("encoded %d answers, %d criteria in %.0f s", len(bank), len(crit_texts), time.time() - t0)

    names = bank.feature_names
    model = FastCRM(FastCRMConfig(hidden=cfg.hidden, n_features=len(names), features=names,
                                  reader=LENGTH.features if readers["length"] else (),
                                  domain=DOMAIN.features if readers["domain"] else (),
                                  score_prior=_score_prior(names) if readers["domain"] and cfg.score_prior else (),
                                  lexicon=tuple(a for a in LEXICON_AXES if a in cfg.lexicon),
                                  lexicon_fingerprint=lexicon_fingerprint()),
                    vocab_size=len(static.idf), register=register, reader=readers["length"],
                    domain_reader=readers["domain"])
    model.idf.copy_(torch.from_numpy(static.idf))
    model.feat_mean.copy_(torch.from_numpy(bank.feats.mean(0)))
    model.feat_std.copy_(torch.from_numpy(bank.feats.std(0) + 1e-4))
    groups = [{"params": list(model.parameters()), "lr": cfg.lr}]
    if tune:
        groups.append({"params": [p for p in encoder.parameters() if p.requires_grad], "lr": cfg.encoder_lr})
    opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)

    # keyword features (and the readers'), computed once: they do not train
    lex = criteria_inputs(model, crit_texts, torch.zeros((len(crit_texts), 0)), readings)

    def all_criteria() -> torch.Tensor:
        encoder.eval()
        with torch.inference_mode():
            out = torch.cat([encoder(crit_texts[i:i + 256]) for i in range(0, len(crit_texts), 256)])
        encoder.train(tune)
        return torch.cat([out.clone(), lex], -1)

    def batch_criteria(ids: np.ndarray) -> torch.Tensor:
        return torch.cat([encoder([crit_texts[i] for i in ids]), lex[torch.from_numpy(ids)]], -1)

    train_idx = np.flatnonzero(tr.y != 0.5)
    reps = np.array([max([f for p, f in cfg.oversample.items() if src.startswith(p)] or [1]) for src in tr.source])
    train_idx = np.repeat(train_idx, reps[train_idx])
    pools = _foreign_pools(tr, len(crit_texts))
    wordings = _family_wordings(tr)
    steps = cfg.epochs * ((len(train_idx) + cfg.batch_size - 1) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[g["lr"] for g in groups], total_steps=max(steps, 1),
                                                pct_start=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    curve, best, best_state, best_enc, bad = [], -1.0, None, None, 0
    E_frozen = None if tune else all_criteria()
    for epoch in range(cfg.epochs):
        model.train()
        erng = np.random.default_rng([cfg.seed, epoch])
        order = _grouped_order(tr, train_idx, erng) if tune else erng.permutation(train_idx)
        losses = []
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            crit, sign = _noisy(tr, idx, erng, pools, cfg, wordings)
            logits = _batch_logits(model, bank, batch_criteria if tune else E_frozen, tr, idx, crit, sign)
            loss = loss_fn(logits, torch.from_numpy(tr.y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        ev = evaluate(model, bank, all_criteria(), dv) if len(dv.y) else {"accuracy": float("nan")}
        curve.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)), "dev_accuracy": ev["accuracy"],
                      "dev_by_source": ev.get("by_source", {})})
        log.info("epoch %d: loss %.4f dev acc %.4f %s", epoch + 1, curve[-1]["train_loss"], ev["accuracy"],
                 ev.get("by_source", {}))
        if ev["accuracy"] > best:
            best, bad = ev["accuracy"], 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
            best_enc = {k: v.clone() for k, v in encoder.state_dict().items()}
        else:
            bad += 1
            if bad >= cfg.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
        encoder.load_state_dict(best_enc)
    tuned = (_tune_score_boost(model, bank, encoder, dv, pool, readings, cfg.seed, cfg.score_boosts)
             if pool else None)
    report = {"curve": curve, "best_dev_accuracy": best, "n_train": len(train), "n_dev": len(dev),
              "score_boost": tuned, "seconds": round(time.time() - t0, 1), **provenance(cfg)}
    model.save(cfg.out, extra=report)
    if tune:
        encoder.save_adapter(cfg.out)
    if cfg.length_tune_data:
        report["length_boost"] = tune_length(cfg.out, cfg.length_tune_data, cfg.dev, cfg.length_boosts,
                                             cfg.length_tolerance, source=cfg.length_tune_source, home=home)
    report["seconds"] = round(time.time() - t0, 1)
    (Path(cfg.out) / "training.json").write_text(json.dumps(report, indent=2))
    return report
