"""What a criterion asks for, read by small learned readers of criteria text: one for length, one for
domain style.

**Length.** The length flip is the easiest contrast to score (one answer is longer) and the easiest to
misread: "Penalize responses that include unnecessary elaboration", "If I wanted a long read I'd open a
book" or "Wordy responses should not go unpenalized" name length words whose sign depends on the
sentence around them. The keyword reading (``criteria_lexicon``) handles the constructions it was
written for; criteria worded by people who never saw it (``configs/length_wordings/probe_*``) showed
it the way only about 70% of the time on its own, and the whole fast CRM about 85%. The length reader
says whether a criterion asks for neither, for shorter, or for longer answers.

**Domain style.** "I'll be citing this in my dissertation" or "We pitch to investors on Monday" ask
for an academic or a business register without naming it. The domain reader says which of the four
domain styles a criterion asks for (academy, business, literature, plain), or none. The fast CRM
weighs each style's answer scores by these probabilities (``FastCRM``'s style-score prior).

Each reads what ``split_sign`` leaves of a criterion ("Avoid: long answers" -> "long answers").
Frozen all-MiniLM-L6-v2 token states (the last and the third-to-last layer) go through a trained
projection, attention pooling and a small MLP that also sees the keyword features, so it can tell
when to trust them (``--no-lexicon``: the states alone); they train on the lexicon's keyword features
of their texts and, in the judge, read the keyword reader's (``keyword_reader.py``), which learned them.
A few heads with different seeds are averaged. Everything trained is about 1.4 MB (fp16) a reader. In the judge a reader takes its token
states from the criteria tower's own MiniLM pass (``share_encoder``), so reading a criterion costs only
the heads. Judging reads the heads in numpy and MiniLM through ONNX Runtime (``numpy_nn``,
``usl.data.minilm_onnx``); training uses torch.

Training texts: the criteria library's training wordings (the reader's families labelled, the others
as "none", but for length those a family marks ``also_length``), plus wordings files written for it
(``configs/length_wordings``, ``configs/domain_wordings``). The fast CRM is trained on cross-fitted
readings of the wordings (``fit_reader`` returns them), so it learns how far to trust a reader on
wordings it has not seen.

Files in a model directory (``length_reader/``, ``domain_reader/``): ``config.json``
and ``heads.safetensors``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from usl.data.criteria import load_library
from usl.data.io import read_json
from usl.data.minilm_onnx import MiniLM, frozen
from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix, split_sign
from usl.fast.keyword_reader import KeywordReader
from usl.fast.numpy_nn import State, attention_pool, load_state, mlp, softmax, state_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kind:
    """One reader's classes: ``labels[0]`` is "none of mine"; the fast CRM reads P(labels[1:])."""
    name: str
    labels: tuple[str, ...]
    sides: dict  # a wordings file's keys -> label index

    @property
    def dir(self) -> str:
        return f"{self.name}_reader"

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(f"reader_{label}" for label in self.labels[1:])


_LENGTH_SIDES = {"concise": 1, "length_concise": 1, "short": 1, "detailed": 2, "length_detailed": 2, "long": 2}
_DOMAIN_SIDES = {f"{p}{s}": i + 1 for i, s in enumerate(("academy", "business", "literature", "plain"))
                 for p in ("", "domain_")}
_OTHER_SIDES = {"other": 0, "domain_other": 0}  # a register none of the domain styles is: "none" to both
_NONE = {"neutral": 0, "neither": 0, "none": 0}
KINDS = {
    "length": Kind("length", ("neither", "short", "long"),
                   _NONE | _LENGTH_SIDES | dict.fromkeys(_DOMAIN_SIDES | _OTHER_SIDES, 0)),
    "domain": Kind("domain", ("none", "academy", "business", "literature", "plain"),
                   _NONE | _DOMAIN_SIDES | dict.fromkeys(_LENGTH_SIDES | _OTHER_SIDES, 0)),
}
LENGTH, DOMAIN = KINDS["length"], KINDS["domain"]


@dataclass(frozen=True)
class ReaderConfig:
    kind: str = "length"
    layers: tuple[int, ...] = (-1, -3)  # hidden states of the encoder that are read
    max_len: int = 64
    hidden: int = 256
    epochs: int = 20
    lr: float = 1e-3
    batch: int = 32
    heads: int = 3             # averaged, one seed each
    folds: int = 5             # cross-fitting folds for the library's wordings
    label_smoothing: float = 0.05
    seed: int = 0
    lexicon: bool = True       # the keyword features beside the pooled states (False: the states alone)

    @property
    def n_lexicon(self) -> int:
        return len(LEXICON_AXES) if self.lexicon else 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"reader kind {self.kind!r}: expected one of {', '.join(KINDS)}")


def _head(cfg: ReaderConfig, n_lexicon: int, width: int = 384):
    """One head over token states of ``width`` numbers a layer (all-MiniLM-L6-v2's 384)."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(width * len(cfg.layers), cfg.hidden)
            self.att = nn.Linear(cfg.hidden, 1)
            self.out = nn.Sequential(nn.Linear(cfg.hidden + n_lexicon, 128), nn.GELU(), nn.Linear(128, len(KINDS[cfg.kind].labels)))

        def forward(self, h, mask, lex):
            x = self.proj(h)
            a = self.att(x).squeeze(-1).masked_fill(mask == 0, -1e9).softmax(-1)
            return self.out(torch.cat([(a[..., None] * x).sum(1), lex], -1))

    return Head()


class CriterionReader:
    """``read(texts) -> (n, len(kind.labels) - 1)``: the probability of each of the kind's classes but
    "none" for each criterion text (after ``split_sign``): P(shorter), P(longer) for length. ``heads`` are
    the trained heads' states (``numpy_nn``): reading runs in numpy, on MiniLM's states from ONNX Runtime."""

    def __init__(self, cfg: ReaderConfig, heads: list[State]):
        self.cfg = cfg
        self.kind = KINDS[cfg.kind]
        self.heads = heads
        self._encoder = None
        self._memo: dict[str, np.ndarray] = {}
        # the keyword axes' reader of the judge's weights (``usl.fast.scorer.read_weights`` sets it); None: the
        # criteria lexicon's reading, which the heads were trained on
        self.keywords: KeywordReader | None = None

    def share_encoder(self, encoder: MiniLM) -> None:
        """Read through the criteria tower's all-MiniLM-L6-v2 (one without an adapter) instead of loading a
        second copy, and take the token states of the criteria it encodes from its own pass: a new
        criterion then costs one MiniLM pass, not two."""
        self._encoder = encoder
        encoder.listeners.append(self._absorb)

    def _absorb(self, texts: list[str], hidden_states, mask) -> None:
        if len(texts) > 128:  # a bulk pass (training, a benchmark's criteria): read when asked instead
            return
        h = np.concatenate([hidden_states[k] for k in self.cfg.layers], -1)
        self._remember(texts, self._heads(h, mask, self._keywords(texts)))

    def _keywords(self, texts: Sequence[str]) -> np.ndarray:
        """The keyword features the heads read beside the pooled states: (n, cfg.n_lexicon)."""
        if not self.cfg.lexicon:
            return np.zeros((len(texts), 0), np.float32)
        return self.keywords.matrix(texts) if self.keywords is not None else lexicon_matrix(list(texts))

    def _heads(self, h: np.ndarray, mask: np.ndarray, lex: np.ndarray) -> np.ndarray:
        """The heads' class probabilities, averaged: (n, len(kind.labels))."""
        def head(w: State) -> np.ndarray:
            return softmax(mlp(np.concatenate([attention_pool(h, mask, w), lex], -1), w, "out"))

        return np.mean([head(w) for w in self.heads], 0).astype(np.float32)

    def _remember(self, texts: Sequence[str], p: np.ndarray) -> None:
        memo = self._memo
        if len(memo) > 50_000:
            self._memo = memo = {}
        memo.update(zip(texts, p))

    def _minilm(self) -> MiniLM:
        if self._encoder is None:
            self._encoder = frozen()
        return self._encoder

    def states(self, texts: Sequence[str], batch: int = 128, pad_to_max: bool = False):
        """Frozen token states (n, tokens, 384 * len(layers)), the attention mask, the keyword features, as
        arrays. ``pad_to_max`` pads every batch to ``max_len`` tokens, so that batches can be stacked
        (training); otherwise a batch is padded to its longest text."""
        pad_to_max = pad_to_max or len(texts) > batch  # batches of their own lengths would not stack
        enc = self._minilm()
        hs, ms = [], []
        for i in range(0, len(texts), batch):
            out, mask = enc.states(texts[i:i + batch], self.cfg.max_len, self.cfg.max_len if pad_to_max else None)
            hs.append(np.concatenate([out[k] for k in self.cfg.layers], -1))
            ms.append(mask)
        return np.concatenate(hs), np.concatenate(ms), self._keywords(texts)

    def probs(self, texts: Sequence[str]) -> np.ndarray:
        """(n, len(kind.labels)): each class's probability (P(neither), P(shorter), P(longer) for length),
        averaged over the heads."""
        memo = self._memo  # read through one reference: another thread may replace it
        got = {t: memo[t] for t in dict.fromkeys(texts) if t in memo}
        todo = [t for t in dict.fromkeys(texts) if t not in got]
        for i in range(0, len(todo), 128):  # one batch at a time: each is padded to its own longest text
            got.update(zip(todo[i:i + 128], self._heads(*self.states(todo[i:i + 128]))))
        if todo:
            self._remember(todo, np.stack([got[t] for t in todo]))
        return np.stack([got[t] for t in texts]) if texts else np.zeros((0, len(self.kind.labels)), np.float32)

    def read(self, texts: Sequence[str]) -> np.ndarray:
        return self.probs(texts)[:, 1:]

    def forget(self) -> None:
        """Empty the memo of criteria read (a benchmark of new criteria)."""
        self._memo = {}

    # -- persistence -------------------------------------------------------------------------------
    def save(self, out_dir: str | Path) -> None:
        from safetensors.numpy import save_file

        d = Path(out_dir) / self.kind.dir
        d.mkdir(parents=True, exist_ok=True)
        state = {f"{i}.{k}": np.ascontiguousarray(v, dtype=np.float16) for i, hd in enumerate(self.heads)
                 for k, v in hd.items()}
        save_file(state, d / "heads.safetensors")
        (d / "config.json").write_text(json.dumps(asdict(self.cfg) | {"n_heads": len(self.heads)}, indent=2))

    @classmethod
    def load(cls, model_dir: str | Path, kind: str = "length") -> CriterionReader | None:
        """The reader of ``kind`` saved in ``model_dir`` (``length_reader/``, ``domain_reader/``), or None
        if there is none."""
        d = Path(model_dir) / KINDS[kind].dir
        if not (d / "config.json").exists():
            return None
        try:
            raw = json.loads((d / "config.json").read_text())
            n = raw.pop("n_heads")
            raw["layers"] = tuple(raw["layers"])
            cfg = ReaderConfig(**raw)  # a reader saved before kinds existed is a length reader
            if cfg.kind != kind:
                raise ValueError(f"a {cfg.kind} reader, not a {kind} reader")
            state = load_state(d / "heads.safetensors")
        except Exception as e:  # a torn or foreign file: json, safetensors and dataclass errors alike
            raise ValueError(f"{d}: not a {kind} reader usl can read ({type(e).__name__}: {e}); retrain it with "
                             "`usl train-reader`") from e
        heads = [{k[len(f"{i}."):]: v for k, v in state.items() if k.startswith(f"{i}.")} for i in range(n)]
        want = (128, cfg.hidden + cfg.n_lexicon)
        for i, hd in enumerate(heads):
            got = tuple(hd["out.0.weight"].shape) if "out.0.weight" in hd else None
            if got != want:
                raise ValueError(f"{d}: head {i} takes {got and got[1]} inputs, this usl's keyword features make "
                                 f"{want[1]}; retrain the reader with `usl train-reader`")
        return cls(cfg, heads)


# -- training data -------------------------------------------------------------------------------

def read_wordings(path: str | Path, kind: str = "length", skip: Collection[str] = ()) -> list[tuple[str, int]]:
    """A wordings file: a JSON object whose keys name a side (``concise``/``detailed``, ``short``/``long``,
    ``length_concise``/``length_detailed``; ``domain_academy``, ..., ``domain_plain`` or ``academy``, ...;
    ``other``, a register none of the domain styles is; or ``neutral``) and whose values are lists of
    criteria. Returns (criterion, label) for a reader of ``kind``, with the label in the criterion's own
    frame (before ``split_sign``): the other kinds' sides are "none" to it. Sides in ``skip`` are left out."""
    sides = KINDS[kind].sides
    got = read_json(path)
    if not isinstance(got, dict):
        raise ValueError(f"{path}: expected a JSON object of side -> list of criteria")
    out = []
    for side, texts in got.items():
        if side not in sides:
            raise ValueError(f"{path}: field {side!r}: not a side ({', '.join(sorted(sides))})")
        if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
            raise ValueError(f"{path}: field {side!r}: expected a list of non-empty strings")
        if side not in skip:
            out += [(t, sides[side]) for t in texts]
    return out


def sides_of(family: str) -> set[str]:
    """The keys a wordings file may give a criteria family's side under ("concise" is length_concise's side,
    "literature" domain_literature's): what a build that holds the family out leaves out of every file."""
    return {side for kind in KINDS.values() if kind.sides.get(family)
            for side, label in kind.sides.items() if label == kind.sides[family]}


def library_wordings(seed: int, kind: str = "length", holdout: Sequence[str] = ()) -> list[tuple[str, int]]:
    """The criteria library's training wordings (``Library.split(seed)``, the split `usl data build-train
    --seed` uses): the reader's families labelled, every other family as "none". For length, a wording
    of another family that asks for a length as well ("Just the answer." in ``no_questions``: the
    family's ``also_length``) is left out rather than labelled against itself. Families in ``holdout``
    are left out whole."""
    lib = load_library()
    sides = KINDS[kind].sides
    unknown = sorted(set(holdout) - set(lib.families))
    if unknown:
        raise ValueError(f"held-out family {unknown[0]!r}: not a criteria family of the library")
    out = []
    for name in lib.families:
        if name in holdout:
            continue
        side = sides.get(name, 0)
        train = lib.split(name, seed=seed).train
        if side == 0 and kind == "length":
            train = tuple(w for w in train if w not in lib.families[name].also_length)
        out += [(w, side) for w in train]
    return out


def library_held_out(seed: int) -> set[str]:
    """Every family's held-out wordings in the library split of ``seed``: `usl data build-train` words the
    evaluation pairs' criteria with them, so no reader may train on them, from whatever file they come."""
    lib = load_library()
    return {w for name in lib.families for w in lib.split(name, seed=seed).held_out}


def in_reader_frame(examples: Sequence[tuple[str, int]], kind: str = "length") -> list[tuple[str, int]]:
    """(criterion, label) -> (what ``split_sign`` leaves, the label in that frame). For length, "Avoid:
    long answers" asks for shorter answers, and its text "long answers" is read as naming longer ones.
    For domain style, a dislike names some other style ("Avoid: poetic or flowery writing" among the
    academic wordings), which its label does not say: such examples are left out. A text given twice keeps
    its first place and its last label: a later wordings file can restate an earlier one's wording under
    another side, and a kind of reader to which both sides are "none" trains exactly as before."""
    out: dict[str, int] = {}
    for text, label in examples:
        rest, sign = split_sign(text)
        if sign > 0 or label == 0:
            out[rest] = label
        elif kind == "length":
            out[rest] = 3 - label
    return list(out.items())


def training_examples(lib: Sequence[tuple[str, int]], extra: Sequence[tuple[str, int]],
                      tests: Collection[Sequence[tuple[str, int]]], library_seed: int, kind: str = "length"
                      ) -> tuple[list[tuple[str, int]], list[tuple[str, int]], int, int]:
    """What a reader trains on, from the library's wordings ``lib`` and the wordings files' ``extra``: no
    wording of ``tests``, even in another form that reads the same ("Please, no walls of text." and
    "Avoid: walls of text": compared as ``split_sign`` leaves them), nor any of the library's held-out
    wordings of ``library_seed``, which word the evaluation pairs' criteria. Returns the examples in the
    reader's frame, the library's wordings kept, and how many texts were dropped as tests and as held out."""
    held_rest = {split_sign(t)[0] for ex in tests for t, _ in ex}
    kept = {t for t, _ in [*lib, *extra] if split_sign(t)[0] not in held_rest}
    dropped = len({t for t, _ in [*lib, *extra]} - kept)
    held_lib = {split_sign(t)[0] for t in library_held_out(library_seed)}
    leak = {t for t in kept if split_sign(t)[0] in held_lib}
    kept -= leak
    lib = [x for x in lib if x[0] in kept]
    return in_reader_frame(lib + [x for x in extra if x[0] in kept], kind), lib, dropped, len(leak)


def fit_reader(examples: Sequence[tuple[str, int]], cfg: ReaderConfig, crossfit: Sequence[str] = ()
               ) -> tuple[CriterionReader, dict[str, np.ndarray]]:
    """Train the heads on (text, label) in the reader's frame. Texts in ``crossfit`` also get readings
    from heads that did not see them (``folds`` folds, by text): (text -> probabilities)."""
    import torch
    from torch import nn

    reader = CriterionReader(cfg, [])
    texts = [t for t, _ in examples]
    y = torch.tensor([label for _, label in examples])
    h, m, lex = (torch.from_numpy(x) for x in reader.states(texts, pad_to_max=True))

    def fit(idx: np.ndarray, salt: int) -> list:
        heads = []
        for k in range(cfg.heads):
            torch.manual_seed(cfg.seed * 1000 + salt * 10 + k)
            hd = _head(cfg, cfg.n_lexicon)
            opt = torch.optim.AdamW(hd.parameters(), cfg.lr, weight_decay=0.01)
            g = torch.Generator().manual_seed(cfg.seed * 1000 + salt * 10 + k)
            sub = torch.from_numpy(idx)
            for _ in range(cfg.epochs):
                hd.train()
                perm = sub[torch.randperm(len(sub), generator=g)]
                for i in range(0, len(perm), cfg.batch):
                    b = perm[i:i + cfg.batch]
                    loss = nn.functional.cross_entropy(hd(h[b], m[b], lex[b]), y[b],
                                                       label_smoothing=cfg.label_smoothing)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            heads.append(hd.eval())
        return heads

    def predict(heads: list, idx: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return torch.stack([hd(h[idx], m[idx], lex[idx]).softmax(-1) for hd in heads]).mean(0).numpy()

    held: dict[str, np.ndarray] = {}
    want = set(crossfit)
    cross = np.array([i for i, t in enumerate(texts) if t in want], dtype=np.int64)
    if len(cross):
        rng = np.random.default_rng(cfg.seed)
        fold = np.full(len(texts), -1)
        fold[cross] = rng.permutation(len(cross)) % cfg.folds
        for f in range(cfg.folds):
            log.info("%s reader: fold %d of %d", cfg.kind, f + 1, cfg.folds)
            out = np.flatnonzero(fold == f)
            p = predict(fit(np.flatnonzero(fold != f), f + 1), out)
            held.update((texts[i], v.astype(np.float32)) for i, v in zip(out, p))
    log.info("%s reader: full fit on %d texts", cfg.kind, len(texts))
    reader.heads = [state_of(hd) for hd in fit(np.arange(len(texts)), 0)]
    return reader, held


def write_readings(path: str | Path, readings: dict[str, np.ndarray]) -> None:
    Path(path).write_text(json.dumps({t: [round(float(x), 5) for x in v] for t, v in readings.items()}))


def read_readings(path: str | Path, kind: str = "length") -> dict[str, np.ndarray]:
    """text -> probabilities, as ``write_readings`` wrote them; {} if the file does not exist."""
    n = len(KINDS[kind].labels)
    if not Path(path).exists():
        return {}
    got = read_json(path)
    if not isinstance(got, dict) or not all(isinstance(v, list) and len(v) == n for v in got.values()):
        raise ValueError(f"{path}: expected an object of criterion text -> {n} probabilities")
    return {t: np.asarray(v, np.float32) for t, v in got.items()}


def direction_accuracy(reader: CriterionReader, examples: Sequence[tuple[str, int]]) -> dict[str, float]:
    """How often the reader reads a criterion of one of its classes right, per class (criteria in their
    own frame, as users write them). Length: the sign of P(longer) - P(shorter), turned by a dislike's
    sign. Domain style: the most likely style, over likes only (a dislike names no one style)."""
    out = {}
    if reader.kind.name == "length":
        for side, name in ((1, "concise"), (2, "detailed")):
            items = [t for t, label in examples if label == side]
            if not items:
                continue
            rest, sign = zip(*(split_sign(t) for t in items))
            p = reader.read(list(rest))
            d = (p[:, 1] - p[:, 0]) * np.asarray(sign)
            out[name] = float(np.mean(d > 0 if side == 2 else d < 0))
        return out
    for side, name in enumerate(reader.kind.labels[1:], start=1):
        items = [r for r, s in (split_sign(t) for t, label in examples if label == side) if s > 0]
        if items:
            out[name] = float(np.mean(reader.read(items).argmax(-1) + 1 == side))
    return out
