"""Register scores of an answer: how academic, businesslike, literary or plain it reads.

The fast CRM sees an answer as a bag of static token vectors plus a few counted style features.
That is too coarse for domain styles, whose answers to one query share most of their content and
differ in register (DSP's academy and business answers often differ in a handful of words). This
module adds one linear scorer per style label over hashed word (1-2) and character (2-5) n-grams
with TF-IDF weights, trained *pairwise within a query*: the answer written in style t must outscore
the other answers to the same query. Comparing answers to the same query cancels their shared
content, so the scorer learns the words and turns of phrase of the register itself.

Its scores become extra answer features of the fast CRM (``register_<label>``); the CRM learns how
each criterion weighs them, as it does for the other style features. Training answers get
cross-fitted scores (each fold scored by a scorer that never saw it), so the CRM does not learn to
trust scores that are perfect only on the answers they were fitted to.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

FILE = "register.npz"


def weights_fingerprint(cfg, chunks: Iterable[bytes]) -> str:
    """16 hex digits of SHA-256 over a scorer's config (a dataclass, as JSON) and its weights' bytes: what
    answer caches that hold the scorer's scores are keyed by."""
    h = hashlib.sha256(json.dumps(asdict(cfg)).encode())
    for c in chunks:
        h.update(c)
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class RegisterConfig:
    labels: tuple[str, ...]
    n_features: int = 2 ** 15   # hashed dimensions per analyzer (words, characters)
    c: float = 10.0             # inverse L2 strength of each logistic regression
    folds: int = 5              # cross-fitting folds for training answers

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"register_{label}" for label in self.labels)


def _vectorizers(n_features: int):
    from sklearn.feature_extraction.text import HashingVectorizer

    common = {"n_features": n_features, "alternate_sign": False, "norm": None}
    return (HashingVectorizer(ngram_range=(1, 2), **common),
            HashingVectorizer(analyzer="char_wb", ngram_range=(2, 5), **common))


class RegisterScorer:
    """``scores(texts)`` -> (n, len(labels)) float32: one linear register score per label."""

    def __init__(self, cfg: RegisterConfig, idf: np.ndarray, coef: np.ndarray):
        if idf.shape != (2 * cfg.n_features,) or coef.shape != (len(cfg.labels), 2 * cfg.n_features):
            raise ValueError(f"register scorer: idf {idf.shape} / coef {coef.shape} do not fit "
                             f"{len(cfg.labels)} labels x {2 * cfg.n_features} features")
        self.cfg = cfg
        self.idf = idf.astype(np.float32)
        self.coef = coef.astype(np.float32)

    @property
    def names(self) -> tuple[str, ...]:
        return self.cfg.names

    @functools.cached_property
    def fingerprint(self) -> str:
        return weights_fingerprint(self.cfg, (self.idf.tobytes(), self.coef.tobytes()))

    def load_network(self) -> None:
        """Score a made-up text: its weights are two arrays read with the model, but its first scores import
        scikit-learn's and SciPy's sparse code (about 60 MB), which a server pays at start, not in a request."""
        self.scores(["warm-up"])

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, len(self.cfg.labels)), np.float32)
        return np.asarray(_tfidf(_counts(texts, self.cfg.n_features), self.idf) @ self.coef.T, np.float32)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, out_dir: str | Path) -> None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(out / FILE, idf=self.idf.astype(np.float16), coef=self.coef.astype(np.float16),
                            config=np.array(json.dumps(asdict(self.cfg))))

    @classmethod
    def load(cls, path: str | Path) -> RegisterScorer | None:
        """The scorer saved with a model (``path`` is the model directory), or None if it has none."""
        f = Path(path) / FILE
        if not f.exists():
            return None
        try:
            z = np.load(f)
            raw = json.loads(str(z["config"]))
            cfg = RegisterConfig(**(raw | {"labels": tuple(raw["labels"])}))
            return cls(cfg, z["idf"].astype(np.float32), z["coef"].astype(np.float32))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{f}: unreadable register scorer ({e}); retrain the model") from e


def _counts(texts: Sequence[str], n_features: int):
    import scipy.sparse as sp

    words, chars = _vectorizers(n_features)
    return sp.hstack([words.transform(texts), chars.transform(texts)]).tocsr()


def _tfidf(counts, idf: np.ndarray):
    """Sublinear term frequency times idf, rows L2-normalised (sklearn's TfidfTransformer, by hand so
    that a saved idf vector is all it needs)."""
    import scipy.sparse as sp

    x = counts.astype(np.float64, copy=True)
    x.data = 1.0 + np.log(x.data)
    x = x @ sp.diags(idf.astype(np.float64))
    norms = np.sqrt(np.asarray(x.multiply(x).sum(1))).ravel()
    return sp.diags(1.0 / np.maximum(norms, 1e-12)) @ x


def _fit(groups: Sequence[Mapping[str, str]], counts, index: dict[str, int], cfg: RegisterConfig) -> RegisterScorer:
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    rows = sorted({index[t] for g in groups for t in g.values()})
    df = np.asarray((counts[rows] > 0).sum(0)).ravel()
    idf = (np.log((1 + len(rows)) / (1 + df)) + 1.0).astype(np.float32)  # sklearn's smooth idf
    x = _tfidf(counts, idf).tocsr()
    coef = np.zeros((len(cfg.labels), counts.shape[1]), np.float32)
    for j, label in enumerate(cfg.labels):
        pairs = [(index[g[label]], index[t]) for g in groups if label in g
                 for other, t in g.items() if other != label and t != g[label]]
        if not pairs:
            continue
        mine, others = map(list, zip(*pairs))
        d = x[mine] - x[others]  # the answer in the style minus another answer to the same query
        clf = LogisticRegression(C=cfg.c, fit_intercept=False, max_iter=3000)
        clf.fit(sp.vstack([d, -d]), np.r_[np.ones(d.shape[0]), np.zeros(d.shape[0])])
        coef[j] = clf.coef_[0]
    return RegisterScorer(cfg, idf, coef)


def fit_register(groups: Sequence[Mapping[str, str]], cfg: RegisterConfig,
                 seed: int = 0) -> tuple[RegisterScorer, dict[str, np.ndarray]]:
    """Fit on ``groups`` (one dict label -> answer text per query) and cross-fit their answers.

    Returns the scorer fitted on every group, and for each answer text of the groups its scores from
    the scorer of the fold that left its group out (what training the CRM should see).
    """
    texts = list(dict.fromkeys(t for g in groups for t in g.values()))
    if not texts:
        raise ValueError("register scorer: no labelled answers to fit on")
    index = {t: i for i, t in enumerate(texts)}
    counts = _counts(texts, cfg.n_features)
    full = _fit(groups, counts, index, cfg)
    k = max(2, min(cfg.folds, len(groups)))
    fold = np.random.default_rng(seed).permutation(len(groups)) % k
    held: dict[str, np.ndarray] = {}
    for f in range(k):
        part = _fit([g for g, i in zip(groups, fold) if i != f], counts, index, cfg)
        mine = list(dict.fromkeys(t for g, i in zip(groups, fold) if i == f for t in g.values()))
        for t, s in zip(mine, part.scores(mine)):
            held[t] = s
    return full, held


class RegisterStack:
    """The answer scorers a fast CRM reads, side by side: the n-gram register scorer's scores, then
    the style scorer's (``style_scorer.py``), where the model has one."""

    def __init__(self, parts: Sequence):
        if not parts:
            raise ValueError("register stack: no scorers")
        self.parts = tuple(parts)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names)

    @functools.cached_property
    def fingerprint(self) -> str:
        return hashlib.sha256("+".join(p.fingerprint for p in self.parts).encode()).hexdigest()[:16]

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        return np.concatenate([p.scores(texts) for p in self.parts], 1)

    def load_network(self) -> None:
        """Load every scorer's network (the style scorer's MiniLM), so that the first new answer pays none."""
        for p in self.parts:
            p.load_network()

    def save(self, out_dir: str | Path) -> None:
        for p in self.parts:
            p.save(out_dir)

    def set_cache_dir(self, cache_dir: str | Path) -> None:
        """Where scorers that run a network keep what they computed."""
        for p in self.parts:
            if hasattr(p, "cache_dir"):
                p.cache_dir = Path(cache_dir)
