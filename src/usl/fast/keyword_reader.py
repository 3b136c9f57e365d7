"""A criterion's keyword axes, read by a learned model: the criteria lexicon is its teacher, not the judge's
reader.

The fast CRM's criterion input and the length and domain readers take, beside MiniLM's reading of a
criterion, 17 signed keyword axes (``criteria_lexicon.LEXICON_AXES``): how far the criterion asks for or
against short answers, long ones, an academic register, lists, examples, ..., and whether it negates.
``criteria_lexicon`` computes them with word lists, rules of negation scope and a sentiment lexicon, and
only for the words and constructions it lists. This reader learns that reading (data programming: the
rules label data, a model learns from the labels and reads what they do not list; Ratner et al. 2016):

- **data**: about 40,000 texts labelled by the lexicon. The criteria library's training wordings and the
  criteria reader's wordings files (``configs/criteria_reader.yaml``), the training pairs' criteria,
  sentences of the shared data's grading rubrics, the lexicon's own words in short frames said and negated
  ("Keep it {w}.", "I can't stand {w} replies.") and in pairs ("{a}, but not {b}."), and each word inside
  a sentence that says nothing the lexicon reads ("Answers that respect my time, by being {w}."). None is
  a held-out wording of the library, a test file's, the blind set's or an evaluation pair's criterion.
- **model**: the frozen all-MiniLM-L6-v2's token states (its last and third-to-last layers, as the other
  readers), a projection, a convolution over five tokens (a negation's scope), and per token a contribution
  to each axis; an axis is the tanh of the contributions' sum, as the lexicon sums a sentence's hits.
  1 MB of fp16 weights; reading runs in numpy on MiniLM's states from ONNX Runtime.

The judge reads criteria with it (``usl.fast.scorer.read_weights`` loads it from the fast CRM's folder,
``keyword_reader/``); the heads that take the axes were trained on the lexicon's readings of their
training texts, which this reader reproduces (its readings of the library's held-out wordings agree with
the lexicon's on each axis 0.98-0.99 of the time, `usl train-keywords` prints them). Where the two part
on wordings neither saw, the reader reads the whole sentence ("Keep it short. I don't have time to read an
essay." is short, not short and long alike). Figures: docs/log.md, 2026-12-04.

Files in ``keyword_reader/``: ``config.json`` (the recipe and the lexicon's fingerprint it was taught
by) and ``head.safetensors``.
"""

from __future__ import annotations

import gzip
import json
import logging
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from usl.data.io import read_recipe
from usl.data.minilm_onnx import MiniLM, frozen
from usl.fast import criteria_lexicon
from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix, split_sign
from usl.fast.criteria_reading import (CriteriaReaderConfig, _norm, blind_set, library_held_out_set, training_set,
                                       wordings_set)
from usl.fast.lexicon_probe import lexicon_fingerprint
from usl.fast.numpy_nn import State, conv1d_same, gelu, linear, load_state, state_of

log = logging.getLogger(__name__)
KEYWORD_DIR = "keyword_reader"

# Frames the lexicon's words are said in, as a like, a dislike, a judgement or a question; the lexicon labels
# each text, so a frame need not say which way it points.
FRAMES = ("{w}", "{W}.", "{W} answers.", "Keep it {w}.", "I want {w} replies.", "Please be {w}.",
          "I prefer {w} responses.", "Make it {w}.", "Answers should be {w}.", "No {w} answers.", "Not {w}.",
          "Don't be {w}.", "I don't want {w} answers.", "Avoid {w} responses.", "{W} answers annoy me.",
          "I can't stand {w} replies.", "Never {w}.", "Nothing {w}, please.", "I hate when answers are {w}.",
          "{W} replies are great.", "When answers get {w}, I stop reading.", "I love it when the answer is {w}.",
          "Avoid: {w}", "Avoid: {w} answers", "Please, nothing {w}.", "The more {w}, the better.",
          "{W} is what I'm after.", "Answers that aren't {w} are useless to me.", "Give me {w}.",
          "I'd rather you not be {w}.", "Responses that are {w} tire me out.", "Is the answer {w}?")
PAIRS = ("{A} and {b}.", "{A}, but not {b}.", "{A}; no {b}.", "I like {a} answers that are also {b}.",
         "Be {a}, never {b}.", "Don't be {a}; be {b}.", "No {a}, no {b}.", "{A} or {b}, either is fine.")
# a word inside a sentence the lexicon reads nothing in ({n}: that sentence)
EMBEDDED = ("{n}, by being {w}.", "{n}; keep it {w}.", "{n}, and please be {w}.", "{n}, but nothing {w}.",
            "{W} please: {n2}.", "{n}. {W} answers only.", "{n} by being {w}.", "{n}, so I want {w} answers.",
            "{n}, so no {w} answers.", "{n}; I can't stand {w} replies.", "I like it {w}, since {n2}.",
            "{n}. Don't be {w}.", "{n}, which is why {w} is best.", "{n} and it should never be {w}.",
            "{n}; {w} answers tire me out.")


@dataclass(frozen=True)
class KeywordReaderConfig:
    """The recipe of the keyword reader (``configs/keyword_reader.yaml``)."""

    criteria_reader: str = field(default="configs/criteria_reader.yaml", metadata={
        "help": "The criteria reader's recipe: its wordings files are read, its test files never."})
    train: tuple[str, ...] = field(default=(), metadata={"help": "Training pairs (JSONL) whose criteria are read."})
    rubrics: str = field(default="", metadata={
        "help": "The shared data's biggen_bench_instances.json.gz: its rubrics' sentences are read ('' for none)."})
    eval_dir: str = field(default="", metadata={"help": "Evaluation pairs' folder: their criteria are never read."})
    pairs: int = field(default=4000, metadata={"help": "Texts of two of the lexicon's words."})
    embedded: int = field(default=9000, metadata={"help": "Texts of a word inside a sentence of no keyword."})
    layers: tuple[int, ...] = field(default=(-1, -3), metadata={"help": "MiniLM hidden states read."})
    max_len: int = field(default=48, metadata={"help": "Tokens read of a criterion."})
    hidden: int = field(default=256, metadata={"help": "Width of the projection and the convolution."})
    kernel: int = field(default=5, metadata={"help": "Tokens the convolution spans."})
    epochs: int = field(default=12, metadata={"help": "Epochs."})
    sign_depth: int = field(default=2, metadata={"help": "Convolutions of the sign reader (usl.fast.sign_reader)."})
    sign_epochs: int = field(default=12, metadata={"help": "Epochs of the sign reader."})
    sign_recombined: int = field(default=16000, metadata={
        "help": "Texts the sign reader adds: an opener of one dislike before what another text says."})
    lr: float = field(default=2e-3, metadata={"help": "Peak AdamW learning rate (one cycle)."})
    batch: int = field(default=64, metadata={"help": "Batch size."})
    seed: int = field(default=0, metadata={"help": "Seed of the texts' sampling, the initialisation and batches."})

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Sequence[str] = ()) -> KeywordReaderConfig:
        """The recipe at ``path``, then ``key=value`` overrides (YAML values)."""
        return read_recipe(cls, path, overrides)


def _head(cfg: KeywordReaderConfig, width: int = 384):
    """The torch module ``KeywordReader.from_states`` runs in numpy."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(width * len(cfg.layers), cfg.hidden)
            self.conv = nn.Conv1d(cfg.hidden, cfg.hidden, cfg.kernel, padding=cfg.kernel // 2)
            self.tok = nn.Linear(cfg.hidden, len(LEXICON_AXES))
            self.bias = nn.Parameter(torch.zeros(len(LEXICON_AXES)))

        def forward(self, h, mask):
            m = mask[..., None].float()
            x = nn.functional.gelu(self.proj(h)) * m
            x = x + nn.functional.gelu(self.conv(x.transpose(1, 2)).transpose(1, 2))
            return torch.tanh((self.tok(x) * m).sum(1) + self.bias)

    return Head()


class KeywordReader:
    """``matrix(texts) -> (n, len(LEXICON_AXES))``: each criterion text's keyword axes (after ``split_sign``,
    as the lexicon's are read), in [-1, 1] (the negation axis in [0, 1])."""

    def __init__(self, cfg: KeywordReaderConfig, state: State, taught_by: str):
        self.cfg, self.state, self.taught_by = cfg, state, taught_by
        self._encoder: MiniLM | None = None
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def share_encoder(self, encoder: MiniLM) -> None:
        """Read through the criteria tower's all-MiniLM-L6-v2 (one without an adapter) instead of a second copy."""
        self._encoder = encoder

    def from_states(self, h: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(n, t, 384 * len(layers)) token states and their (n, t) mask -> (n, axes)."""
        s, m = self.state, mask[..., None].astype(np.float32)
        x = gelu(linear(h.astype(np.float32), s, "proj")) * m
        x = x + gelu(conv1d_same(x, s, "conv"))
        return np.tanh((linear(x, s, "tok") * m).sum(1) + s["bias"]).astype(np.float32)

    def states(self, texts: Sequence[str], pad_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        enc = self._encoder or frozen()
        out, mask = enc.states(list(texts), self.cfg.max_len, pad_to)
        return np.concatenate([out[k] for k in self.cfg.layers], -1), mask

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, len(LEXICON_AXES)), np.float32)
        with self._lock:
            got = {t: self._memo[t] for t in dict.fromkeys(texts) if t in self._memo}
            todo = [t for t in dict.fromkeys(texts) if t not in got]
            for i in range(0, len(todo), 128):
                batch = todo[i:i + 128]
                got.update(zip(batch, self.from_states(*self.states(batch))))
            if todo:
                if len(self._memo) + len(todo) > 50_000:
                    self._memo = {}
                self._memo.update((t, got[t]) for t in todo)
            return np.stack([got[t] for t in texts])

    def save(self, out_dir: str | Path) -> Path:
        from safetensors.numpy import save_file

        d = Path(out_dir) / KEYWORD_DIR
        d.mkdir(parents=True, exist_ok=True)
        save_file({k: np.ascontiguousarray(v, dtype=np.float16) for k, v in self.state.items()},
                  str(d / "head.safetensors"))
        (d / "config.json").write_text(json.dumps(asdict(self.cfg) | {"axes": list(LEXICON_AXES),
                                                                      "taught_by": self.taught_by}, indent=2))
        return d

    @classmethod
    def load(cls, model_dir: str | Path) -> KeywordReader | None:
        """The reader saved in ``model_dir/keyword_reader/``, or None if there is none."""
        d = Path(model_dir) / KEYWORD_DIR
        if not (d / "config.json").exists():
            return None
        try:
            raw = json.loads((d / "config.json").read_text())
            axes, taught_by = tuple(raw.pop("axes")), raw.pop("taught_by")
            cfg = KeywordReaderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
            state = load_state(d / "head.safetensors")
        except Exception as e:  # a torn or foreign file: json, safetensors and dataclass errors alike
            raise ValueError(f"{d}: not a keyword reader usl can read ({type(e).__name__}: {e}); retrain it with "
                             "`usl train-keywords`") from e
        if axes != LEXICON_AXES:
            raise ValueError(f"{d}: reads the keyword axes {list(axes)}, this usl's are {list(LEXICON_AXES)}; "
                             "retrain it with `usl train-keywords`")
        return cls(cfg, state, taught_by)


# -- training ---------------------------------------------------------------------------------------

def held_out_texts(cfg: KeywordReaderConfig) -> set[str]:
    """What the reader never trains on, compared case- and punctuation-blind, whole and as ``split_sign``
    leaves it: the library's held-out wordings, the criteria reader's test files and blind set, and the
    criteria of the evaluation pairs."""
    rc = CriteriaReaderConfig.from_yaml(cfg.criteria_reader)
    held = [x.text for x in library_held_out_set(rc.library_seed)] + [x.text for x in blind_set()]
    held += [x.text for f in rc.test for x in wordings_set(f)]
    if cfg.eval_dir:
        files = sorted(Path(cfg.eval_dir).glob("*.jsonl"))
        if not files:
            raise FileNotFoundError(f"eval_dir {cfg.eval_dir}: no evaluation pairs (*.jsonl) there to hold out; "
                                    "build them with `usl data build-train` first")
        for f in files:
            for line in f.read_text().splitlines():
                pair = json.loads(line)
                held += [c for key in ("criteria", "loser_criteria") for c in pair.get(key) or []]
    return {_norm(t) for t in held} | {_norm(split_sign(t)[0]) for t in held}


def corpus(cfg: KeywordReaderConfig) -> list[str]:
    """The texts the reader learns the lexicon's reading of (the module's doc), sorted."""
    for f in (cfg.criteria_reader, *cfg.train, *([cfg.rubrics] if cfg.rubrics else [])):
        if not Path(f).exists():
            raise FileNotFoundError(f"keyword reader recipe: {f} does not exist")
    natural = {x.text for x in training_set(CriteriaReaderConfig.from_yaml(cfg.criteria_reader))[0]}
    for f in cfg.train:
        for line in Path(f).read_text().splitlines():
            natural |= set(json.loads(line).get("criteria") or [])
    if cfg.rubrics:
        with gzip.open(cfg.rubrics, "rt") as fh:
            for item in json.load(fh).values():
                for text in (item.get("score_rubric") or {}).values():
                    if isinstance(text, str):
                        natural |= {s.strip() for s in re.split(r"(?<=[.?!])\s+", text) if 3 <= len(s.split()) <= 40}
    natural = {t for t in natural if t.strip()}
    vocab = {w for t in natural for w in re.findall(r"[a-z][a-z'-]+", t.lower())}
    terms = set()
    for w in criteria_lexicon.axis_words():
        if re.fullmatch(r"[a-z][a-z' ;-]*[a-z]", w) and (w in vocab or " " in w):
            terms.add(w)
        else:  # a stem ("elaborat", "summar") or a word the texts lack: its forms in the texts, else itself
            terms |= set(sorted(v for v in vocab if v.startswith(w))[:3]) or {w}
    terms = sorted(terms)
    rng = random.Random(cfg.seed)
    up = lambda s: s[:1].upper() + s[1:]
    made = {f.format(w=w, W=up(w)) for w in terms for f in FRAMES}
    for _ in range(cfg.pairs):
        a, b = rng.sample(terms, 2)
        made.add(rng.choice(PAIRS).format(a=a, b=b, A=up(a), B=up(b)))
    texts = natural | made
    texts |= {split_sign(t)[0] for t in texts}
    held = held_out_texts(cfg)
    plain = sorted(t for t, row in zip(sorted(natural), lexicon_matrix(sorted(natural)))
                   if not row.any() and 4 <= len(t.split()) <= 14 and t[:1].isupper() and _norm(t) not in held)
    words = [w for w in terms if re.fullmatch(r"[a-z][a-z' -]*[a-z]", w)]
    if plain and words:
        for _ in range(cfg.embedded):
            n = rng.choice(plain).rstrip(".!?")
            w = rng.choice(words)
            texts.add(rng.choice(EMBEDDED).format(n=n, n2=n[:1].lower() + n[1:], w=w, W=up(w)))
    return sorted(t for t in texts if t.strip() and _norm(t) not in held)


def fit(cfg: KeywordReaderConfig, texts: Sequence[str] | None = None) -> KeywordReader:
    """Train the reader on ``texts`` (default: ``corpus(cfg)``), each labelled by the lexicon."""
    import torch

    texts = list(corpus(cfg) if texts is None else texts)
    reader = KeywordReader(cfg, {}, lexicon_fingerprint())
    log.info("keyword reader: MiniLM's states of %d texts", len(texts))
    hs, ms = [], []
    for i in range(0, len(texts), 256):  # half precision as read: 40,000 texts' states take 3 GB so
        h, m = reader.states(texts[i:i + 256], cfg.max_len)
        hs.append(h.astype(np.float16))
        ms.append(m)
    h, m = torch.from_numpy(np.concatenate(hs)), torch.from_numpy(np.concatenate(ms))
    y = torch.from_numpy(lexicon_matrix(texts))
    torch.manual_seed(cfg.seed)
    head = _head(cfg)
    train_head(head, cfg, len(texts), cfg.epochs, lambda b: ((head(h[b].float(), m[b]) - y[b]) ** 2).mean(),
               "keyword reader")
    reader.state = state_of(head.eval())
    return reader


def train_head(head, cfg: KeywordReaderConfig, n: int, epochs: int, loss_of, what: str) -> None:
    """AdamW with a one-cycle learning rate over ``epochs`` of ``n`` samples in seeded batches;
    ``loss_of(indices)`` is a batch's loss. The keyword and sign readers' training loop."""
    import torch

    opt = torch.optim.AdamW(head.parameters(), cfg.lr, weight_decay=0.01)
    per_epoch = (n + cfg.batch - 1) // cfg.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, cfg.lr, total_steps=max(1, epochs * per_epoch))
    g = torch.Generator().manual_seed(cfg.seed)
    for epoch in range(epochs):
        perm, total = torch.randperm(n, generator=g), 0.0
        for i in range(0, n, cfg.batch):
            b = perm[i:i + cfg.batch]
            loss = loss_of(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(b)
        log.info("%s: epoch %d of %d, loss %.5f", what, epoch + 1, epochs, total / n)


def agreement(reader: KeywordReader, texts: Sequence[str]) -> dict[str, float]:
    """How often the reader and the lexicon read each axis the same way (for, against or neither, at 0.25)
    on ``texts`` (as ``split_sign`` leaves them), and how often a text's every axis agrees."""
    rests = sorted({split_sign(t)[0] for t in texts})
    if not rests:
        return {}
    three = lambda v: np.where(v > 0.25, 1, np.where(v < -0.25, -1, 0))
    same = three(reader.matrix(rests)) == three(lexicon_matrix(rests))
    return {"texts": len(rests), "every_axis": round(float(same.all(1).mean()), 4)} | {
        a: round(float(same[:, i].mean()), 4) for i, a in enumerate(LEXICON_AXES)}
