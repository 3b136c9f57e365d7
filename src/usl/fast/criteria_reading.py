"""The criteria reader: one learned model that says what a criterion asks of an answer.

For each criterion text, as a user writes it ("Not too long", "I'm in a hurry", "Avoid: jargon"), it
gives:

- its **kind**, one of the criteria library's kinds (length, style, domain, quality, correctness);
- its **length direction**: P(neither), P(shorter), P(longer) in the user's own frame ("Not too long"
  and "I do not have much time" both ask for shorter answers).

The default judge labels each criterion of a board with its kind (``FastJudge.criteria_reading``,
the page's "How the judge reads your criteria"), with the note that a small judge cannot verify facts
or code. The quality gate still weighs the kind classifier it was fitted with (``criterion_kinds.py``)
until it is refitted on this reader's kinds. Its direction head is read together with the length reader
the fast CRM was trained with (``criterion_reader.py``): their mean (``usl.fast.length_intent``) is the
judge's length prior and what length control and the contradiction check read; alone, it is below that
reader on the blind length wordings (docs/log.md, 2026-12-03). Nothing in it is a keyword rule.

It gives no sign (whether a wording asks against what it names): the fast CRM's weights were trained with
``split_sign``'s sign, which the sign reader (``usl.fast.sign_reader``) learned and reads for the judge.

Model: frozen all-MiniLM-L6-v2 token states (the last and the third-to-last layer) go through a trained
projection and attention pooling into two small heads; ``heads`` copies with different seeds are
averaged. In the judge it reads through the criteria tower's MiniLM (``share_encoder``): no second copy
is loaded. Everything trained is under 2 MB. Reading runs the nets in numpy over MiniLM's states from ONNX
Runtime (``numpy_nn``, ``usl.data.minilm_onnx``); only training uses torch.

Training data (``configs/criteria_reader.yaml``): the criteria library's training wordings (kind from
their family; length direction for the two length families, "neither" for the rest) and the wordings
files of ``configs/length_wordings``, ``configs/domain_wordings`` and ``configs/kind_wordings`` (code and
fact correctness, safety: kinds the library has few wordings of). Of the length wordings, ``composed_u.json``
(3,050) is composed by ``scripts/compose_length_wordings.py``: frames, negations and cores that name length,
time or reading, each labelled with the direction it asks for, so that a negation's turn is learned from
many examples and not from a few hundred hand-written ones. The library's held-out wordings
are the dev set; the recipe's test files and the blind set (``tests/data/criteria_reading_blind.json``)
never enter training.

Files (``weights/fast-crm/criteria_reader/``): ``config.json``, ``heads.safetensors``, ``training.json``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from usl.data.criteria import KINDS, load_library
from usl.data.minilm_onnx import MiniLM, frozen
from usl.fast.numpy_nn import attention_pool, gelu, linear, load_state, softmax, state_of
from usl.data.io import read_json, read_recipe
from usl.weights import shipped

log = logging.getLogger(__name__)

READER_DIR = "criteria_reader"
DIRECTIONS = ("neither", "shorter", "longer")
Side = Literal["shorter", "longer"]
# the blind set's finer kinds, and the library kind each belongs to
FINE_KINDS = {"format": "style", "tone": "style", "safety": "quality"}
BLIND_SET = Path(__file__).resolve().parents[3] / "tests" / "data" / "criteria_reading_blind.json"
_LENGTH_SIDES = {"concise": 1, "length_concise": 1, "short": 1, "detailed": 2, "length_detailed": 2, "long": 2}
_DOMAIN_SIDES = {f"{p}{s}" for s in ("academy", "business", "literature", "plain") for p in ("", "domain_")}
_UNKINDED = {"neutral", "neither", "none", "other", "domain_other"}  # no kind: neither length nor a domain style
_KIND_SIDES = {"style", "quality", "correctness"}  # a kind's wordings, of no length wish (configs/kind_wordings)


@dataclass(frozen=True)
class CriteriaReaderConfig:
    """The recipe of the criteria reader (``configs/criteria_reader.yaml``)."""

    wordings: tuple[str, ...] = field(default=(), metadata={"help": "Wordings files trained on (length, domain)."})
    test: tuple[str, ...] = field(default=(), metadata={"help": "Wordings files never trained on (reported)."})
    library_seed: int = field(default=0, metadata={"help": "Seed of the library split; its held-out part is dev."})
    layers: tuple[int, ...] = field(default=(-1, -3), metadata={"help": "MiniLM hidden states read."})
    max_len: int = field(default=64, metadata={"help": "Tokens read of a criterion."})
    hidden: int = field(default=256, metadata={"help": "Width of the projection and pooling."})
    epochs: int = field(default=25, metadata={"help": "Epochs a head."})
    lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate."})
    batch: int = field(default=32, metadata={"help": "Batch size."})
    heads: int = field(default=3, metadata={"help": "Heads averaged, one seed each."})
    dropout: float = field(default=0.1, metadata={"help": "Dropout on the pooled vector."})
    label_smoothing: float = field(default=0.05, metadata={"help": "Label smoothing of every head's loss."})
    seed: int = field(default=0, metadata={"help": "Seed of the heads' initialisation and batches."})

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Sequence[str] = ()) -> CriteriaReaderConfig:
        """The recipe at ``path``, then ``key=value`` overrides (YAML values)."""
        return read_recipe(cls, path, overrides)


@dataclass(frozen=True)
class Reading:
    """What one criterion asks, as the criteria reader reads it."""

    text: str
    kind: str
    kind_p: tuple[float, ...]            # over ``KINDS``
    direction_p: tuple[float, float, float]  # P(neither), P(shorter), P(longer), in the user's frame

    @property
    def length(self) -> Side | None:
        """"shorter" or "longer" when the criterion is a length wish (P(neither) < 0.5), else None."""
        neither, shorter, longer = self.direction_p
        if neither >= 0.5:
            return None
        return "shorter" if shorter >= longer else "longer"


@dataclass(frozen=True)
class Labelled:
    """A wording with what is known of it: its kind, its direction ("neither" for no length wish) and its
    sign; None where the source does not say."""

    text: str
    kind: str | None = None
    direction: str | None = None
    sign: int | None = None


# -- the model ------------------------------------------------------------------------------------

def _net(cfg: CriteriaReaderConfig, width: int = 384):
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(width * len(cfg.layers), cfg.hidden)
            self.att = nn.Linear(cfg.hidden, 1)
            self.drop = nn.Dropout(cfg.dropout)
            self.trunk = nn.Sequential(nn.Linear(cfg.hidden, 128), nn.GELU())
            self.kind = nn.Linear(128, len(KINDS))
            self.direction = nn.Linear(128, len(DIRECTIONS))

        def forward(self, h, mask):
            x = self.proj(h)
            a = self.att(x).squeeze(-1).masked_fill(mask == 0, -1e9).softmax(-1)
            z = self.trunk(self.drop((a[..., None] * x).sum(1)))
            return self.kind(z), self.direction(z)

    return Net()


class CriteriaReader:
    """``read(texts) -> list[Reading]``; ``probabilities(texts)`` gives the two heads' arrays."""

    def __init__(self, cfg: CriteriaReaderConfig, nets: list, trained: dict | None = None):
        self.cfg = cfg
        self.nets = nets
        self.trained = trained or {}
        self._encoder = None
        self._memo: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # -- token states ------------------------------------------------------------------------------
    def share_encoder(self, encoder: MiniLM) -> None:
        """Read through the criteria tower's MiniLM (one without an adapter: the same frozen weights)
        instead of loading a second copy. The reader reads criteria whole, as users write them, and the
        criteria tower what the sign reader leaves of them, so each makes its own (short) pass."""
        self._encoder = encoder

    def _minilm(self) -> MiniLM:
        if self._encoder is None:
            self._encoder = frozen()
        return self._encoder

    def states(self, texts: Sequence[str], batch: int = 128, pad_to_max: bool = False):
        """Frozen token states (n, tokens, 384 * len(layers)) and the attention mask, as arrays; ``pad_to_max``
        pads every batch to the longest text of all so that batches stack (training). Criteria are short
        (~30 tokens): a batch is not padded to ``max_len``."""
        pad_to_max = pad_to_max or len(texts) > batch
        enc = self._minilm()
        width = None
        if pad_to_max:
            width = int(enc.tokens(texts, self.cfg.max_len)[1].sum(1).max(initial=0))
        hs, ms = [], []
        for i in range(0, len(texts), batch):
            out, mask = enc.states(texts[i:i + batch], self.cfg.max_len, width)
            hs.append(np.concatenate([out[k] for k in self.cfg.layers], -1))
            ms.append(mask)
        return np.concatenate(hs), np.concatenate(ms)

    def _heads(self, h: np.ndarray, mask: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each text's (kind, direction) probabilities, averaged over the nets (``numpy_nn``)."""
        kinds, dirs = [], []
        for w in self.nets:
            z = gelu(linear(attention_pool(h, mask, w), w, "trunk.0"))
            kinds.append(softmax(linear(z, w, "kind")))
            dirs.append(softmax(linear(z, w, "direction")))
        k, d = (np.mean(x, 0).astype(np.float32) for x in (kinds, dirs))
        return list(zip(k, d))

    def _remember(self, texts: Sequence[str], got) -> None:
        if len(self._memo) > 50_000:
            self._memo = {}
        self._memo.update(zip(texts, got))

    def probabilities(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(n, len(KINDS)) kind and (n, 3) direction (neither, shorter, longer) probabilities."""
        memo = self._memo
        got = {t: memo[t] for t in dict.fromkeys(texts) if t in memo}
        todo = [t for t in dict.fromkeys(texts) if t not in got]
        for i in range(0, len(todo), 128):
            got.update(zip(todo[i:i + 128], self._heads(*self.states(todo[i:i + 128]))))
        if todo:
            self._remember(todo, [got[t] for t in todo])
        if not texts:
            return np.zeros((0, len(KINDS)), np.float32), np.zeros((0, 3), np.float32)
        k, d = zip(*(got[t] for t in texts))
        return np.stack(k), np.stack(d)

    def forget(self) -> None:
        """Empty the memo of criteria read (a benchmark of new criteria)."""
        self._memo = {}

    def read(self, texts: Sequence[str]) -> list[Reading]:
        k, d = self.probabilities(texts)
        return [Reading(t, KINDS[int(kk.argmax())], tuple(round(float(x), 4) for x in kk),
                        tuple(round(float(x), 4) for x in dd))
                for t, kk, dd in zip(texts, k, d)]

    # -- persistence -------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        from safetensors.numpy import save_file

        d = Path(folder) / READER_DIR
        d.mkdir(parents=True, exist_ok=True)
        state = {f"{i}.{k}": np.ascontiguousarray(v, dtype=np.float16) for i, net in enumerate(self.nets)
                 for k, v in net.items()}
        save_file(state, d / "heads.safetensors")
        cfg = asdict(self.cfg) | {"n_heads": len(self.nets), "kinds": list(KINDS), "directions": list(DIRECTIONS)}
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        (d / "training.json").write_text(json.dumps(self.trained, indent=1) + "\n")
        return d

    @classmethod
    def load(cls, folder: str | Path | None = None) -> CriteriaReader:
        """The reader saved under ``folder`` (``folder/criteria_reader/``, or ``folder`` itself); the shipped
        one when None."""
        if folder is None:
            folder = shipped("fast-crm")
        d = Path(folder)
        d = d if (d / "config.json").exists() and (d / "heads.safetensors").exists() else d / READER_DIR
        try:
            raw = json.loads((d / "config.json").read_text())
            n = raw.pop("n_heads")
            if tuple(raw.pop("kinds")) != KINDS or tuple(raw.pop("directions")) != DIRECTIONS:
                raise ValueError("its kinds or directions are not this usl's")
            for key in ("wordings", "test", "layers"):
                raw[key] = tuple(raw[key])
            cfg = CriteriaReaderConfig(**raw)
            state = load_state(d / "heads.safetensors")
            nets = [{k[len(f"{i}."):]: v for k, v in state.items() if k.startswith(f"{i}.")} for i in range(n)]
            for i, net in enumerate(nets):
                shapes = {k: tuple(net[f"{k}.weight"].shape) for k in ("proj", "kind", "direction")}
                if shapes != {"proj": (cfg.hidden, 384 * len(cfg.layers)), "kind": (len(KINDS), 128),
                              "direction": (len(DIRECTIONS), 128)}:
                    raise ValueError(f"net {i}'s layers are {shapes}, not those of its config")
            trained = json.loads((d / "training.json").read_text()) if (d / "training.json").exists() else {}
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
            raise ValueError(f"{d}: not a criteria reader usl can read ({type(e).__name__}: {e}); rebuild it with "
                             "`usl train-criteria --config configs/criteria_reader.yaml`") from e
        return cls(cfg, nets, trained)


# -- labelled wordings ----------------------------------------------------------------------------

def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!")


def blind_set(path: str | Path = BLIND_SET) -> list[Labelled]:
    """The blind set: [text, fine kind, direction or null, sign] items, fine kinds mapped to the library's."""

    out = []
    for i, item in enumerate(read_json(path)["items"]):
        text, kind, direction, sign = item
        kind = FINE_KINDS.get(kind, kind)
        if kind not in KINDS or direction not in (None, "shorter", "longer") or sign not in (1, -1):
            raise ValueError(f"{path}: item {i}: expected [text, kind, shorter|longer|null, 1|-1], got {item}")
        out.append(Labelled(text, kind, direction or "neither", sign))
    return out


def wordings_set(path: str | Path) -> list[Labelled]:
    """A wordings file (side -> list of criteria) as labelled wordings: length sides give kind and
    direction, domain sides and kind sides (``style``, ``quality``, ``correctness``) the kind,
    ``neutral``/``none``/``other`` only that there is no length wish."""

    got = read_json(path)
    if not isinstance(got, dict):
        raise ValueError(f"{path}: expected a JSON object of side -> list of criteria")
    out = []
    for side, texts in got.items():
        if side in _LENGTH_SIDES:
            kind, direction = "length", DIRECTIONS[_LENGTH_SIDES[side]]
        elif side in _DOMAIN_SIDES:
            kind, direction = "domain", "neither"
        elif side in _KIND_SIDES:
            kind, direction = side, "neither"
        elif side in _UNKINDED:
            kind, direction = None, "neither"
        else:
            raise ValueError(f"{path}: field {side!r}: not a side of a length, domain or kind wordings file")
        if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
            raise ValueError(f"{path}: field {side!r}: expected a list of non-empty strings")
        out += [Labelled(t, kind, direction) for t in texts]
    return out


def _library_labelled(part: Literal["train", "held_out"], seed: int) -> list[Labelled]:

    lib = load_library()
    out = []
    for name, fam in sorted(lib.families.items()):
        direction = {"length_concise": "shorter", "length_detailed": "longer"}.get(name, "neither")
        for w in getattr(lib.split(name, seed=seed), part):
            out.append(Labelled(w, fam.kind, direction))
    return out


def library_held_out_set(seed: int = 0) -> list[Labelled]:
    """The library's held-out wordings (the dev set): kind, and direction for the two length families."""
    return _library_labelled("held_out", seed)


def training_set(cfg: CriteriaReaderConfig) -> tuple[list[Labelled], dict]:
    """What the reader trains on: the library's training wordings and the recipe's wordings files, less
    any wording (compared case- and punctuation-blind) of the library's held-out part, the test files or
    the blind set. A text given twice keeps its last labels. Returns the examples and what was dropped."""
    held = {_norm(x.text) for x in library_held_out_set(cfg.library_seed)}
    tests = {_norm(x.text) for f in cfg.test for x in wordings_set(f)} | {_norm(x.text) for x in blind_set()}
    out: dict[str, Labelled] = {}
    dropped = {"library_held_out": 0, "test": 0}
    for x in [*_library_labelled("train", cfg.library_seed), *(x for f in cfg.wordings for x in wordings_set(f))]:
        key = _norm(x.text)
        if key in held:
            dropped["library_held_out"] += 1
        elif key in tests:
            dropped["test"] += 1
        else:
            out[key] = x
    return list(out.values()), dropped


# -- training -------------------------------------------------------------------------------------

def fit(cfg: CriteriaReaderConfig) -> CriteriaReader:
    """Train the heads on ``training_set(cfg)``; record the dev and test figures in ``reader.trained``."""
    import torch
    from torch import nn

    t0 = time.time()
    examples, dropped = training_set(cfg)
    reader = CriteriaReader(cfg, [])
    h, m = reader.states([x.text for x in examples], pad_to_max=True)
    h, m = torch.from_numpy(h).to(torch.bfloat16), torch.from_numpy(m)  # half the memory
    kind_y = torch.tensor([KINDS.index(x.kind) if x.kind else -100 for x in examples])
    dir_y = torch.tensor([DIRECTIONS.index(x.direction) if x.direction else -100 for x in examples])
    # every kind weighs alike: the many style wordings must not drown the few correctness ones
    counts = torch.bincount(kind_y[kind_y >= 0], minlength=len(KINDS)).clamp(min=1).float()
    kind_w = counts.sum() / (len(KINDS) * counts)
    for k in range(cfg.heads):
        torch.manual_seed(cfg.seed * 100 + k)
        g = torch.Generator().manual_seed(cfg.seed * 100 + k)
        net = _net(cfg)
        opt = torch.optim.AdamW(net.parameters(), cfg.lr, weight_decay=0.01)
        ce = lambda z, y, w=None: nn.functional.cross_entropy(z, y, weight=w, ignore_index=-100,
                                                              label_smoothing=cfg.label_smoothing)
        for _ in range(cfg.epochs):
            net.train()
            perm = torch.randperm(len(examples), generator=g)
            for i in range(0, len(perm), cfg.batch):
                b = perm[i:i + cfg.batch]
                zk, zd = net(h[b].float(), m[b])
                loss = ce(zd, dir_y[b])
                if (kind_y[b] >= 0).any():  # a batch of unkinded wordings only has no kind loss
                    loss = loss + ce(zk, kind_y[b], kind_w)
                opt.zero_grad()
                loss.backward()
                opt.step()
        reader.nets.append(state_of(net.eval()))
        log.info("criteria reader: head %d of %d trained", k + 1, cfg.heads)
    read = reading_of(reader)
    reader.trained = {
        "examples": len(examples), "dropped": dropped,
        "labels": {"kind": int((kind_y >= 0).sum()), "direction": int((dir_y >= 0).sum())},
        "dev_library_held_out": evaluate(read, library_held_out_set(cfg.library_seed)),
        "test": {Path(f).stem: evaluate(read, wordings_set(f)) for f in cfg.test},
        "seconds": round(time.time() - t0, 1)}
    return reader


# -- evaluation -----------------------------------------------------------------------------------

# texts -> (kind, shorter|longer|None, sign or None where the reading gives none)
Read = Callable[[list[str]], list[tuple[str, str | None, int | None]]]


def reading_of(reader: CriteriaReader) -> Read:
    return lambda texts: [(r.kind, r.length, None) for r in reader.read(texts)]


def evaluate(read: Read, items: Sequence[Labelled]) -> dict:
    """Accuracy of a reading on labelled wordings: kind (overall and by kind), length wishes read the right
    way (and of them, those said through a negation), wordings of no length wish read as one, and sign."""
    got = read([x.text for x in items])
    out: dict = {"n": len(items)}
    kinded = [(x, g) for x, g in zip(items, got) if x.kind]
    if kinded:
        out["kind"] = round(float(np.mean([g[0] == x.kind for x, g in kinded])), 3)
        out["kind_by_kind"] = {k: round(float(np.mean([g[0] == x.kind for x, g in kinded if x.kind == k])), 3)
                               for k in KINDS if any(x.kind == k for x, _ in kinded)}
    wishes = [(x, g) for x, g in zip(items, got) if x.direction in ("shorter", "longer")]
    if wishes:
        out["length_direction"] = round(float(np.mean([g[1] == x.direction for x, g in wishes])), 3)
        out["length_n"] = len(wishes)
        negated = [(x, g) for x, g in wishes if x.sign == -1]
        if negated:
            out["length_direction_negated"] = round(float(np.mean([g[1] == x.direction for x, g in negated])), 3)
            out["length_negated_n"] = len(negated)
        out["length_wrong"] = sorted(x.text for x, g in wishes if g[1] != x.direction)
    others = [(x, g) for x, g in zip(items, got) if x.direction == "neither"]
    if others:
        out["false_length_wish"] = round(float(np.mean([g[1] is not None for _, g in others])), 3)
    signed = [(x, g) for x, g in zip(items, got) if x.sign is not None and g[2] is not None]
    if signed:
        out["sign"] = round(float(np.mean([g[2] == x.sign for x, g in signed])), 3)
    return out
