"""How much each criterion asks for answer quality: the gate between the fast judge and the quality reader.

The default judge's decision is

    logit(A over B) = a * fast(c; A, B) + (1/k) * sum_c b_c * Q(A, B),    a = (1/k) * sum_c a_c
    a_c = softplus(u . x_c),    b_c = softplus(v . x_c),    x_c = [P(kind | c), s_c, 1]

``fast`` is the fast CRM's criteria reading (``usl.fast.model``), ``Q`` the quality reader's reading of
the pair (``usl.judges.quality``, stored per pair: ``usl.quality.bank``), ``P(kind | c)`` the criterion's kind probabilities
(``usl.fast.criterion_kinds``: length, style, domain, quality, correctness) and ``s_c`` its sign (+1 a like, -1
"Avoid: ..."). "The answer is helpful and accurate" leans on ``Q``, "Be concise" on the fast reading, and a
list that mixes them in proportion. Both weights are non-negative, so quality never argues for the worse
answer and a criterion never flips the fast reading; ``a`` also recalibrates the fast reading's confidence.

``u`` and ``v`` (14 numbers) are learned, not set: :func:`fit` maximises the likelihood of labelled pairs
whose criteria are general (the label is the better answer), about style, length or domain (the label
follows the criteria, whatever ``Q`` says), or both. They are fitted on pairs that neither the fast CRM nor
the reader trained or was selected on (``usl quality fit-gate``), and :func:`cross_fit` reports each file's
accuracy with the gate fitted on the other half of the criteria wordings. The result is
``quality_gate.json`` beside the fast CRM's weights, recording which reader it was fitted for.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from usl.data.pairs.general import QUALITY_CRITERIA

log = logging.getLogger(__name__)
GATE_FILE = "quality_gate.json"


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def inputs(kind_probs: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``x_c = [P(kind | c), s_c, 1]`` for each criterion: (k, K) and (k,) -> (k, K + 2)."""
    return np.concatenate([kind_probs, signs[:, None], np.ones((len(signs), 1))], 1)


def decision(a, b, fast, q):
    """The gate's logit from the criteria's mean weights ``a``, ``b`` and the two readings; numpy or torch."""
    return a * fast + b * q


@dataclass(frozen=True)
class QualityGate:
    """``u``, ``v``: (len(kinds) + 2,) over [kind probabilities, sign, 1]; ``reader``: the judge spec whose
    readings it weighs and ``reader_identity`` the identity it was fitted on; ``scale``: the mean |logit|
    of the fast reading and of ``Q`` on the fitting pairs (what a share of the decision is measured in);
    ``kinds_from``: the reading of kinds it was fitted on (``usl.fast.criterion_kinds.kind_reading``)."""

    kinds: tuple[str, ...]
    u: tuple[float, ...]
    v: tuple[float, ...]
    scale: tuple[float, float]
    reader: str
    reader_identity: str
    fitted_on: dict
    kinds_from: str = "kind_model"

    def weights(self, kind_probs: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a_c, b_c) for each criterion: ``kind_probs`` (k, len(kinds)), ``signs`` (k,) -> two (k,) arrays."""
        x = inputs(kind_probs, signs)
        return _softplus(x @ np.asarray(self.u)), _softplus(x @ np.asarray(self.v))

    def terms(self, kind_probs: np.ndarray, signs: np.ndarray, criteria_rows: np.ndarray, answer: np.ndarray,
              q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`decision` for n pairs, split by criterion so that a page can show each one's part: the fast
        reading's rows (k, n) and answer term (n,), each times ``a``, and ``b_c / k * Q`` (k, n); all three
        sum to ``a * fast + mean_c b_c * Q``."""
        a, b = self.weights(kind_probs, signs)
        return a.mean() * criteria_rows, (b[:, None] / len(b)) * q[None, :], a.mean() * answer

    def shares(self, kind_probs: np.ndarray, signs: np.ndarray) -> np.ndarray:
        """Each criterion's share of its decision that the quality reading holds, in [0, 1], with both
        readings at their typical size."""
        a, b = self.weights(kind_probs, signs)
        fq = b * self.scale[1]
        return fq / (a * self.scale[0] + fq)

    def save(self, folder: Path) -> None:
        (folder / GATE_FILE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> QualityGate | None:
        path = folder / GATE_FILE
        if not path.is_file():
            return None
        try:
            d = json.loads(path.read_text())
            floats = lambda xs: tuple(float(x) for x in xs)
            gate = cls(tuple(str(k) for k in d["kinds"]), floats(d["u"]), floats(d["v"]), floats(d["scale"]),
                       str(d["reader"]), str(d["reader_identity"]), dict(d.get("fitted_on", {})),
                       str(d.get("kinds_from", "kind_model")))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a quality gate ({e}); refit it with usl quality fit-gate") from None
        if len(gate.u) != len(gate.kinds) + 2 or len(gate.v) != len(gate.u) or len(gate.scale) != 2:
            raise ValueError(f"{path}: not a quality gate (weights do not match its {len(gate.kinds)} kinds)")
        return gate


@dataclass(frozen=True)
class GateSample:
    """One labelled pair: its criteria's kind probabilities (k, K) and signs (k,), the two readings of A
    over B as logits, whether A is preferred, and the eval file and criteria family it came from."""

    kind_probs: np.ndarray
    signs: np.ndarray
    fast: float
    q: float
    a_wins: bool
    file: str
    criteria: tuple[str, ...]
    family: str = ""


def fit(samples: Sequence[GateSample], *, l2: float = 1e-3, steps: int = 300) -> tuple[np.ndarray, np.ndarray, float]:
    """Maximum likelihood of the samples' labels under the gate, with an L2 penalty on the kind weights.
    Returns (u, v, final mean log-loss)."""
    import torch

    x = torch.tensor(np.concatenate([inputs(s.kind_probs, s.signs) for s in samples]), dtype=torch.float64)
    owner = torch.tensor(np.repeat(np.arange(len(samples)), [len(s.signs) for s in samples]))
    k = torch.tensor([len(s.signs) for s in samples], dtype=torch.float64)
    fast = torch.tensor([s.fast for s in samples], dtype=torch.float64)
    q = torch.tensor([s.q for s in samples], dtype=torch.float64)
    y = torch.tensor([float(s.a_wins) for s in samples], dtype=torch.float64)
    p = torch.zeros(2, x.shape[1], dtype=torch.float64)
    p[0, -1] = float(np.log(np.expm1(1.0)))        # start at a = 1, b = softplus(0): the fast reading first
    p.requires_grad_(True)
    opt = torch.optim.LBFGS([p], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")

    def loss_fn():
        ab = torch.nn.functional.softplus(x @ p.T)                                    # (rows, 2)
        m = torch.zeros(len(k), 2, dtype=torch.float64).index_add(0, owner, ab) / k[:, None]
        logit = decision(m[:, 0], m[:, 1], fast, q)
        return (torch.nn.functional.binary_cross_entropy_with_logits(logit, y)
                + l2 * (p[:, :-2] ** 2).sum())

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        final = float(loss_fn())
    w = p.detach().numpy()
    return w[0], w[1], final


def decide(u: np.ndarray, v: np.ndarray, s: GateSample) -> float:
    """The gate's logit of A over B for one sample."""
    x = inputs(s.kind_probs, s.signs)
    return float(decision(_softplus(x @ u).mean(), _softplus(x @ v).mean(), s.fast, s.q))


def wording_fold(criteria: Sequence[str]) -> int:
    """0 or 1 by a hash of the criteria wording: a fold never shares a wording with the other."""
    return zlib.crc32(" | ".join(criteria).encode()) % 2


def cross_fit(samples: Sequence[GateSample], *, l2: float = 1e-3) -> tuple[dict, dict]:
    """Each sample judged by a gate fitted on the other half of the criteria wordings. Returns
    ({file: {n, fast, quality, gate}}, {family: {n, gate}}): accuracies of the fast reading alone, of Q
    alone and of the cross-fitted gate."""
    folds = [wording_fold(s.criteria) for s in samples]
    right: list[tuple[bool, bool, bool] | None] = [None] * len(samples)
    for f in (0, 1):
        u, v, _ = fit([s for s, g in zip(samples, folds) if g != f], l2=l2)
        for i, (s, g) in enumerate(zip(samples, folds)):
            if g == f:
                right[i] = ((s.fast > 0) == s.a_wins, (s.q > 0) == s.a_wins, (decide(u, v, s) > 0) == s.a_wins)
    mean = lambda xs: round(float(np.mean(xs)), 3)
    by_file: dict[str, list] = {}
    by_family: dict[str, list] = {}
    for s, r in zip(samples, right):
        by_file.setdefault(s.file, []).append(r)
        if s.family:
            by_family.setdefault(s.family, []).append(r[2])
    files = {f: {"n": len(r), "fast": mean([x[0] for x in r]), "quality": mean([x[1] for x in r]),
                 "gate": mean([x[2] for x in r])} for f, r in sorted(by_file.items())}
    return files, {f: {"n": len(r), "gate": mean(r)} for f, r in sorted(by_family.items())}


def read_predictions(path: str | Path) -> dict[tuple[str, str], dict]:
    """``usl eval --predictions`` lines by (file, idx); .gz ok."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    out = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    d = json.loads(line)
                    out[(d["file"], d["idx"])] = d
                except (ValueError, KeyError) as e:
                    raise ValueError(f"{path}:{n}: not a predictions line ({e})") from None
    return out


def samples_from_predictions(fast: Mapping, quality: Mapping, kind_probs: Callable[[list[str]], np.ndarray],
                             split: Callable[[list[str]], list[tuple[str, float]]]) -> list[GateSample]:
    """The samples both prediction sets hold (``read_predictions``): ``fast`` of the fast judge without a
    gate, ``quality`` of the reader; ``kind_probs(criteria) -> (k, K)`` the kinds of whole criteria and
    ``split(criteria) -> [(text, sign)]`` their signs, as the judge reads them (``FastJudge.kind_probabilities``,
    ``FastScorer.split``)."""
    keys = sorted(k for k in fast if k in quality)
    if not keys:
        raise ValueError("the two prediction files share no sample (file and idx)")
    crit = [tuple(fast[k]["criteria"] or QUALITY_CRITERIA) for k in keys]   # no criteria: the judge's default
    texts = sorted({c for cs in crit for c in cs})
    table = dict(zip(texts, np.asarray(kind_probs(texts))))
    signs = {c: sign for c, (_, sign) in zip(texts, split(texts))}

    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        return float(np.log(p) - np.log1p(-p))
    return [GateSample(np.stack([table[c] for c in cs]), np.array([signs[c] for c in cs], dtype=float),
                       logit(fast[k]["p_a"]), logit(quality[k]["p_a"]), fast[k]["preference"] == "model_a", k[0], cs,
                       str(fast[k].get("family") or ""))
            for k, cs in zip(keys, crit)]


def fit_gate(samples: Sequence[GateSample], kinds: Sequence[str], reader: str, reader_identity: str, *,
             kinds_from: str = "kind_model", l2: float = 1e-3, info: dict | None = None) -> tuple[QualityGate, dict]:
    """The gate fitted on all ``samples``, with its cross-fitted figures by file recorded in ``fitted_on``;
    also returns the cross-fitted accuracy by criteria family ({family: {n, gate}})."""
    u, v, loss = fit(samples, l2=l2)
    scale = (float(np.mean([abs(s.fast) for s in samples])), float(np.mean([abs(s.q) for s in samples])))
    files, families = cross_fit(samples, l2=l2)
    fitted_on = {"samples": len(samples), "l2": l2, "log_loss": round(loss, 4), "cross_fit": files}
    gate = QualityGate(tuple(kinds), tuple(float(x) for x in u), tuple(float(x) for x in v), scale, reader,
                       reader_identity, fitted_on | (info or {}), kinds_from)
    return gate, families
