"""The transformer CRM with its answers read once: the span-head CRM split into an answer side,
computed once per benchmark, and a criteria side, computed per criteria set in a few passes.

The span head (``span_head.py``) reads one joint pass over (criteria, query, answer A, answer B)
and scores ``MLP([c * d, q * d, d, c * dl])``, with ``d = a - b`` the difference of the two
answers' mean-pooled hidden states, ``c`` and ``q`` the criteria and query slots', ``dl`` the
answers' log token counts. Every slot attends to every other, so in principle every vector depends
on the criteria. Measured on the shipped ``crm``, the answer side mostly does not: read under
neutral criteria, with the criteria vector taken from the pair's own pass, the per-pair logits
correlate at r = 0.96 with the exact ones on "creative" (0.76 on "bulleted list", where the
answers' vectors do move with the criteria). So:

- **once per benchmark** (:meth:`FactoredCRM.pair_vectors`, 2 passes a pair: a GPU for a minute,
  a CPU for about an hour for 43 x 483 pairs): every (answer, baseline) pair is read in both
  orders under :data:`NEUTRAL` criteria, keeping ``d`` of each order, ``q`` and ``dl``;
- **per criteria set** (:meth:`FactoredCRM.criteria_vector`, :data:`CONTEXTS` passes): the
  criteria are read in a few fixed contexts and their slot vectors averaged, and the head runs on
  the stored vectors of every pair (:class:`FactoredHead`), both orders averaged as ``crm`` does.

Stored vectors are kept in a :class:`PairBank`: ``d`` projected on a fixed basis (``basis.npz``
beside the CRM, 64 of 384 dimensions), int8 codes, keyed by a digest of (query, answer, baseline).

The scores approximate ``crm``'s own; how closely is measured, not assumed
(``scripts/factored_crm.py``; figures in the crm-minilm-span model card).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from usl import atomic
from usl.crm.inference import weights_version as version

log = logging.getLogger(__name__)

NEUTRAL = ("General user preference",)
CONTEXTS = 2           # contexts the criteria are read in: each costs a pass; 4 gain a point of tau for 0.2 s more
FACTORED_DIR = "factored"
BANK_FORMAT = "usl-factored-bank/1"


def pair_key(query: str, answer: str, baseline: str) -> bytes:
    """16-byte digest of a pair, in this orientation."""
    h = hashlib.blake2b(digest_size=16)
    for t in (query, answer, baseline):
        b = t.encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def weights_version(model_dir: Path) -> str:
    """What stored vectors depend on: the CRM's weights and reading settings, not the machine's
    backbone path (``usl.crm.inference.weights_version``, portable)."""
    try:
        return version(model_dir, portable=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"{model_dir}/crm.json: cannot read ({e})") from None


@dataclass
class PairVectors:
    """Answer-side vectors of N pairs (answer, baseline), read under neutral criteria.

    ``d_ab``/``d_ba``: [N, h] pooled answer minus baseline in the order (answer, baseline), and
    baseline minus answer in the swapped order; ``q``: [N, h] the query slot (mean of both
    orders); ``dl``: [N] log token count of the answer minus the baseline's, before truncation.
    """

    d_ab: np.ndarray
    d_ba: np.ndarray
    q: np.ndarray
    dl: np.ndarray

    def __len__(self) -> int:
        return len(self.dl)


# -- the basis and the bank ---------------------------------------------------------------------
LOGIT_ROWS = 4096     # stored pairs a step of FactoredHead.logits: its temporaries stay ~4 x 6 MB
HEADROOM = 1.25       # the int8 step leaves room for coordinates 25% beyond the fitted data's


@dataclass
class Basis:
    """Where stored answer differences live: ``d ~ mean + z @ components``, and ``z`` is stored as
    int8 codes of a fixed step ``scale`` per coordinate (so banks merge without rounding again)."""

    mean: np.ndarray        # [h]
    components: np.ndarray  # [k, h], orthonormal rows
    scale: np.ndarray       # [k], the int8 step of each coordinate

    @classmethod
    def fit(cls, v: PairVectors, k: int = 64) -> Basis:
        x = np.concatenate([v.d_ab, v.d_ba]).astype(np.float64)
        mu = x.mean(0)
        _, _, vt = np.linalg.svd(x - mu, full_matrices=False)
        comp = vt[:k].astype(np.float32)
        z = (x - mu).astype(np.float32) @ comp.T
        return cls(mu.astype(np.float32), comp, (np.abs(z).max(0) * HEADROOM / 127.0).astype(np.float32))

    def save(self, path: Path) -> None:
        np.savez(path, mean=self.mean, components=self.components, scale=self.scale)

    @classmethod
    def load(cls, path: Path) -> Basis:
        try:
            z = np.load(path)
            b = cls(z["mean"].astype(np.float32), z["components"].astype(np.float32), z["scale"].astype(np.float32))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, zlib.error) as e:
            raise ValueError(f"{path}: not a factored-CRM basis ({e})") from None
        k, h = b.components.shape if b.components.ndim == 2 else (0, 0)
        if not k or b.mean.shape != (h,) or b.scale.shape != (k,) or not (b.scale > 0).all():
            raise ValueError(f"{path}: inconsistent basis (components {b.components.shape}, mean {b.mean.shape}, "
                             f"scale {b.scale.shape})")
        return b

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for a in (self.mean, self.components, self.scale):
            h.update(np.ascontiguousarray(a, np.float32).tobytes())
        return h.hexdigest()[:8]

    def encode(self, d: np.ndarray) -> np.ndarray:
        """int8 codes of ``d``'s coordinates (clipped at +-127 steps)."""
        z = (np.asarray(d, np.float32) - self.mean) @ self.components.T
        return np.clip(np.rint(z / self.scale), -127, 127).astype(np.int8)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return (codes.astype(np.float32) * self.scale) @ self.components + self.mean


def bank_version(weights: str, basis: Basis) -> str:
    """What a bank's codes mean: the CRM's weights and the basis they are coordinates in."""
    return f"{weights}-{basis.digest}"


class PairBank:
    """Stored answer-side vectors, looked up by :func:`pair_key` in either orientation.

    ``c_ab``/``c_ba``: [n, k] int8 codes of ``d`` on the :class:`Basis` (``basis.decode``);
    ``qvec``/``qrow``: one query vector per query and each pair's row in it; ``dl``: [n];
    ``version``: :func:`bank_version` (the CRM's weights and the basis).
    """

    def __init__(self, keys: np.ndarray, c_ab: np.ndarray, c_ba: np.ndarray, qvec: np.ndarray,
                 qrow: np.ndarray, dl: np.ndarray, version: str):
        self.keys, self.c_ab, self.c_ba = keys, c_ab, c_ba
        self.qvec, self.qrow, self.dl, self.version = qvec, qrow, dl, version
        self._index = {bytes(k): i for i, k in enumerate(keys)}

    @property
    def q(self) -> np.ndarray:
        """[n, h] query vector of each pair."""
        return self.qvec[self.qrow].astype(np.float32)

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def empty(cls, basis: Basis, version: str) -> PairBank:
        k, h = basis.components.shape
        c = np.zeros((0, k), np.int8)
        return cls(np.zeros((0, 16), np.uint8), c, c, np.zeros((0, h), np.float16), np.zeros(0, np.int32),
                   np.zeros(0, np.float32), version)

    @classmethod
    def build(cls, keys: Sequence[bytes], queries: Sequence[str], v: PairVectors, basis: Basis,
              version: str) -> PairBank:
        """``keys``: each pair's :func:`pair_key`; ``queries``: its query text (pairs of one query
        share one query vector, the mean of theirs). Values are rounded as they are stored."""
        first: dict[str, int] = {}
        qrow = np.array([first.setdefault(q, len(first)) for q in queries], np.int32)
        qvec = np.zeros((len(first), v.q.shape[1]), np.float64)
        np.add.at(qvec, qrow, v.q)
        qvec /= np.maximum(np.bincount(qrow, minlength=len(first)), 1)[:, None]
        return cls(np.frombuffer(b"".join(keys), np.uint8).reshape(-1, 16), basis.encode(v.d_ab),
                   basis.encode(v.d_ba), qvec.astype(np.float16), qrow,
                   v.dl.astype(np.float16).astype(np.float32), version)

    def merged(self, other: PairBank) -> PairBank:
        """Both banks' pairs (of one version); on a key both hold, this bank's entry is kept."""
        if other.version != self.version or other.c_ab.shape[1] != self.c_ab.shape[1]:
            raise ValueError(f"cannot merge banks of versions {self.version} and {other.version}")
        if not len(self):
            return other
        new = np.array([bytes(k) not in self._index for k in other.keys], bool)
        used, qrow = np.unique(other.qrow[new], return_inverse=True)      # only the query rows kept
        return PairBank(np.concatenate([self.keys, other.keys[new]]), np.concatenate([self.c_ab, other.c_ab[new]]),
                        np.concatenate([self.c_ba, other.c_ba[new]]), np.concatenate([self.qvec, other.qvec[used]]),
                        np.concatenate([self.qrow, qrow.astype(np.int32) + len(self.qvec)]),
                        np.concatenate([self.dl, other.dl[new]]), self.version)

    def save(self, path: Path) -> None:
        """Atomically (a killed save leaves the old file)."""
        atomic.savez(path, compress=True, format=np.array(BANK_FORMAT), version=np.array(self.version),
                     keys=self.keys, c_ab=self.c_ab, c_ba=self.c_ba, qvec=self.qvec, qrow=self.qrow,
                     dl=self.dl.astype(np.float16))

    @classmethod
    def load(cls, path: Path) -> PairBank:
        try:
            z = np.load(path)
            if str(z["format"]) != BANK_FORMAT:
                raise ValueError(f"format {str(z['format'])!r}, expected {BANK_FORMAT}")
            b = cls(z["keys"], z["c_ab"], z["c_ba"], z["qvec"], z["qrow"], z["dl"].astype(np.float32),
                    str(z["version"]))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, zlib.error) as e:
            raise ValueError(f"{path}: not a factored-CRM pair bank ({e})") from None
        n = len(b.keys)
        if (b.keys.shape != (n, 16) or b.c_ab.shape != b.c_ba.shape or len(b.c_ab) != n or b.c_ab.dtype != np.int8
                or b.qrow.shape != (n,) or b.dl.shape != (n,) or (n and not 0 <= b.qrow.min() <= b.qrow.max() < len(b.qvec))):
            raise ValueError(f"{path}: inconsistent pair bank (keys {b.keys.shape}, codes {b.c_ab.shape}, "
                             f"query rows {b.qrow.shape}, lengths {b.dl.shape})")
        return b

    def lookup(self, keys: Sequence[bytes], swapped_keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Row of each pair (-1: not stored) and its sign: +1 stored in this orientation, -1 stored
        the other way round (its logit is the negative: the order average is antisymmetric)."""
        rows = np.full(len(keys), -1, np.int64)
        sign = np.ones(len(keys), np.float32)
        for i, (k, ks) in enumerate(zip(keys, swapped_keys)):
            r = self._index.get(k)
            if r is None:
                r = self._index.get(ks)
                if r is not None:
                    sign[i] = -1.0
            if r is not None:
                rows[i] = r
        return rows, sign


class FactoredHead:
    """The span head on a bank's stored vectors, with everything that does not depend on the
    criteria computed once: per criteria set it costs one [n, k] x [k, hidden] product."""

    def __init__(self, head, basis: Basis, bank: PairBank):
        lin1, lin2 = head[1], head[3]            # Sequential(Dropout, Linear, GELU, Linear)
        w1 = lin1.weight.detach().float().cpu().numpy()
        h = basis.components.shape[1]
        if w1.shape[1] != 4 * h:
            raise ValueError(f"the span head reads {w1.shape[1]} features, not 4 x {h}: a basis of another "
                             "backbone, or a head without length features")
        if bank.c_ab.shape[1] != basis.components.shape[0]:
            raise ValueError(f"bank codes of {bank.c_ab.shape[1]} dimensions, basis of {basis.components.shape[0]}")
        self.wa, self._wb, self._wc, self.wd = (w1[:, i * h:(i + 1) * h] for i in range(4))
        self.b1 = lin1.bias.detach().float().cpu().numpy()
        self.w2 = lin2.weight.detach().float().cpu().numpy()[0]
        self.b2 = float(lin2.bias.detach().float().cpu().numpy()[0])
        self.basis, self.bank = basis, bank
        import torch

        self._w2 = torch.from_numpy(self.w2)
        self._u_ab, self._u_ba, self._z_ab, self._z_ba, self._dl = self._tensors(bank, 0)

    def _tensors(self, bank: PairBank, start: int) -> tuple:
        """Per stored pair from row ``start`` on: the criteria-independent part of the first layer
        (each order), the coordinates (each order) and ``dl``."""
        import torch

        qrow = bank.qrow[start:]
        out = []
        for codes in (bank.c_ab[start:], bank.c_ba[start:]):
            u = np.empty((len(codes), len(self.b1)), np.float32)
            for s in range(0, len(codes), 8192):
                d = self.basis.decode(codes[s:s + 8192])
                q = bank.qvec[qrow[s:s + 8192]].astype(np.float32)
                u[s:s + 8192] = (q * d) @ self._wb.T + d @ self._wc.T + self.b1
            out.append(torch.from_numpy(u))
        out += [torch.from_numpy(c.astype(np.float32) * self.basis.scale) for c in (bank.c_ab[start:], bank.c_ba[start:])]
        return (*out, torch.from_numpy(bank.dl[start:].astype(np.float32)))

    def extended(self, bank: PairBank) -> FactoredHead:
        """This head for ``bank``, whose first rows are this head's bank's (``PairBank.merged``
        appends): only the new rows are computed."""
        import copy

        import torch

        new = copy.copy(self)
        new.bank = bank
        fresh = self._tensors(bank, len(self.bank))
        old = (self._u_ab, self._u_ba, self._z_ab, self._z_ba, self._dl)
        new._u_ab, new._u_ba, new._z_ab, new._z_ba, new._dl = (torch.cat([o, f]) for o, f in zip(old, fresh))
        return new

    def logits(self, c: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Order-averaged logit that the stored pair's answer beats its baseline."""
        import torch

        c = np.asarray(c, np.float32)
        wac = self.wa * c[None, :]                                   # [hidden, h]
        m = torch.from_numpy(self.basis.components @ wac.T)          # [k, hidden]
        const = torch.from_numpy(wac @ self.basis.mean)              # [hidden]
        lw = torch.from_numpy(self.wd @ c)                           # [hidden]
        rows = np.asarray(rows, np.int64)
        whole = len(rows) == len(self._dl) and bool((rows == np.arange(len(rows))).all())
        out = np.empty(len(rows), np.float32)
        with torch.inference_mode():
            for start in range(0, len(rows), LOGIT_ROWS):      # bounded temporaries: [LOGIT_ROWS, hidden]
                part = slice(start, start + LOGIT_ROWS)
                index = torch.from_numpy(rows[part])
                pick = (lambda t: t[part]) if whole else (lambda t: t[index])
                dl = pick(self._dl)

                def s(code, u, sign):
                    x = torch.addmm(pick(u), pick(code), m)          # a fresh tensor: safe to change in place
                    x += const
                    x.addr_(dl, lw, alpha=sign)
                    return torch.nn.functional.gelu(x) @ self._w2 + self.b2

                out[part] = ((s(self._z_ab, self._u_ab, 1.0) - s(self._z_ba, self._u_ba, -1.0)) / 2).numpy()
        return out


# -- the transformer passes ---------------------------------------------------------------------
class FactoredCRM:
    """``scorer``: a loaded span-head ``CRMScorer`` (pairwise, order-averaged)."""

    def __init__(self, scorer):
        if scorer.meta.get("head") != "span" or scorer.loss != "pairwise" or \
                not scorer.model.head_config.get("length_features"):
            raise ValueError(f"{scorer.dir}: the factored CRM needs a pairwise span-head CRM with length "
                             f"features (this one: head={scorer.meta.get('head')!r}, loss={scorer.loss!r})")
        self.scorer = scorer
        self.dir = Path(scorer.dir)
        self.version = weights_version(self.dir)

    def _pooled(self, items: Sequence[tuple[Sequence[str], str, str, str]]):
        """(criteria, query, a, b) items -> pooled slots [N, 4, h] and log token counts [N, 4]."""
        import torch

        s = self.scorer
        h = s.model.backbone.config.hidden_size
        if not items:
            return torch.empty(0, 4, h), torch.empty(0, 4)
        out = s._forward([s._encode("pairwise", s.fmt.pairwise(*it)) for it in items], run=s.model.slots)
        return torch.stack([p for p, _ in out]), torch.stack([n for _, n in out])

    def pair_vectors(self, pairs: Sequence[tuple[str, str, str]],
                     progress: Callable[[int], None] | None = None) -> PairVectors:
        """(query, answer, baseline) triples -> their answer-side vectors (2 passes each)."""
        h = self.scorer.model.backbone.config.hidden_size
        parts: list[tuple] = []
        step = max(1, 32 * self.scorer.batch_size)      # progress and memory: a few hundred pairs a step
        for k in range(0, len(pairs), step):
            chunk = pairs[k:k + step]
            n = len(chunk)
            p, ll = self._pooled([(NEUTRAL, q, a, b) for q, a, b in chunk] + [(NEUTRAL, q, b, a) for q, a, b in chunk])
            parts.append(((p[:n, 2] - p[:n, 3]).numpy(), (p[n:, 2] - p[n:, 3]).numpy(),
                          ((p[:n, 1] + p[n:, 1]) / 2).numpy(), (ll[:n, 2] - ll[:n, 3]).numpy()))
            if progress:
                progress(n)
        if not parts:
            z = np.zeros((0, h), np.float32)
            return PairVectors(z, z, z, np.zeros(0, np.float32))
        return PairVectors(*(np.concatenate([p[i] for p in parts]) for i in range(4)))

    def criteria_vector(self, criteria: Sequence[str], contexts: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """The criteria slot's vector, averaged over (query, answer, baseline) contexts."""
        p, _ = self._pooled([(tuple(criteria) or NEUTRAL, q, a, b) for q, a, b in contexts])
        return p[:, 0].mean(0).numpy()


def read_contexts(path: Path, k: int = CONTEXTS) -> list[tuple[str, str, str]]:
    """The first ``k`` (query, answer, baseline) contexts of a contexts file."""
    if k < 1:
        raise ValueError(f"contexts={k}: the criteria must be read in at least one context")
    try:
        items = json.loads(path.read_text())["contexts"]
        out = [(x["query"], x["answer"], x["baseline"]) for x in items[:k]]
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: cannot read criteria contexts ({e})") from None
    if len(out) < k:
        raise ValueError(f"{path}: {len(out)} contexts, {k} asked for")
    for i, ctx in enumerate(out):
        if not all(isinstance(t, str) and t.strip() for t in ctx):
            raise ValueError(f"{path}: contexts[{i}] needs non-empty query, answer and baseline strings")
    return out


def head_logits(model, c: np.ndarray, v: PairVectors) -> np.ndarray:
    """``model``'s span head (``SpanHeadModel.score``) on full, uncompressed vectors, both orders
    averaged as ``crm`` averages them: ``(s(d_ab, dl) - s(d_ba, -dl)) / 2``. The reference that
    :class:`FactoredHead` computes in parts."""
    import torch

    with torch.inference_mode():
        t = lambda x: torch.as_tensor(np.asarray(x), dtype=torch.float32)
        c, q, dl = t(c)[None], t(v.q), t(v.dl)
        return ((model.score(c, q, t(v.d_ab), dl) - model.score(c, q, t(v.d_ba), -dl))[:, 0] / 2).numpy()
