"""Train the fast CRM on paper-format preference pairs (CPU, minutes).

Criteria noise is redrawn every epoch from a generator seeded by (seed, epoch): irrelevant criteria
are added (``add_prob``), and extra criteria dropped while at least one remains. Ties are not
trained on. Early stopping watches dev accuracy; the best epoch's weights are kept. Optional
``distill`` pairs (paper JSONL with the full pairwise CRM's probability that A wins in ``p_a``, as
``scripts/crm_fidelity.py`` writes them) are soft targets that teach the fast model to imitate the
full CRM where labelled data says nothing; a fresh random ``distill_per_epoch`` of them joins each
epoch, without criteria noise (the target belongs to exactly those criteria).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.crm.answer_bank import AnswerBank
from usl.crm.criteria_encoder import CriteriaEncoder
from usl.crm.fast_model import FastCRM, FastCRMConfig, as_tensor, criteria_inputs, split_sign
from usl.crm.formatting import judged_texts
from usl.crm.criterion_reader import DOMAIN, LENGTH, OTHER, CriterionReader, Kind, read_readings
from usl.crm.register import RegisterConfig, RegisterStack, fit_register
from usl.crm.static_embed import StaticEmbedder, fit_idf
from usl.crm.style_scorer import DIR as STYLE_DIR
from usl.crm.style_scorer import RegisterBasis, StyleScorer, read_table, text_key
from usl.data.paper_jsonl import read_samples
from usl.types import DataError, PreferenceSample

log = logging.getLogger(__name__)


@dataclass
class FastTrainConfig:
    train: list[str] = field(default_factory=list, metadata={"help": "Training JSONL files (paper format)."})
    dev: list[str] = field(default_factory=list, metadata={"help": "Dev JSONL files for early stopping."})
    out: str = field(default="artifacts/fast-crm", metadata={"help": "Output directory for weights + card."})
    epochs: int = field(default=12, metadata={"help": "Maximum epochs."})
    batch_size: int = field(default=256, metadata={"help": "Pairs per step."})
    lr: float = field(default=2e-3, metadata={"help": "AdamW learning rate of the scorer."})
    encoder_lr: float = field(default=0.0, metadata={"help": "Learning rate of the criteria tower's LoRA (0 = frozen)."})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank of the criteria tower."})
    weight_decay: float = field(default=1e-4, metadata={"help": "AdamW weight decay."})
    hidden: int = field(default=128, metadata={"help": "Hidden width of the scorer."})
    add_prob: float = field(default=0.3, metadata={"help": "Per-sample probability of adding irrelevant criteria."})
    drop_prob: float = field(default=0.2, metadata={"help": "Per-sample probability of dropping extra criteria."})
    reword_prob: float = field(default=0.5, metadata={"help": "Per-sample probability of replacing its criteria "
                                                           "by other training wordings of the same family."})
    patience: int = field(default=3, metadata={"help": "Epochs without dev improvement before stopping."})
    seed: int = field(default=0, metadata={"help": "Seed for init, shuffling and noise."})
    distill: list[str] = field(default_factory=list,
                               metadata={"help": "Distillation JSONL: pairs labelled by the full CRM (p_a)."})
    distill_per_epoch: int = field(default=20000, metadata={"help": "Distillation pairs drawn per epoch."})
    distill_weight: float = field(default=1.0, metadata={"help": "Loss weight of a distillation pair."})
    distill_criteria_only: bool = field(default=False, metadata={
        "help": "Distillation pairs train only the criteria side: how criteria read the answers. The answer "
                "vectors and the quality head then learn from labelled pairs alone."})
    register_prefix: str = field(default="domain_", metadata={
        "help": "Criteria families starting with this prefix label answers (the winner of each such pair is "
                "written in the family's style) for the register scorer, whose scores become answer features "
                "(register.py). '' = no register scorer."})
    style_scorer: str = field(default="", metadata={
        "help": "Directory written by `usl train-style`: its style scorer's scores become answer features after "
                "the register scorer's, its cross-fitted scores (heldout.npz) stand in for the styled training "
                "answers, and its scores.npz saves scoring the training answers on the CPU. '' = none."})
    length_reader: str = field(default="", metadata={
        "help": "Directory written by `usl train-reader`: its length reader's P(shorter), P(longer) become criterion "
                "features and the direction of the length prior; its cross-fitted readings (heldout.json) stand in "
                "for the wordings it was trained on. '' = none (the keyword reading gives the direction)."})
    domain_reader: str = field(default="", metadata={
        "help": "Directory written by `usl train-reader --kind domain`: its domain reader's P(style) become criterion "
                "features and weigh the style prior; its cross-fitted readings (heldout.json) stand in for the "
                "wordings it was trained on. '' = none."})
    other_reader: str = field(default="", metadata={
        "help": "Directory written by `usl train-reader --kind other`: its reader's P(other) (a register no answer "
                "scorer knows) weighs, when judging, a criterion's cosine term against its learned terms "
                "(other_boost, other_damp). It is read by no trained layer. '' = none."})
    other_boost: float = field(default=64.0, metadata={
        "help": "With an other-register reader: a criterion's cosine term is multiplied by "
                "1 + other_boost * P(other)."})
    other_damp: float = field(default=1.0, metadata={
        "help": "... and its learned terms by 1 - other_damp * P(other), in [0, 1]."})
    other_gate: bool = field(default=False, metadata={
        "help": "With an other-register reader and a domain or length reader: P(other) is weighed by the domain "
                "reader's P(none) and twice the length reader's P(none) (capped at 1), so that a criterion read as "
                "a style the scorers know, or as a length wish, does not lean."})
    register_basis: str = field(default="", metadata={
        "help": "Directory written by `usl train-style --registers ... --known ...`: with an other-register "
                "reader, a criterion read as other also favours the answer written more strongly in some register "
                "(the mean of its standardised basis scores, times basis_boost * P(other)). Attached after "
                "training: it changes no trained weight. '' = none."})
    basis_boost: float = field(default=32.0, metadata={
        "help": "With a register basis: the weight of its term for a criterion read as other."})
    score_prior: bool = field(default=True, metadata={
        "help": "With a domain reader and style (or register) scores: a criterion's P(style) also weighs that "
                "style's own score with one learned weight >= 0 (the style-score prior)."})
    tune_wordings: list[str] = field(default_factory=list, metadata={
        "help": "Wordings files (as for `usl train-reader`) of domain styles no training pair is worded with: "
                "after training, the dev file's domain pairs are reworded with them and the style-score prior's "
                "factor is the one of BOOSTS that judges them best. The domain reader's cross-fitted readings "
                "stand in for its reading of them, so to both they are new wordings."})
    oversample: dict = field(default_factory=lambda: {"human/": 3},
                             metadata={"help": "Source prefix -> how many times its samples appear per epoch."})

    def __post_init__(self) -> None:
        for name in ("distill_per_epoch", "distill_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 0")
        for name in ("other_boost", "basis_boost"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 0")
        if self.other_gate and not (self.other_reader and (self.domain_reader or self.length_reader)):
            raise ValueError("other_gate needs other_reader and a domain_reader or length_reader: their P(none) "
                             "weighs P(other)")
        if self.register_basis and not self.other_reader:
            raise ValueError("register_basis needs other_reader: the other-register reader's P(other) weighs it")
        for name in ("add_prob", "drop_prob", "reword_prob", "other_damp"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be a probability in [0, 1]")


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


BOOSTS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)  # factors of the style-score prior tried by --tune-wordings


def _tuning_wordings(files: Sequence[str], train_files: Sequence[str]) -> dict[str, list[str]]:
    """family -> wordings of ``files`` (read as the domain reader's wordings files are), less the criteria
    library's held-out wordings (those word the evaluation pairs)."""
    from usl.crm.criterion_reader import library_held_out, read_wordings

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
                      seed: int, per_pair: int = 3) -> dict:
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
                   [dv.family[i] for i in rows], np.zeros(len(rows), bool))
    model.eval()
    accuracy = {}
    for boost in BOOSTS:
        model.cfg.score_boost = boost
        with torch.inference_mode():
            logits = torch.cat([_batch_logits(model, bank, x, sub, np.arange(s, min(s + 512, len(rows))),
                                              crit[s:s + 512], sign[s:s + 512]) for s in range(0, len(rows), 512)])
        accuracy[boost] = float(np.mean((logits.numpy() > 0) == (sub.y > 0.5)))
    model.cfg.score_boost = max(BOOSTS, key=lambda b: (accuracy[b], -b))  # the smallest of the best
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
    distill: np.ndarray      # (n,) bool: a soft target from the full CRM


def _read_distill(path: str) -> list[PreferenceSample]:
    """Distillation pairs; each must carry the full CRM's P(A wins) in ``p_a``."""
    samples = read_samples(path)
    for s in samples:
        p = s.meta_value("p_a")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise DataError(f"sample {s.idx!r}: a distillation pair needs the full CRM's probability that "
                            f"A wins, in [0, 1]; got {p!r}", path=path, field="p_a")
    return samples


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
    from usl.data.io import read_json

    return [(m, read_json(m)) for f in train_files if (m := Path(f).parent / "manifest.json").exists()]


def _check_reader_split(reader_dir: str, train_files: list[str]) -> None:
    """A reader trained on one split of the criteria library would have read the wordings another split
    holds out for evaluation: refuse a reader whose library seed differs from the training data's, and
    one that read a criteria family the training data holds out whole (``--holdout-family``)."""
    from usl.data.io import read_json

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


def _encode(samples: list[PreferenceSample], bank: AnswerBank, crit_index: dict[str, int],
            n_distill: int = 0) -> _Encoded:
    """The last ``n_distill`` samples are distillation pairs: their target is ``p_a``."""
    q, ra, rb = zip(*(judged_texts(s.prompt, s.model_a, s.model_b) for s in samples)) if samples else ((), (), ())
    a, b = bank.rows(list(q), list(ra)), bank.rows(list(q), list(rb))
    n_lab = len(samples) - n_distill
    y = np.array([{"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[s.preference] for s in samples[:n_lab]]
                 + [s.meta_value("p_a") for s in samples[n_lab:]], np.float32)
    crit, sign = [], []
    for s in samples:
        parts = [split_sign(c) for c in s.criteria]
        crit.append([crit_index[t] for t, _ in parts])
        sign.append([g for _, g in parts])
    return _Encoded(a, b, y, crit, sign, [s.source for s in samples], [str(s.meta_value("family", "")) for s in samples],
                    np.arange(len(samples)) >= n_lab)


def _batch_logits(model: FastCRM, bank: AnswerBank, E, enc: _Encoded, idx: np.ndarray,
                  crit: list[list[int]], sign: list[list[float]], frozen_answers: bool = False) -> torch.Tensor:
    """E: a (n_criteria, d) tensor of criterion embeddings, or a function ids -> embeddings.
    ``frozen_answers``: distillation pairs train only the criteria side (see FastTrainConfig)."""
    rows, inv = np.unique(np.concatenate([enc.a[idx], enc.b[idx]]), return_inverse=True)
    A = model.answer_repr(as_tensor(bank.r[rows]), as_tensor(bank.feats[rows]), as_tensor(bank.cos_q[rows]))
    n = len(idx)
    flat = [c for cs in crit for c in cs]
    ucrit, cinv = np.unique(np.asarray(flat, dtype=np.int64), return_inverse=True)
    C = model.criteria_repr(E(ucrit) if callable(E) else E[torch.from_numpy(ucrit)])
    pair = np.repeat(np.arange(n), [len(cs) for cs in crit])
    return model.pair_logits(C, A, torch.from_numpy(inv[:n]), torch.from_numpy(inv[n:]),
                             torch.from_numpy(cinv), torch.tensor([g for gs in sign for g in gs]),
                             torch.from_numpy(pair), n,
                             held=torch.from_numpy(enc.distill[idx]) if frozen_answers else None)


def _foreign_pools(enc: _Encoded, n_crit: int) -> dict[str, np.ndarray]:
    """Per labelled source, the criteria never used by that source: "unrelated" criteria for noise.

    Criteria that only distillation pairs use are never drawn: they were written to cover what the
    labelled families talk about ("Keep it short."), so they are not unrelated to any of them.
    """
    used: dict[str, set[int]] = {}
    labelled: set[int] = set()
    for cs, src, dist in zip(enc.crit, enc.source, enc.distill):
        if not dist:
            used.setdefault(src, set()).update(cs)
            labelled.update(cs)
    distill_only = {c for cs, dist in zip(enc.crit, enc.distill) if dist for c in cs} - labelled
    return {src: np.setdiff1d(np.arange(n_crit), np.fromiter(u | distill_only, dtype=np.int64))
            for src, u in used.items()}


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
        if enc.distill[i]:
            crit.append(cs)
            sign.append(gs)
            continue
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


def _register_basis(where: str) -> RegisterBasis:
    """The style scorer of a `usl train-style --registers` directory, as a register basis (checked before
    any training: it is attached after)."""
    scorer = StyleScorer.load(where)
    if scorer is None:
        raise FileNotFoundError(f"{where}: no {STYLE_DIR}/ (write one with `usl train-style --registers`)")
    try:
        return RegisterBasis.of(scorer)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def train_fast(cfg: FastTrainConfig, cache_dir: Path) -> dict:
    torch.manual_seed(cfg.seed)
    train = [s for f in cfg.train for s in read_samples(f)]
    dev = [s for f in cfg.dev for s in read_samples(f)]
    distill = [s for f in cfg.distill for s in _read_distill(f)]
    log.info("fast CRM: %d train, %d dev, %d distillation samples", len(train), len(dev), len(distill))
    t0 = time.time()
    # the readers first: a missing or mismatched one fails before minutes of encoding
    readers: dict[str, CriterionReader | None] = {"length": None, "domain": None, "other": None}
    readings: dict[str, dict[str, np.ndarray]] = {}
    for kind, where in ((LENGTH, cfg.length_reader), (DOMAIN, cfg.domain_reader)):
        if where:
            readers[kind.name], readings[kind.name] = _reader(kind, where, cfg.train)
    if cfg.other_reader:  # read by no trained layer, it must not change the training either: building its
        with torch.random.fork_rng():  # heads draws from the seeded generator before their weights load
            readers["other"], readings["other"] = _reader(OTHER, cfg.other_reader, cfg.train)
    basis = _register_basis(cfg.register_basis) if cfg.register_basis else None
    if cfg.tune_wordings and not (cfg.domain_reader and cfg.score_prior):
        raise ValueError("tune_wordings tunes the style-score prior: it needs a domain reader and score_prior")
    pool = _tuning_wordings(cfg.tune_wordings, cfg.train) if cfg.tune_wordings else {}

    static = StaticEmbedder(cache_dir / "static")
    answers = list(dict.fromkeys(x for s in train for x in judged_texts(s.prompt, s.model_a, s.model_b)[1:]))
    static.idf = fit_idf(static.token_ids(answers), static.table.shape[0])
    register, held = _register(train, cfg)
    bank = AnswerBank(static, register=register, register_overrides=held)
    crit_texts = sorted({split_sign(c)[0] for s in train + distill + dev for c in s.criteria})
    crit_index = {t: i for i, t in enumerate(crit_texts)}
    tune = cfg.encoder_lr > 0
    encoder = CriteriaEncoder(lora_r=cfg.lora_r, trainable=tune)
    tr, dv = _encode(train + distill, bank, crit_index, len(distill)), _encode(dev, bank, crit_index)
    log.info("encoded %d answers, %d criteria in %.0f s", len(bank), len(crit_texts), time.time() - t0)

    names = bank.feature_names
    model = FastCRM(FastCRMConfig(hidden=cfg.hidden, n_features=len(names), features=names,
                                  reader=LENGTH.features if readers["length"] else (),
                                  domain=DOMAIN.features if readers["domain"] else (),
                                  score_prior=_score_prior(names) if readers["domain"] and cfg.score_prior else (),
                                  other=OTHER.features if readers["other"] else ()),
                    vocab_size=len(static.idf), register=register, reader=readers["length"],
                    domain_reader=readers["domain"], other_reader=readers["other"])
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

    train_idx = np.flatnonzero((tr.y != 0.5) & ~tr.distill)
    reps = np.array([max([f for p, f in cfg.oversample.items() if src.startswith(p)] or [1]) for src in tr.source])
    train_idx = np.repeat(train_idx, reps[train_idx])
    distill_idx = np.flatnonzero(tr.distill)
    n_distill = min(cfg.distill_per_epoch, len(distill_idx))
    weight = torch.from_numpy(np.where(tr.distill, cfg.distill_weight, 1.0).astype(np.float32))
    pools = _foreign_pools(tr, len(crit_texts))
    wordings = _family_wordings(tr)
    steps = cfg.epochs * ((len(train_idx) + n_distill + cfg.batch_size - 1) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[g["lr"] for g in groups], total_steps=max(steps, 1),
                                                pct_start=0.05)
    loss_fn = nn.BCEWithLogitsLoss(reduction="none")
    curve, best, best_state, best_enc, bad = [], -1.0, None, None, 0
    E_frozen = None if tune else all_criteria()
    for epoch in range(cfg.epochs):
        model.train()
        erng = np.random.default_rng([cfg.seed, epoch])
        idx_epoch = np.concatenate([train_idx, erng.choice(distill_idx, n_distill, replace=False)])
        order = _grouped_order(tr, idx_epoch, erng) if tune else erng.permutation(idx_epoch)
        losses = []
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            crit, sign = _noisy(tr, idx, erng, pools, cfg, wordings)
            logits = _batch_logits(model, bank, batch_criteria if tune else E_frozen, tr, idx, crit, sign,
                                   frozen_answers=cfg.distill_criteria_only)
            w = weight[torch.from_numpy(idx)]
            loss = (loss_fn(logits, torch.from_numpy(tr.y[idx])) * w).sum() / w.sum()
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
    tuned = _tune_score_boost(model, bank, encoder, dv, pool, readings, cfg.seed) if pool else None
    if readers["other"] is not None:  # judging only: no training pair asks for a register no scorer knows
        model.cfg.other_boost, model.cfg.other_damp = cfg.other_boost, cfg.other_damp
        model.cfg.other_gate = cfg.other_gate
    if basis is not None:
        model.attach_basis(basis, cfg.basis_boost)
    report = {"config": asdict(cfg), "curve": curve, "best_dev_accuracy": best, "n_train": len(train),
              "n_distill": len(distill), "score_boost": tuned,
              "n_dev": len(dev), "seconds": round(time.time() - t0, 1)}
    model.save(cfg.out, extra=report)
    if tune:
        encoder.save_adapter(cfg.out)
    (Path(cfg.out) / "training.json").write_text(json.dumps(report, indent=2))
    return report
