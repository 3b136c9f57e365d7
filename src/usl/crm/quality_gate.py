"""How much each criterion asks for answer quality: the gate between the fast judge and the quality reader.

The default judge's decision is

    logit(A over B) = (1 - p) * fast(c; A, B) + p * alpha * Q(A, B),    p = (1/k) * sum_c g(c),
    g(c) = sigmoid(w . [e_c, s_c] + b)

``fast`` is the fast CRM's criteria reading (``fast_model.py``), ``Q`` the quality reader's reading of the
pair (``judges/quality.py``, stored per pair), ``e_c`` the criterion's sentence embedding (the fast judge's
own MiniLM pass) and ``s_c`` its sign (+1 a like, -1 "Avoid: ..."). ``g(c)`` in [0, 1] is the share of the
decision criterion c gives to quality: "The answer is helpful and accurate" should lean on ``Q``, "Be
concise" on the fast reading, and a list that mixes them in proportion; ``alpha > 0`` puts ``Q`` on the
fast reading's scale, so quality never argues for the worse answer.

``w``, ``b`` and ``alpha`` are learned, not set: :func:`fit` maximises the likelihood of labelled pairs
whose criteria are general (the label is the better answer), about style, length or domain (the label
follows the criteria, whatever ``Q`` says), or both, with an L2 penalty on ``w``. ``usl quality fit-gate`` runs it on a dev file; the result is ``quality_gate.json``
beside the fast CRM's weights, recording which reader it was fitted for.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
GATE_FILE = "quality_gate.json"


@dataclass(frozen=True)
class QualityGate:
    """``w``: (d + 1,) over [embedding, sign]; ``reader``: the judge spec whose readings it weighs and
    ``reader_identity`` the identity it was fitted on."""

    w: tuple[float, ...]
    b: float
    alpha: float
    reader: str
    reader_identity: str
    fitted_on: dict

    def shares(self, emb: np.ndarray, signs: np.ndarray) -> np.ndarray:
        """g(c) for each criterion: ``emb`` (k, d), ``signs`` (k,) -> (k,) in [0, 1]."""
        x = np.concatenate([emb, signs[:, None]], 1) @ np.asarray(self.w) + self.b
        return 1.0 / (1.0 + np.exp(-x))

    def save(self, folder: Path) -> None:
        (folder / GATE_FILE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> QualityGate | None:
        path = folder / GATE_FILE
        if not path.is_file():
            return None
        try:
            d = json.loads(path.read_text())
            return cls(tuple(float(x) for x in d["w"]), float(d["b"]), float(d["alpha"]), str(d["reader"]),
                       str(d["reader_identity"]), dict(d.get("fitted_on", {})))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a quality gate ({e})") from None


def fit(emb: list[np.ndarray], signs: list[np.ndarray], fast_logit: np.ndarray, q: np.ndarray, y: np.ndarray, *,
        l2: float = 1e-2, steps: int = 300) -> tuple[np.ndarray, float, float, float]:
    """``emb[i]`` (k_i, d) and ``signs[i]`` (k_i,): sample i's criteria; ``fast_logit``, ``q`` (n,): the two
    readings of A over B; ``y`` (n,) 1 where A is preferred. Returns (w, b, alpha, final mean log-loss)."""
    import torch

    d = emb[0].shape[1] + 1
    x = torch.tensor(np.concatenate([np.concatenate([e, s[:, None]], 1) for e, s in zip(emb, signs)]),
                     dtype=torch.float64)
    owner = torch.tensor(np.repeat(np.arange(len(emb)), [len(s) for s in signs]))
    k = torch.tensor([len(s) for s in signs], dtype=torch.float64)
    off, qq = torch.tensor(fast_logit, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)
    yy = torch.tensor(y, dtype=torch.float64)
    w = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    a = torch.zeros((), dtype=torch.float64, requires_grad=True)       # alpha = softplus(a) + 0: > 0
    opt = torch.optim.LBFGS([w, b, a], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")

    def loss_fn():
        g = torch.sigmoid(x @ w + b)
        share = torch.zeros(len(k), dtype=torch.float64).index_add(0, owner, g) / k
        logit = (1 - share) * off + share * torch.nn.functional.softplus(a) * qq
        return torch.nn.functional.binary_cross_entropy_with_logits(logit, yy) + l2 * (w[:-1] ** 2).sum()

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        final = float(loss_fn())
        alpha = float(torch.nn.functional.softplus(a))
    return w.detach().numpy(), float(b.detach()), alpha, final


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


def fit_from_predictions(fast: dict, quality: dict, encode, *, l2: float = 1e-3) -> tuple[np.ndarray, float, float, dict]:
    """Fit on the samples both prediction sets hold: ``fast`` of the fast judge, ``quality`` of the reader
    (``read_predictions``); ``encode(texts) -> (k, d)`` the fast judge's criterion embedding.
    Returns (w, b, alpha, what it was fitted on)."""
    from usl.crm.fast_model import split_sign
    from usl.data.pairs.general import QUALITY_CRITERIA

    keys = sorted(k for k in fast if k in quality)
    if not keys:
        raise ValueError("the two prediction files share no sample (file and idx)")
    crit = [fast[k]["criteria"] or list(QUALITY_CRITERIA) for k in keys]   # no criteria: the judge's default
    parts = [[split_sign(c) for c in cs] for cs in crit]
    texts = sorted({t for ps in parts for t, _ in ps})
    table = dict(zip(texts, np.asarray(encode(texts))))
    emb = [np.stack([table[t] for t, _ in ps]) for ps in parts]
    signs = [np.array([s for _, s in ps]) for ps in parts]

    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        return float(np.log(p) - np.log1p(-p))
    fl = np.array([logit(fast[k]["p_a"]) for k in keys])
    q = np.array([logit(quality[k]["p_a"]) for k in keys])
    y = np.array([1.0 if fast[k]["preference"] == "model_a" else 0.0 for k in keys])
    w, b, alpha, loss = fit(emb, signs, fl, q, y, l2=l2)
    return w, b, alpha, {"samples": len(keys), "l2": l2, "log_loss": round(loss, 4)}
