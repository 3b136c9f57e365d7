"""Would a length reader over a bigger frozen encoder make the judge follow new length wordings better?

The length reader (``criterion_reader.py``) reads frozen all-MiniLM-L6-v2 token states. This probe
trains the same heads (projection, attention pooling, an MLP that also reads the keyword features;
three seeds averaged) over frozen hidden states of another backbone (``--backbone smollm2-135m``:
SmolLM2-135M-Instruct, layers ``--layers``, the criterion optionally put in a ``--frame``), on the
texts `usl train-reader` would train on (the library's training wordings and ``--wordings``, minus
every ``--test`` wording), and reports how often it points each test wording the right way.

With ``--judge-data FILE`` it then judges, with the default judge, each test set's wordings over
FILE (the length flip file) and every ``--guard`` file, twice: as shipped, and with the length prior's
direction taken from this reader (how far a criterion is a length wish stays the shipped length
reader's 1 - P(neither); which way it points is this reader's (P(longer) - P(shorter)) / (P(longer) +
P(shorter)); no trained weight changes). ``--reader DIR`` uses a reader written by `usl train-reader`
instead of training one. Model card, section "Session 24".

    python scripts/length_reader_probe.py --backbone smollm2-135m --layers 10,20,30 \\
        --frame $'Criterion for an answer: {}\\nDoes it ask for a shorter or a longer answer?' \\
        --wordings configs/length_wordings/extra_j.json [...] \\
        --test configs/length_wordings/probe_independent_i.json --test ..._j.json \\
        --judge-data artifacts/data-full/eval/length_flip.jsonl --guard artifacts/data-full/eval/domain_style.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.crm.criteria_lexicon import LEXICON_AXES, lexicon_matrix
from usl.crm.criterion_reader import (LENGTH, CriterionReader, in_reader_frame, library_held_out, library_wordings,
                                      read_wordings)
from usl.crm.fast_model import split_sign


class Head(nn.Module):
    """``criterion_reader._head`` for token states of any width."""

    def __init__(self, dim: int, hidden: int = 256):
        super().__init__()
        self.proj, self.att = nn.Linear(dim, hidden), nn.Linear(hidden, 1)
        self.out = nn.Sequential(nn.Linear(hidden + len(LEXICON_AXES), 128), nn.GELU(), nn.Linear(128, 3))

    def forward(self, h, mask, lex):
        x = self.proj(h.float())
        a = self.att(x).squeeze(-1).masked_fill(mask == 0, -1e9).softmax(-1)
        return self.out(torch.cat([(a[..., None] * x).sum(1), lex], -1))


class BackboneReader:
    """A length reader over frozen hidden states of ``backbone``: ``read(texts)`` -> P(shorter), P(longer)."""

    def __init__(self, backbone: str, layers: list[int], frame: str, home: str | None):
        from transformers import AutoModel

        from usl.crm.backbone import load_tokenizer, resolve_backbone

        path = resolve_backbone(backbone, home=home)
        self.tok = load_tokenizer(path)
        self.tok.padding_side = "right"
        self.enc = AutoModel.from_pretrained(str(path), dtype=torch.float32).eval()
        self.layers, self.frame, self.heads = layers, frame, []
        self._memo: dict[str, np.ndarray] = {}

    def states(self, texts: list[str]):
        hs, ms = [], []
        with torch.inference_mode():
            for i in range(0, len(texts), 64):
                t = self.tok([self.frame.format(x) for x in texts[i:i + 64]], padding="max_length", truncation=True,
                             max_length=64, return_tensors="pt")
                out = self.enc(**t, output_hidden_states=True).hidden_states
                hs.append(torch.cat([out[k] for k in self.layers], -1).half())
                ms.append(t["attention_mask"])
        return torch.cat(hs), torch.cat(ms), torch.from_numpy(lexicon_matrix(texts))

    def fit(self, examples: list[tuple[str, int]], heads: int = 3, epochs: int = 20) -> None:
        h, m, lex = self.states([t for t, _ in examples])
        y = torch.tensor([label for _, label in examples])
        for k in range(heads):
            torch.manual_seed(k)
            hd = Head(h.shape[-1])
            opt = torch.optim.AdamW(hd.parameters(), 1e-3, weight_decay=0.01)
            for _ in range(epochs):
                hd.train()
                perm = torch.randperm(len(y))
                for i in range(0, len(perm), 32):
                    b = perm[i:i + 32]
                    loss = nn.functional.cross_entropy(hd(h[b], m[b], lex[b]), y[b], label_smoothing=0.05)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            self.heads.append(hd.eval())

    def read(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            h, m, lex = self.states(todo)
            with torch.inference_mode():
                p = torch.stack([hd(h, m, lex).softmax(-1) for hd in self.heads]).mean(0).numpy()
            self._memo.update(zip(todo, p))
        return np.stack([self._memo[t][1:] for t in texts]) if texts else np.zeros((0, 2), np.float32)


def training_examples(wordings: list[str], tests: dict[str, list]) -> list[tuple[str, int]]:
    """What `usl train-reader` trains a length reader on, the tests' wordings and the library's held-out ones
    left out."""
    lib = library_wordings(0, LENGTH.name)
    extra = [x for f in wordings for x in read_wordings(f)]
    gone = {split_sign(t)[0] for ex in tests.values() for t, _ in ex} | {split_sign(t)[0] for t in library_held_out(0)}
    return in_reader_frame([x for x in lib + extra if split_sign(x[0])[0] not in gone])


def direction(read, examples: list[tuple[str, int]]) -> dict[str, float]:
    """Share of each side's wordings the reader points the right way (a dislike's sign applied)."""
    out = {}
    for side, name in ((1, "concise"), (2, "detailed")):
        rest, sign = zip(*(split_sign(t) for t, label in examples if label == side))
        p = read(list(rest))
        d = (p[:, 1] - p[:, 0]) * np.asarray(sign)
        out[name] = round(float(np.mean(d > 0 if side == 2 else d < 0)), 3)
    return out


def judge_figures(read, args) -> None:
    """The default judge over --judge-data under each test set's wordings (``criteria_wordings.py``'s
    reckoning: the mean over wordings of the share of pairs judged right, and how many reach 0.95) and over
    each --guard file, as shipped and with this reader giving the length prior's direction."""
    import dataclasses

    from usl.data.paper_jsonl import read_samples
    from usl.evaluation import metrics
    from usl.evaluation.report import family_of, judge_samples
    from usl.judges import fast

    shipped = fast.FastJudge._criteria
    trained = CriterionReader.load(fast.shipped_weights(fast.DEFAULT_WEIGHTS), LENGTH.name)

    def with_direction(self, criteria):
        C, signs = shipped(self, criteria)
        texts = [split_sign(c)[0] for c in criteria]
        if texts:
            q = torch.from_numpy(trained.probs(texts))
            p = torch.from_numpy(np.asarray(read(texts), np.float32))
            C["len"] = (1 - q[:, 0]) * (p[:, 1] - p[:, 0]) / (p[:, 1] + p[:, 0]).clamp(min=1e-6)
        return C, signs

    flip = read_samples(args.judge_data)
    sides = {"concise": "length_concise", "detailed": "length_detailed"}
    sides |= {f: f for f in sides.values()}
    try:
        for name, patch in (("shipped", shipped), ("this reader's direction", with_direction)):
            fast.FastJudge._criteria = patch
            judge = fast.FastJudge(home=args.home)
            for f in args.guard:
                acc = metrics.accuracy(judge_samples(judge, read_samples(f), batch_size=512))[0]
                print(f"{name}: {f}: accuracy {acc:.4f}", flush=True)
            for t in args.test:
                row = {}
                for side, words in json.loads(Path(t).read_text()).items():
                    if side not in sides:  # a neutral side: no length flip pairs to judge it on
                        continue
                    pairs = [x for x in flip if family_of(x) == sides[side]]
                    acc = [float(np.mean([j.label == j.sample.preference for j in judge_samples(
                        judge, [dataclasses.replace(x, criteria=(w,)) for x in pairs], batch_size=512)]))
                        for w in words]
                    row[side] = f"{np.mean(acc):.3f} ({sum(a >= 0.95 for a in acc)}/{len(acc)} >= 0.95)"
                print(f"{name}: {t}: {row}", flush=True)
    finally:
        fast.FastJudge._criteria = shipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="smollm2-135m", help="a backbone spec (usl.crm.backbone)")
    ap.add_argument("--layers", default="10,20,30", help="hidden states read, comma-separated")
    ap.add_argument("--frame", default="{}", help="the criterion put in a text ({} marks where)")
    ap.add_argument("--reader", default=None, help="a `usl train-reader` directory to probe instead of training")
    ap.add_argument("--wordings", action="append", default=[], help="a wordings file to train on; repeatable")
    ap.add_argument("--test", action="append", default=[], help="a wordings file to test on; repeatable")
    ap.add_argument("--judge-data", default=None, help="the length flip file: judge the tests' wordings over it")
    ap.add_argument("--guard", action="append", default=[], help="an eval file judged as it is; repeatable")
    ap.add_argument("--home", default=None, help="usl data home (answer caches, the converted backbone)")
    args = ap.parse_args()

    t0 = time.time()
    tests = {f: read_wordings(f) for f in args.test}
    if args.reader:
        r = CriterionReader.load(args.reader, LENGTH.name)
        if r is None:
            raise SystemExit(f"{args.reader}: no {LENGTH.dir}/")
        read = r.read
    else:
        r = BackboneReader(args.backbone, [int(x) for x in args.layers.split(",")], args.frame, args.home)
        examples = training_examples(args.wordings, tests)
        r.fit(examples)
        print(f"trained on {len(examples)} texts in {time.time() - t0:.0f} s", flush=True)
        read = r.read
    for f, ex in tests.items():
        print(f"reader alone: {f}: {direction(read, ex)}", flush=True)
    if args.judge_data:
        judge_figures(read, args)


if __name__ == "__main__":
    main()
