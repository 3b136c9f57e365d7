"""The criteria reader: one learned model that says what a criterion asks of an answer.

For each criterion text, as a user writes it ("Not too long", "I'm in a hurry", "Avoid: jargon"), it
gives:

- its **kind**, one of the criteria library's kinds (length, style, domain, quality, correctness);
- its **length direction**: P(neither), P(shorter), P(longer) in the user's own frame ("Not too long"
  and "I do not have much time" both ask for shorter answers).

The default judge labels each criterion of a board with its kind (``FastJudge.criteria_reading``,
the page's "How the judge reads your criteria"), with the note that a small judge cannot verify facts
or code. The quality gate still weighs the kind classifier it was fitted with (``criterion_kinds.py``)
until it is refitted on this reader's kinds. Its direction head is trained and measured, not yet used:
on the blind length wordings it is below the length reader the fast CRM was trained with
(``criterion_reader.py``, which length control and the contradiction check read through
``length_intent``): docs/log.md, 2026-12-02. Nothing in it is a keyword rule.

It gives no sign (whether a wording asks against what it names): no training data labels it, and the
fast CRM's weights were trained with ``split_sign``'s sign, which the judge keeps reading.

Model: all-MiniLM-L6-v2's token states (the last and the third-to-last layer) go through a trained
projection and attention pooling into two small heads. Two recipes: heads on frozen MiniLM (``lora_r: 0``,
``heads`` copies with different seeds averaged; in the judge it reads through the criteria tower's MiniLM,
``share_encoder``), or one head trained with a LoRA adapter on MiniLM (``lora_r > 0``, the shipped recipe:
frozen states read "Not too long" and even "More detail, please." the wrong way; docs/log.md, 2026-12-02).
A tuned reader's MiniLM, its adapter merged, is exported once to ONNX into the data directory's cache, as
the criteria tower's is, and costs one more MiniLM pass a new criterion. Everything trained is under 2 MB.
Reading runs the heads in numpy over MiniLM's states from ONNX Runtime (``numpy_nn``,
``usl.data.minilm_onnx``); only training (and the one export) uses torch.

Training data (``configs/criteria_reader.yaml``): the criteria library's training wordings (kind from
their family; length direction for the two length families, "neither" for the rest) and the wordings
files of ``configs/length_wordings``, ``configs/domain_wordings`` and ``configs/kind_wordings`` (code and
fact correctness, safety: kinds the library has few wordings of). The library's held-out wordings
are the dev set; the recipe's test files and the blind set (``tests/data/criteria_reading_blind.json``)
never enter training.

Files (``weights/fast-crm/criteria_reader/``): ``config.json``, ``heads.safetensors``, ``training.json``, and
``adapter/`` (peft's files) for a tuned reader.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Literal

import numpy as np

from usl.data.criteria import KINDS, load_library
from usl.data.embed import encoder_path
from usl.data.minilm_onnx import MiniLM, frozen, shared, weights_key
from usl.fast.numpy_nn import attention_pool, gelu, linear, load_state, softmax, state_of
from usl.data.io import read_json
from usl.weights import shipped

log = logging.getLogger(__name__)

READER_DIR = "criteria_reader"
ADAPTER = "adapter"  # a tuned reader's LoRA adapter on MiniLM (peft's files), under READER_DIR
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
    lora_r: int = field(default=0, metadata={"help": "Rank of a LoRA adapter on MiniLM, trained with the heads "
                                                      "(0: MiniLM frozen, its states computed once)."})
    encoder_lr: float = field(default=5e-4, metadata={"help": "Peak learning rate of the adapter (one cycle)."})

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Sequence[str] = ()) -> CriteriaReaderConfig:
        """The recipe at ``path``, then ``key=value`` overrides (YAML values)."""
        import yaml

        raw = yaml.safe_load(Path(path).read_text()) or {}
        for item in overrides:
            key, _, value = item.partition("=")
            raw[key.strip()] = yaml.safe_load(value)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{path}: unknown field(s) {unknown}; the recipe's fields: {sorted(known)}")
        for key in ("wordings", "test", "layers"):
            if key in raw:
                raw[key] = tuple(raw[key])
        return cls(**raw)

    def __post_init__(self):
        if self.lora_r and self.heads != 1:
            raise ValueError(f"heads={self.heads} with lora_r={self.lora_r}: a tuned encoder reads with one head "
                             "(each head would need its own MiniLM pass)")


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

    def __init__(self, cfg: CriteriaReaderConfig, nets: list, trained: dict | None = None,
                 adapter: Path | None = None, cache: str | Path | None = None):
        self.cfg = cfg
        self.nets = nets
        self.trained = trained or {}
        self.adapter = adapter  # the saved LoRA adapter of a tuned reader (``cfg.lora_r``), else None
        self.cache = cache      # where its encoder is exported to ONNX (default: the data directory's cache)
        self.tuned = None       # a tuned reader's torch model, between training and saving
        self._encoder = None
        self._memo: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # -- token states ------------------------------------------------------------------------------
    def share_encoder(self, encoder: MiniLM) -> None:
        """Read through the criteria tower's MiniLM (one without an adapter: the same frozen weights)
        instead of loading a second copy. The reader reads criteria whole, as users write them, and the
        criteria tower what ``split_sign`` leaves of them, so each makes its own (short) pass. A tuned reader
        reads through its own encoder (one more pass a new criterion) and ignores this."""
        if self.cfg.lora_r == 0:
            self._encoder = encoder

    def _minilm(self) -> MiniLM:
        if self._encoder is None:
            self._encoder = frozen(self.cache) if self.adapter is None else _tuned_minilm(self.adapter, self.cache)
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
        if self.tuned is not None:
            self.tuned.save_pretrained(str(d / ADAPTER))
            self.adapter, self._encoder, self.tuned = d / ADAPTER, None, None
        state = {f"{i}.{k}": np.ascontiguousarray(v, dtype=np.float16) for i, net in enumerate(self.nets)
                 for k, v in net.items()}
        save_file(state, d / "heads.safetensors")
        cfg = asdict(self.cfg) | {"n_heads": len(self.nets), "kinds": list(KINDS), "directions": list(DIRECTIONS)}
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        (d / "training.json").write_text(json.dumps(self.trained, indent=1) + "\n")
        return d

    @classmethod
    def load(cls, folder: str | Path | None = None, cache: str | Path | None = None) -> CriteriaReader:
        """The reader saved under ``folder`` (``folder/criteria_reader/``, or ``folder`` itself); the shipped
        one when None. A tuned reader's encoder is exported to ONNX under ``cache`` on first use."""
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
            if cfg.lora_r and not (d / ADAPTER / "adapter_config.json").exists():
                raise ValueError(f"lora_r={cfg.lora_r} but no adapter in {d / ADAPTER}")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
            raise ValueError(f"{d}: not a criteria reader usl can read ({type(e).__name__}: {e}); rebuild it with "
                             "`usl train-criteria --config configs/criteria_reader.yaml`") from e
        return cls(cfg, nets, trained, d / ADAPTER if cfg.lora_r else None, cache)


def _tuned_minilm(adapter: Path, cache: str | Path | None) -> MiniLM:
    """MiniLM with a tuned reader's adapter merged, exported to ONNX into the cache once (keyed by the
    adapter's files: only that export imports torch), as the criteria tower's is; one a process, so that the
    judge and length intent read a criterion with one pass."""

    def build():
        from usl.fast.criteria_encoder import CriteriaEncoder

        return CriteriaEncoder(adapter).model

    return shared(cache, weights_key(encoder_path(), adapter), build)


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

class _TorchMiniLM:
    """MiniLM in training (torch, its adapter not merged) behind ``MiniLM``'s ``tokens`` and ``states``, so
    that the trainer picks its epoch and records its figures with the reading code the shipped reader runs."""

    def __init__(self, model, tokens):
        self.model, self.tokens = model, tokens

    def states(self, texts, max_length=None, pad_to=None):
        import torch

        ids, mask = self.tokens(texts, max_length, pad_to)
        with torch.no_grad():
            out = self.model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                             output_hidden_states=True).hidden_states
        return [h.float().numpy() for h in out], mask


def _losses(cfg: CriteriaReaderConfig, examples: Sequence[Labelled]):
    """``loss(kind logits, direction logits, batch indices)``: cross-entropy of the direction, plus that of
    the kind where the batch has kinded wordings, every kind weighing alike (the many style wordings must
    not drown the few correctness ones)."""
    import torch
    from torch import nn

    kind_y = torch.tensor([KINDS.index(x.kind) if x.kind else -100 for x in examples])
    dir_y = torch.tensor([DIRECTIONS.index(x.direction) if x.direction else -100 for x in examples])
    counts = torch.bincount(kind_y[kind_y >= 0], minlength=len(KINDS)).clamp(min=1).float()
    kind_w = counts.sum() / (len(KINDS) * counts)
    ce = lambda z, y, w=None: nn.functional.cross_entropy(z, y, weight=w, ignore_index=-100,
                                                          label_smoothing=cfg.label_smoothing)

    def loss(zk, zd, b):
        out = ce(zd, dir_y[b])
        if (kind_y[b] >= 0).any():
            out = out + ce(zk, kind_y[b], kind_w)
        return out

    return loss, {"kind": int((kind_y >= 0).sum()), "direction": int((dir_y >= 0).sum())}


def _fit_frozen(cfg: CriteriaReaderConfig, examples: Sequence[Labelled], loss) -> CriteriaReader:
    """``cfg.heads`` heads on MiniLM's frozen states, computed once."""
    import torch

    reader = CriteriaReader(cfg, [])
    h, m = reader.states([x.text for x in examples], pad_to_max=True)
    h, m = torch.from_numpy(h).to(torch.bfloat16), torch.from_numpy(m)  # half the memory
    for k in range(cfg.heads):
        torch.manual_seed(cfg.seed * 100 + k)
        g = torch.Generator().manual_seed(cfg.seed * 100 + k)
        net = _net(cfg)
        opt = torch.optim.AdamW(net.parameters(), cfg.lr, weight_decay=0.01)
        for _ in range(cfg.epochs):
            net.train()
            perm = torch.randperm(len(examples), generator=g)
            for i in range(0, len(perm), cfg.batch):
                b = perm[i:i + cfg.batch]
                opt.zero_grad()
                loss(*net(h[b].float(), m[b]), b).backward()
                opt.step()
        reader.nets.append(state_of(net.eval()))
        log.info("criteria reader: head %d of %d trained", k + 1, cfg.heads)
    return reader


def _dev_score(r: dict) -> float:
    """What picks the epoch of a tuned reader on the dev set: kinds right plus length wishes read the right
    way, less wordings of no length read as one."""
    return r["kind"] + r["length_direction"] - r.get("false_length_wish", 0.0)


def _fit_tuned(cfg: CriteriaReaderConfig, examples: Sequence[Labelled], loss) -> CriteriaReader:
    """One head and a LoRA adapter of rank ``cfg.lora_r`` on MiniLM, trained together (one-cycle schedule,
    the heads at ``lr``, the adapter at ``encoder_lr``); the epoch kept is the one that reads the library's
    held-out wordings best (``_dev_score``), never a test set.

    Why tune MiniLM: its frozen token states do not separate the two length directions well ("More detail,
    please." read as a wish for shorter answers, "Not too long" as one for longer): docs/log.md, 2026-12-02."""
    import torch

    from usl.fast.criteria_encoder import CriteriaEncoder

    torch.manual_seed(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    model = CriteriaEncoder(lora_r=cfg.lora_r, trainable=True).model
    net = _net(cfg)
    tuned = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": net.parameters(), "lr": cfg.lr}, {"params": tuned, "lr": cfg.encoder_lr}],
                            weight_decay=0.01)
    steps = cfg.epochs * -(-len(examples) // cfg.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, [cfg.lr, cfg.encoder_lr], total_steps=steps, pct_start=0.1)
    encoder = _TorchMiniLM(model, frozen().tokens)
    reader = CriteriaReader(cfg, [])
    reader._encoder = encoder
    dev, texts = library_held_out_set(cfg.library_seed), [x.text for x in examples]
    best, history = None, []
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        net.train()
        perm = torch.randperm(len(examples), generator=g)
        for i in range(0, len(perm), cfg.batch):
            b = perm[i:i + cfg.batch]
            ids, mask = (torch.from_numpy(x) for x in encoder.tokens([texts[j] for j in b], cfg.max_len))
            hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            opt.zero_grad()
            loss(*net(torch.cat([hidden[k] for k in cfg.layers], -1), mask), b).backward()
            opt.step()
            sched.step()
        model.eval()
        net.eval()
        reader.nets, reader._memo = [state_of(net)], {}
        r = evaluate(reading_of(reader), dev)
        history.append({"epoch": epoch, "dev_kind": r["kind"], "dev_length_direction": r["length_direction"],
                        "dev_false_length_wish": r.get("false_length_wish")})
        log.info("criteria reader: epoch %d of %d, dev %s", epoch, cfg.epochs, history[-1])
        if best is None or _dev_score(r) > best[0]:
            adapter = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}
            best = (_dev_score(r), epoch, reader.nets, adapter)
    _, epoch, reader.nets, adapter = best
    model.load_state_dict(adapter, strict=False)
    reader._memo, reader.tuned = {}, model
    reader.trained = {"epoch_kept": epoch, "epochs": history}
    return reader


def fit(cfg: CriteriaReaderConfig) -> CriteriaReader:
    """Train the reader on ``training_set(cfg)``: heads on frozen MiniLM, or with an adapter on it
    (``cfg.lora_r``); record the dev and test figures in ``reader.trained``."""
    t0 = time.time()
    examples, dropped = training_set(cfg)
    loss, labels = _losses(cfg, examples)
    reader = (_fit_tuned if cfg.lora_r else _fit_frozen)(cfg, examples, loss)
    read = reading_of(reader)
    reader.trained = {
        "examples": len(examples), "dropped": dropped, "labels": labels, **reader.trained,
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
