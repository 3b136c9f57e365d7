"""What kind of wish each criterion states, and how reliably the default judge reads that kind.

A board is only as good as the judge's reading of its criteria, and that differs a lot by kind: the
default judge follows a length wish almost always, a domain style most of the time, and "is it
accurate?" barely better than a coin for facts it cannot check. So a board says, for each criterion:

- its **kind**, one of :data:`KINDS`, from a multinomial logistic regression over the criterion's
  embedding (the fast judge's criteria tower). It is fitted on the criteria library's training
  wordings (``usl/data/criteria/*.yaml``, each family declares its ``kind``), and its accuracy on
  the library's held-out wordings is recorded beside it;
- that kind's **reliability**: the default judge's accuracy on held-out eval pairs of that kind's
  families, written by ``usl quality fit-gate`` (which measures the judge with its quality gate);
- for ``correctness`` a note that a small judge cannot verify facts or code, pointing to an LLM judge.

``usl quality fit-kinds`` fits the classifier and writes ``criterion_kinds.json`` beside the fast CRM's
weights; the quality gate (``usl.quality.gate``) reads the same kind probabilities.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from usl.data.criteria import KINDS, Library
from usl.types import CriterionReading

KINDS_FILE = "criterion_kinds.json"
NOTES = {"correctness": "a small judge cannot verify facts or code; for correctness rank with an LLM judge "
                        "(--judge llm:MODEL, docs/llm_judge_local.md)"}


@dataclass(frozen=True)
class KindModel:
    """``w`` (len(kinds), d + 1): one row of weights and a bias per kind. ``reliability`` maps a kind to
    {"accuracy", "n"} of the judge on the eval files; ``fitted_on`` records the data and held-out figures."""

    kinds: tuple[str, ...]
    w: tuple[tuple[float, ...], ...]
    reliability: dict
    fitted_on: dict

    def probabilities(self, emb: np.ndarray) -> np.ndarray:
        """``emb`` (k, d) -> (k, len(kinds)), rows sum to 1."""
        w = np.asarray(self.w)
        z = emb @ w[:, :-1].T + w[:, -1]
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def read(self, texts: Sequence[str], p_kind: np.ndarray, shares: Sequence[float]) -> list[CriterionReading]:
        """One reading per criterion: ``p_kind`` (k, len(kinds)) its kind probabilities (the criteria reader's,
        or :meth:`probabilities` of its embedding), ``shares`` its share of the quality reading."""
        out = []
        for text, p, share in zip(texts, p_kind, shares):
            kind = self.kinds[int(p.argmax())]
            rel = self.reliability.get(kind, {})
            out.append(CriterionReading(text=text, kind=kind, confidence=round(float(p.max()), 3),
                                        accuracy=rel.get("accuracy"), n=int(rel.get("n", 0)),
                                        quality_share=round(float(share), 3), note=NOTES.get(kind, "")))
        return out

    def save(self, folder: Path) -> None:
        (folder / KINDS_FILE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> KindModel | None:
        path = folder / KINDS_FILE
        if not path.is_file():
            return None
        try:
            d = json.loads(path.read_text())
            return cls(tuple(d["kinds"]), tuple(tuple(float(x) for x in row) for row in d["w"]),
                       dict(d["reliability"]), dict(d.get("fitted_on", {})))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a criterion-kind model ({e})") from None


def library_wordings(library: Library, *, seed: int = 0, held_out_fraction: float = 0.2
                     ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, held_out) lists of (wording, kind), with the split ``usl data build-train`` uses."""
    train, held = [], []
    for name, fam in sorted(library.families.items()):
        split = library.split(name, seed=seed, held_out_fraction=held_out_fraction)
        train += [(w, fam.kind) for w in split.train]
        held += [(w, fam.kind) for w in split.held_out]
    return train, held


def fit_weights(x: np.ndarray, y: np.ndarray, n_kinds: int, *, l2: float = 1e-2, steps: int = 200) -> np.ndarray:
    """Multinomial logistic regression: ``x`` (n, d), ``y`` (n,) class ids -> (n_kinds, d + 1).
    Each class is weighted by the inverse of its count, so the many style wordings do not drown the few
    correctness ones."""
    import torch

    xx = torch.tensor(x, dtype=torch.float64)
    yy = torch.tensor(y)
    counts = torch.bincount(yy, minlength=n_kinds).clamp(min=1).double()
    weight = (counts.sum() / (n_kinds * counts))
    w = torch.zeros(n_kinds, x.shape[1] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")

    def loss_fn():
        z = xx @ w[:, :-1].T + w[:, -1]
        return torch.nn.functional.cross_entropy(z, yy, weight=weight) + l2 * (w[:, :-1] ** 2).sum()

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy()


def reliability_by_kind(by_family: dict, library: Library) -> dict:
    """{kind: {"accuracy", "n"}}: pair-weighted accuracy over each kind's families; ``by_family`` maps a
    family to {"n", "accuracy"} (families the library does not know are left out)."""
    hits: dict[str, float] = {}
    counts: dict[str, int] = {}
    for family, r in by_family.items():
        if family not in library or not r.get("n"):
            continue
        kind = library[family].kind
        hits[kind] = hits.get(kind, 0.0) + r["accuracy"] * r["n"]
        counts[kind] = counts.get(kind, 0) + r["n"]
    return {k: {"accuracy": round(hits[k] / counts[k], 3), "n": counts[k]} for k in KINDS if counts.get(k)}


def fit(library: Library, encode: Callable[[list[str]], np.ndarray], *, seed: int = 0, l2: float = 1e-4) -> KindModel:
    """Fit on the library's training wordings and record the accuracy on its held-out ones. The reliability
    table is filled by ``usl quality fit-gate``, which measures the judge (:func:`reliability_by_kind`)."""
    train, held = library_wordings(library, seed=seed)
    kinds = tuple(k for k in KINDS if any(kind == k for _, kind in train))
    ids = {k: i for i, k in enumerate(kinds)}
    x = np.asarray(encode([t for t, _ in train]), dtype=np.float64)
    w = fit_weights(x, np.array([ids[k] for _, k in train]), len(kinds), l2=l2)
    weights = tuple(tuple(float(v) for v in row) for row in w)
    p = KindModel(kinds, weights, {}, {}).probabilities(np.asarray(encode([t for t, _ in held]), dtype=np.float64))
    right = np.array([kinds[i] for i in p.argmax(1)]) == np.array([k for _, k in held])
    per_kind = {k: round(float(right[[kk == k for _, kk in held]].mean()), 3) for k in kinds}
    fitted_on = {"train_wordings": len(train), "held_out_wordings": len(held), "seed": seed, "l2": l2,
                 "held_out_accuracy": round(float(right.mean()), 3), "held_out_accuracy_by_kind": per_kind}
    return KindModel(kinds, weights, {}, fitted_on)


def kind_reading(reader, model: KindModel | None, encode: Callable[[list[str]], np.ndarray],
                 split: Callable[[Sequence[str]], list[tuple[str, float]]]
                 ) -> tuple[Callable[[Sequence[str]], np.ndarray], str]:
    """How a judge reads each criterion's kind, for its quality gate and its page alike: ``(kinds(criteria) ->
    (k, len(KINDS)), source)``, the source ``criteria_reader`` or ``kind_model``. Where the weights hold a
    criteria reader (``usl.fast.criteria_reading``) it reads each whole criterion; otherwise the kind model
    reads the embedding (``encode``) of each criterion less its sign, as ``split`` (the judge's sign reading,
    ``FastScorer.split``) leaves it. A gate records the source it was fitted on
    (``usl.quality.gate.QualityGate.kinds_from``)."""
    if reader is not None:
        return (lambda crit: np.asarray(reader.probabilities(list(crit))[0], dtype=np.float64)), "criteria_reader"
    if model is None:
        raise ValueError("no criteria reader and no kind model (criterion_kinds.json) to read kinds with")
    return (lambda crit: model.probabilities(encode([text for text, _ in split(crit)]))), "kind_model"
