"""A criterion's sign, read by a learned model: whether it says what the user does not want, and what.

The fast CRM scores how well an answer fits a criterion's text and turns the score by the criterion's sign,
so "Avoid: jargon", "No walls of text" and "I can't stand long-winded replies" are read as dislikes of
"jargon", "walls of text" and "long-winded replies". ``criteria_lexicon.split_sign`` reads this with rules:
the product's "Avoid:" form, a pattern of leading negations, a list of intensifiers to drop ("overly
long"), and lists of faults and of "no particular style" whose dislike is a wish for the virtue. This
reader learns that reading (data programming, as the keyword reader: the rules label data, a model
learns from the labels), so the judge reads criteria with no word list or pattern:

- **data**: the keyword reader's corpus (``keyword_reader.corpus``: about 40,000 criteria texts, none a
  held-out, test, blind or evaluation wording) and recombinations of its openers of dislikes with what
  other texts say (``sign_corpus``), each labelled by ``split_sign``: its sign, and for a dislike which of
  its word pieces the disliked part keeps.
- **model**: the frozen all-MiniLM-L6-v2's token states (its last and third-to-last layers), a projection,
  ``sign_depth`` convolutions over ``kernel`` tokens, and per word piece three numbers: a contribution to
  the sign's logit (summed over the pieces, as the keyword reader sums its axes), whether the piece is part
  of what is disliked, and how likely the disliked part begins there. The disliked part is read a word at
  a time from where it begins (``word_keep``), spaced as the text spaces it; a dislike that drops nothing
  is a like. Reading runs in numpy on MiniLM's states from ONNX Runtime.

The judge, its length reading and its quality gate split criteria with it where the weights hold one
(``sign_reader/`` beside ``keyword_reader/``); weights without one (training, tiny test models) use
``split_sign``, the teacher. ``usl train-signs`` trains it and prints how often it splits the library's
held-out wordings, the blind set and the criteria reader's test files as ``split_sign`` does (docs/log.md,
2026-12-05).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from usl.data.minilm_onnx import MiniLM, frozen
from usl.fast.criteria_lexicon import no_style_phrases, split_sign
from usl.fast.criteria_reading import _norm
from usl.fast.keyword_reader import KeywordReader, KeywordReaderConfig, corpus, held_out_texts, train_head
from usl.fast.lexicon_probe import check_fingerprint, lexicon_fingerprint
from usl.fast.numpy_nn import State, conv1d_same, gelu, linear, load_state, state_of

log = logging.getLogger(__name__)
SIGN_DIR = "sign_reader"
Split = tuple[str, float]  # (what the criterion likes or dislikes, +1 like / -1 dislike)


def _clean(text: str) -> str:
    return text.strip().replace("\u2019", "'")


def _offsets(enc: MiniLM, texts: Sequence[str], max_len: int) -> list[list[tuple[int, int]]]:
    """Each text's character span of each position ``MiniLM.tokens`` gives it ([CLS] and [SEP]: (0, 0))."""
    return [[(0, 0), *spans, (0, 0)] for spans, _ in _pieces(enc, texts, max_len)]


def _pieces(enc: MiniLM, texts: Sequence[str], max_len: int) -> list[tuple[list[tuple[int, int]], bool]]:
    """Each text's word pieces' character spans, as far as ``max_len`` reads, and whether it read them all."""
    out = []
    for e in enc.tokenizer.encode_batch(list(texts)):
        spans = [tuple(o) for o in e.offsets][1:-1]
        out.append((spans[:max_len - 2], len(spans) <= max_len - 2))
    return out


def _said(text: str) -> str:
    return re.sub(r"\W", "", text.lower())


def keep_labels(text: str, rest: str, spans: Sequence[tuple[int, int]]) -> list[float] | None:
    """Which of ``text``'s positions (``spans``) ``rest`` keeps: ``rest`` is ``text`` less some of its
    characters (a leading "Avoid:" or negation, an intensifier, final punctuation), matched from the end.
    1 kept, 0 dropped, -1 for [CLS] and [SEP]; None where ``rest`` is not such a part of ``text``."""
    matched = np.zeros(len(text), bool)
    j = len(rest) - 1
    for i in range(len(text) - 1, -1, -1):
        if j < 0:
            break
        if text[i] == rest[j]:
            matched[i], j = True, j - 1
    if j >= 0:
        return None
    return [-1.0 if s == e else float(matched[s:e].mean() > 0.5) for s, e in spans]


def rebuild(text: str, spans: Sequence[tuple[int, int]], keep: Sequence[float]) -> str:
    """The kept positions' characters, with one space wherever the text has space between two kept ones."""
    out, end = [], None
    for (s, e), k in zip(spans, keep):
        if s == e or k < 0.5:
            continue
        if end is not None and re.search(r"\s", text[end:s]):
            out.append(" ")
        out.append(text[s:e])
        end = e
    return "".join(out)


def word_keep(text: str, spans: Sequence[tuple[int, int]], logits: Sequence[float],
              start: Sequence[float]) -> list[float]:
    """The reader's logits turned into decisions a word at a time. What is disliked begins at the word whose
    first piece has the largest ``start`` logit; the words before it are dropped, and from it on the word
    pieces of one word (between spaces: "don", "'", "t") are kept or dropped together, by their letters' and
    digits' mean ``logits``; of a kept word, trailing punctuation the reader drops is dropped ("text." ->
    "text")."""
    word = [len(re.findall(r"\s+", text[:s].lstrip())) if s != e else -1 for s, e in spans]
    keep = [0.0] * len(spans)
    firsts = {w: word.index(w) for w in set(word) - {-1}}
    if not firsts:
        return keep
    begin = max(firsts, key=lambda w: start[firsts[w]])
    for w in sorted(firsts):
        if w < begin:
            continue
        at = [i for i, x in enumerate(word) if x == w]
        said = [i for i in at if any(ch.isalnum() for ch in text[slice(*spans[i])])] or at
        if w == begin or np.mean([logits[i] for i in said]) > 0:
            for i in at:
                keep[i] = 1.0
            for i in reversed(at[1:]):
                s, e = spans[i]
                if logits[i] > 0 or text[s:e].isalnum():
                    break
                keep[i] = 0.0
    return keep


def _head(cfg: KeywordReaderConfig, width: int = 384):
    """The torch module ``SignReader.from_states`` runs in numpy: (sign logit (n,), keep logits (n, t))."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(width * len(cfg.layers), cfg.hidden)
            self.convs = nn.ModuleList(nn.Conv1d(cfg.hidden, cfg.hidden, cfg.kernel, padding=cfg.kernel // 2)
                                       for _ in range(cfg.sign_depth))
            self.tok = nn.Linear(cfg.hidden, 3)
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, h, mask):
            m = mask[..., None].float()
            x = nn.functional.gelu(self.proj(h)) * m
            for conv in self.convs:  # masked after each: a text reads the same however far its batch is padded
                x = (x + nn.functional.gelu(conv(x.transpose(1, 2)).transpose(1, 2))) * m
            o = self.tok(x)
            return (o[..., 0] * mask).sum(1) + self.bias[0], o[..., 1], o[..., 2]

    return Head()


class SignReader:
    """``split(criteria) -> [(disliked or liked text, sign)]``, as ``split_sign`` reads a criterion."""

    def __init__(self, cfg: KeywordReaderConfig, state: State, taught_by: str):
        self.cfg, self.state, self.taught_by = cfg, state, taught_by
        self._encoder: MiniLM | None = None
        self._memo: dict[str, Split] = {}
        self._lock = threading.Lock()

    def share_encoder(self, encoder: MiniLM) -> None:
        """Read through the criteria tower's all-MiniLM-L6-v2 (one without an adapter) instead of a second copy."""
        self._encoder = encoder

    def states(self, texts: Sequence[str], pad_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        enc = self._encoder or frozen()
        out, mask = enc.states(list(texts), self.cfg.max_len, pad_to)
        return np.concatenate([out[k] for k in self.cfg.layers], -1), mask

    def from_states(self, h: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, t, 384 * len(layers)) token states and their (n, t) mask -> sign logits (n,), keep and start
        logits (n, t)."""
        s, m = self.state, mask[..., None].astype(np.float32)
        x = gelu(linear(h.astype(np.float32), s, "proj")) * m
        for i in range(self.cfg.sign_depth):
            x = (x + gelu(conv1d_same(x, s, f"convs.{i}"))) * m
        o = linear(x, s, "tok")
        return (o[..., 0] * mask).sum(1) + s["bias"][0], o[..., 1], o[..., 2]

    def _read(self, texts: list[str]) -> list[Split]:
        """``texts`` (stripped) split; the model reads them with curly apostrophes made straight, the split
        keeps the user's characters (one for one, so the word pieces' spans hold)."""
        enc = self._encoder or frozen()
        clean = [_clean(t) for t in texts]
        sign, keep, start = self.from_states(*self.states(clean))
        out = []
        for text, z, k, b, (spans, whole) in zip(texts, sign, keep, start, _pieces(enc, clean, self.cfg.max_len)):
            spans = [(0, 0), *spans, (0, 0)]
            rest = rebuild(text, spans, word_keep(text, spans, k[:len(spans)], b[:len(spans)])) if z > 0 else ""
            if rest and not whole:  # past max_len: the disliked part goes on to the end
                rest = rest + text[spans[-2][1]:].rstrip()
            # a dislike names what is disliked without the words that dislike it: one that drops no word, or
            # keeps nothing but punctuation ("Avoid:"), is a like
            out.append((rest, -1.0) if _said(rest) and _said(rest) != _said(text) else (text, 1.0))
        return out

    def split(self, criteria: Sequence[str]) -> list[Split]:
        """Each criterion as (what it likes, +1): the criterion itself, stripped; or (what it dislikes, -1)."""
        texts = [c.strip() for c in criteria]
        with self._lock:
            got = {t: self._memo[t] for t in dict.fromkeys(texts) if t in self._memo}
            todo = [t for t in dict.fromkeys(texts) if t not in got]
            for i in range(0, len(todo), 128):
                got.update(zip(todo[i:i + 128], self._read(todo[i:i + 128])))
            if todo:
                if len(self._memo) + len(todo) > 50_000:
                    self._memo = {}
                self._memo.update((t, got[t]) for t in todo)
        return [got[t] for t in texts]

    def save(self, out_dir: str | Path) -> Path:
        from safetensors.numpy import save_file

        d = Path(out_dir) / SIGN_DIR
        d.mkdir(parents=True, exist_ok=True)
        save_file({k: np.ascontiguousarray(v, dtype=np.float16) for k, v in self.state.items()},
                  str(d / "head.safetensors"))
        (d / "config.json").write_text(json.dumps(asdict(self.cfg) | {"taught_by": self.taught_by}, indent=2))
        return d

    @classmethod
    def load(cls, model_dir: str | Path) -> SignReader | None:
        """The reader saved in ``model_dir/sign_reader/``, or None if there is none."""
        d = Path(model_dir) / SIGN_DIR
        if not (d / "config.json").exists():
            return None
        try:
            raw = json.loads((d / "config.json").read_text())
            taught_by = raw.pop("taught_by")
            cfg = KeywordReaderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
            state = load_state(d / "head.safetensors")
        except Exception as e:  # a torn or foreign file: json, safetensors and dataclass errors alike
            raise ValueError(f"{d}: not a sign reader usl can read ({type(e).__name__}: {e}); retrain it with "
                             "`usl train-signs`") from e
        return cls(cfg, state, taught_by)


def splitter(reader: SignReader | None):
    """``split(criteria) -> [(text, sign)]``: the reader's, else the teacher's (``split_sign``), for weights
    that hold no sign reader."""
    return reader.split if reader is not None else (lambda criteria: [split_sign(c) for c in criteria])


def learned_readers(path: str | Path, recorded: str | None) -> tuple[KeywordReader | None, SignReader | None]:
    """The keyword and sign readers of a weights folder (None where it has none), checked. The heads learned
    the criteria lexicon's reading (fingerprint ``recorded``): the learned readers that read criteria in its
    place must have been taught by that lexicon, and where either is missing, the code's lexicon reads in
    its place and must be that one."""
    keywords, signs = KeywordReader.load(path), SignReader.load(path)
    if keywords is None or signs is None:
        check_fingerprint(recorded, path)
    for reader, what, command in ((keywords, "keyword", "train-keywords"), (signs, "sign", "train-signs")):
        if reader is not None and reader.taught_by != recorded:
            raise ValueError(f"{path}: the {what} reader was taught by a criteria lexicon (fingerprint "
                             f"{reader.taught_by}) other than the one the model was trained on ({recorded}); "
                             f"retrain it with `usl {command}`")
    return keywords, signs


# -- training ---------------------------------------------------------------------------------------

def sign_corpus(cfg: KeywordReaderConfig) -> list[str]:
    """The keyword reader's corpus, and ``cfg.sign_recombined`` texts more: the opener of one of its dislikes
    ("I'm not a fan of ", "Avoid: ", as ``split_sign`` finds them) before what another of its texts says, an
    opener as often as another, so the rare ways of disliking are learned as well as the common ones.
    What follows the opener is, as often as each other, what a dislike dislikes, what follows an opener in any
    text, what follows an opener in a text ``split_sign`` reads as a like all the same ("Don't " + "hold back"),
    a phrase of no particular style ("No " + "particular register", a wish for the plain one, which the
    corpus hardly says), or a like. ``split_sign`` labels them all. Sorted; none held out."""
    texts = sorted({_clean(t) for t in corpus(cfg)} - {""})
    found = [(text, *split_sign(text)) for text in texts]
    openers = sorted({text[:text.rfind(rest)] for text, rest, sign in found  # "No " of "No walls of text."
                      if sign < 0 and rest and text.rfind(rest) > 0
                      and not text[text.rfind(rest) + len(rest):].strip(" .!")})
    disliked = sorted({rest for _, rest, sign in found if sign < 0})
    liked = sorted(text for text, _, sign in found if sign > 0 and len(text.split()) <= 12)
    after = {(text[len(o):], sign) for text, _, sign in found for o in openers
             if text.startswith(o) and len(text) > len(o)}
    unstyled = [f"{p}{end}" for p in no_style_phrases() for end in ("", ".")]
    pools = [p for p in (disliked, sorted(a for a, _ in after), sorted(a for a, sign in after if sign > 0), unstyled,
                         liked) if p]
    rng = random.Random(cfg.seed)
    made = set()
    for i in range(cfg.sign_recombined if openers and pools else 0):
        said = rng.choice(pools[i % len(pools)])
        opener = openers[(i // len(pools)) % len(openers)]  # every opener with every pool
        made.add(opener + (said[:1].lower() + said[1:] if said[1:2].islower() else said))
    held = held_out_texts(cfg)
    return sorted(set(texts) | {t for t in made if _norm(t) not in held})


def fit(cfg: KeywordReaderConfig, texts: Sequence[str] | None = None) -> SignReader:
    """Train the reader on ``texts`` (default: ``sign_corpus(cfg)``), each split by ``split_sign``."""
    import torch

    texts = sorted({_clean(t) for t in (sign_corpus(cfg) if texts is None else texts)} - {""})
    reader = SignReader(cfg, {}, lexicon_fingerprint())
    enc = frozen()
    log.info("sign reader: MiniLM's states of %d texts", len(texts))
    hs, ms, keeps, signs, starts = [], [], [], [], []
    for i in range(0, len(texts), 256):
        batch = texts[i:i + 256]
        h, m = reader.states(batch, cfg.max_len)
        hs.append(h.astype(np.float16))
        ms.append(m)
        for text, spans in zip(batch, _offsets(enc, batch, cfg.max_len)):
            rest, sign = split_sign(text)
            k = keep_labels(text, rest, spans) if sign < 0 else [1.0] * len(spans)
            row = np.full(cfg.max_len, -1.0, np.float32)  # -1: not learned (padding; a dislike's [CLS], [SEP])
            if k is not None:
                row[:len(k)] = k
            keeps.append(row)
            signs.append(float(sign < 0))
            starts.append(int(np.argmax(row == 1)) if sign < 0 and k is not None and (row == 1).any() else -1)
    h, m = torch.from_numpy(np.concatenate(hs)), torch.from_numpy(np.concatenate(ms))
    keep, sign, begin = torch.from_numpy(np.stack(keeps)), torch.tensor(signs), torch.tensor(starts)
    log.info("sign reader: %d dislikes of %d texts", int(sign.sum()), len(texts))
    torch.manual_seed(cfg.seed)
    head = _head(cfg)
    bce = torch.nn.functional.binary_cross_entropy_with_logits

    def loss_of(b):
        width = int(m[b].sum(1).max())
        z, k, s = head(h[b, :width].float(), m[b, :width])
        y, at = keep[b, :width], begin[b]
        loss = bce(z, sign[b]) + (bce(k[y >= 0], y[y >= 0]) if (y >= 0).any() else 0.0)
        if (at >= 0).any():  # where a dislike's disliked part begins, among its word pieces
            s = s.masked_fill(y < 0, -1e4)
            loss = loss + torch.nn.functional.cross_entropy(s[at >= 0], at[at >= 0])
        return loss
    train_head(head, cfg, len(texts), cfg.sign_epochs, loss_of, "sign reader")
    reader.state = state_of(head.eval())
    return reader


def agreement(reader: SignReader, texts: Sequence[str]) -> dict[str, float]:
    """How often the reader splits ``texts`` as ``split_sign`` does: the sign, and the sign with the same
    liked or disliked text (compared case- and punctuation-blind)."""
    texts = sorted({_clean(t) for t in texts} - {""})
    if not texts:
        return {}
    got, want = reader.split(texts), [split_sign(t) for t in texts]
    sign = [a[1] == b[1] for a, b in zip(got, want)]
    whole = [s and _norm(a[0]) == _norm(b[0]) for s, a, b in zip(sign, got, want)]
    return {"texts": len(texts), "dislikes": sum(b[1] < 0 for b in want), "sign": round(float(np.mean(sign)), 4),
            "split": round(float(np.mean(whole)), 4)}
