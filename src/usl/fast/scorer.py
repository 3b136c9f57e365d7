"""The fast CRM judging in numpy: its weights read as arrays, each forward of ``model.FastCRM`` layer for
layer, no torch (the formulas are in ``model.py``'s docstring).

``model.FastCRM`` is the torch module that trains; judging a board needs only its forward passes over a
few criteria and the benchmark's answer vectors, and importing torch for them cost a `usl rank` over a
second (issue 47). ``read_weights`` is the one reader of a weights folder (config, checks, registers,
readers) for both. ``tests/test_fast_crm.py`` holds ``FastScorer`` to ``FastCRM`` on the shipped weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix
from usl.fast.criterion_reader import DOMAIN, LENGTH, CriterionReader
from usl.fast.features import FEATURES
from usl.fast.keyword_reader import KeywordReader
from usl.fast.numpy_nn import State, load_state, mlp, softplus
from usl.fast.register import RegisterScorer, RegisterStack
from usl.fast.sign_reader import SignReader, learned_readers, splitter
from usl.fast.style_scorer import StyleScorer

ADAPTER_DIR = "criteria_lora"  # a weights folder's criteria-tower adapter (``criteria_encoder.py``), if any


@dataclass
class FastCRMConfig:
    dim: int = 384
    n_features: int = len(FEATURES)
    hidden: int = 128
    dropout: float = 0.1
    features: tuple[str, ...] = FEATURES
    lexicon: tuple[str, ...] = LEXICON_AXES
    reader: tuple[str, ...] = ()  # the length reader's features, after the keyword ones (criterion_reader.py)
    domain: tuple[str, ...] = ()  # the domain reader's features, after those
    # the answer features (one per domain reader style, in its order) that the style-score prior reads,
    # and a factor on that prior chosen after training on criteria worded as in no training pair
    score_prior: tuple[str, ...] = ()
    score_boost: float = 1.0
    # a factor on the length prior, chosen after training on pairs of a bare answer against one that gives
    # it at length (which no training pair holds: the learned terms never meet a one-word answer)
    length_boost: float = 1.0
    crit_noise: float = 0.02  # per-dimension Gaussian noise on criterion embeddings while training
    # what the criteria lexicon made of a fixed set of wordings when these weights were trained
    # (lexicon_probe.py); loading refuses weights whose reading differs from the code's
    lexicon_fingerprint: str | None = None


@dataclass(frozen=True)
class AnswerRepr:
    """The criteria-independent part of N answers, computed once per benchmark (arrays here, tensors
    in training)."""
    f: np.ndarray        # (N, F) standardised style features (clamped to +-6)
    z: np.ndarray        # (N, H) the answer side of the bilinear term
    quality: np.ndarray  # (N,) criterion-independent quality


@dataclass(frozen=True)
class CriteriaRepr:
    """k criteria read once, ready to score any answers."""
    u: np.ndarray        # (k, H) the criteria side of the bilinear term
    g: np.ndarray        # (k, F) weights on the style features, priors included
    length: np.ndarray   # (k,) direction of the length prior: > 0 favours longer answers


@dataclass(frozen=True)
class Weights:
    """A fast CRM weights folder, checked: what ``FastCRM.load`` and ``FastScorer.load`` build from."""
    cfg: FastCRMConfig
    vocab_size: int
    register: RegisterScorer | RegisterStack | None
    readers: dict  # "length" / "domain" -> CriterionReader or None
    state: State
    keywords: KeywordReader | None = None  # the keyword axes' reader (keyword_reader/); None: the lexicon's
    signs: SignReader | None = None  # the criteria's signs' reader (sign_reader/); None: split_sign's


def load_registers(path: str | Path) -> RegisterStack | None:
    """The answer scorers saved with a model (``path`` is the model directory), or None."""
    parts = [p for p in (RegisterScorer.load(path), StyleScorer.load(path)) if p is not None]
    return RegisterStack(parts) if parts else None


def read_weights(path: str | Path) -> Weights:
    p = Path(path)
    raw = json.loads((p / "config.json").read_text())
    raw.pop("extra", None)
    vocab = raw.pop("vocab_size", 30522)
    known = {f.name for f in fields(FastCRMConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{p / 'config.json'}: unknown field(s) {unknown} (weights of another version of the "
                         "fast CRM); rebuild them with `usl train-fast --config configs/fast_crm.yaml`")
    keywords, signs = learned_readers(p, raw.get("lexicon_fingerprint"))
    for key in ("features", "lexicon", "reader", "domain", "score_prior"):
        raw[key] = tuple(raw.get(key, ()))
    register = load_registers(p)
    readers = {}
    for kind, key in ((LENGTH, "reader"), (DOMAIN, "domain")):
        readers[kind.name] = CriterionReader.load(p, kind.name) if raw[key] else None
        if raw[key] and readers[kind.name] is None:
            raise ValueError(f"{p}: model was trained with a {kind.name} reader, and its {kind.dir}/ is missing")
    if raw["features"] != FEATURES + (register.names if register else ()):
        have = set(register.names if register else ())
        lost = [f for prefix, f in (("register_", "register.npz"), ("style_", "style_scorer/"))
                if any(n.startswith(prefix) and n not in have for n in raw["features"])]
        raise ValueError(f"{p}: model was trained with other style features"
                         f"{f' (or its {lost[0]} is missing)' if lost else ''}; retrain it")
    if raw["lexicon"] != tuple(a for a in LEXICON_AXES if a in raw["lexicon"]):
        raise ValueError(f"{p}: model was trained with other criteria keyword features; retrain it")
    for reader in readers.values():
        if reader is not None:
            reader.keywords = keywords
    return Weights(FastCRMConfig(**raw), vocab, register, readers, load_state(p / "model.safetensors"), keywords,
                   signs)


def criteria_features(readers, lexicon: tuple[str, ...], texts: list[str],
                      readings: dict[str, dict[str, np.ndarray]] | None = None,
                      keywords: KeywordReader | None = None) -> np.ndarray:
    """What follows a criterion's sentence embedding in its input row: its keyword features on the axes
    ``lexicon`` (the model's ``cfg.lexicon``: all, some or none) and, for each of ``readers`` (length,
    domain), the reader's probabilities but "none". The keyword features are ``keywords``' reading (the
    judge's, ``Weights.keywords``), else the criteria lexicon's (training: the heads learn on the teacher's
    readings of their texts, which the keyword reader learned). ``readings`` (reader kind -> text
    -> probabilities) stand in for a reader where given: the cross-fitted readings of its own training
    texts, or the default judge's reading of length (``usl.fast.length_intent.LengthReading``)."""
    keywords = keywords.matrix(texts) if keywords is not None else lexicon_matrix(texts)
    parts = [keywords if lexicon == LEXICON_AXES else keywords[:, [LEXICON_AXES.index(a) for a in lexicon]]]
    for reader in readers:
        known = (readings or {}).get(reader.kind.name, {})
        todo = [t for t in texts if t not in known]
        fresh = dict(zip(todo, reader.probs(todo))) if todo else {}
        parts.append(np.stack([(known[t] if t in known else fresh[t])[1:] for t in texts]).astype(np.float32)
                     if texts else np.zeros((0, len(reader.kind.features)), np.float32))
    return np.concatenate(parts, -1).astype(np.float32)


class FastScorer:
    """``FastCRM``'s forward passes in numpy (eval mode: no dropout, no criterion noise)."""

    def __init__(self, w: Weights):
        self.cfg = w.cfg
        self.register = w.register
        self.reader, self.domain_reader = w.readers["length"], w.readers["domain"]
        self.keywords, self.signs = w.keywords, w.signs
        self.split = splitter(w.signs)  # criteria -> [(liked or disliked text, sign)]
        self.state = w.state
        self.feat_mean, self.feat_std, self.idf = w.state["feat_mean"], w.state["feat_std"], w.state["idf"]
        self.beta = float(w.state["beta"])
        F = len(self.cfg.features)
        self.score_select = np.zeros((len(self.cfg.domain), F), np.float32)
        for i, f in enumerate(self.cfg.score_prior):
            if f:
                self.score_select[i, self.cfg.features.index(f)] = 1.0
        self._f_len = self.cfg.features.index("log_words")

    @classmethod
    def load(cls, path: str | Path) -> FastScorer:
        return cls(read_weights(path))

    @property
    def readers(self) -> tuple[CriterionReader, ...]:
        return tuple(r for r in (self.reader, self.domain_reader) if r is not None)

    def answer_repr(self, r: np.ndarray, feats: np.ndarray, cos_q: np.ndarray) -> AnswerRepr:
        """r (N, d), feats (N, F) raw, cos_q (N,) -> the criteria-independent part."""
        f = np.clip((feats - self.feat_mean) / self.feat_std, -6, 6).astype(np.float32)
        rf = np.concatenate([r.astype(np.float32), f], -1)
        quality = mlp(np.concatenate([rf, cos_q.astype(np.float32)[:, None]], -1), self.state, "quality")[:, 0]
        return AnswerRepr(f=f, z=mlp(rf, self.state, "resp_sem"), quality=quality)

    def criteria_repr(self, x: np.ndarray) -> CriteriaRepr:
        """x (k, d + n_lexicon [+ 2] [+ 4]), as ``FastCRM.criteria_repr`` reads it."""
        cfg = self.cfg
        at = cfg.dim + len(cfg.lexicon)
        lex = x[:, cfg.dim:at]
        rd, style = x[:, at:at + len(cfg.reader)], x[:, at + len(cfg.reader):]
        g = mlp(x, self.state, "crit_feat")
        if cfg.score_prior:
            g = g + softplus(float(self.state["delta"])) * cfg.score_boost * (style @ self.score_select)
        if cfg.reader:
            length = rd[:, 1] - rd[:, 0]
        elif "long" in cfg.lexicon:
            length = lex[:, cfg.lexicon.index("long")] - lex[:, cfg.lexicon.index("short")]
        else:
            length = np.zeros(x.shape[0], np.float32)
        return CriteriaRepr(u=mlp(x, self.state, "crit_sem"), g=g, length=length)

    def length_weight(self) -> float:
        return float(softplus(float(self.state["gamma"]))) * self.cfg.length_boost

    def criterion_scores(self, C: CriteriaRepr, A: AnswerRepr) -> np.ndarray:
        """(k, N): how well each answer satisfies each criterion, before signs."""
        prior = self.length_weight() * C.length[:, None] * A.f[None, :, self._f_len]
        return C.u @ A.z.T + C.g @ A.f.T + prior
