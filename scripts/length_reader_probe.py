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
instead of training one. What it found: docs/log.md.

    python scripts/length_reader_probe.py --backbone smollm2-135m --layers 10,20,30 \\
        --frame $'Criterion for an answer: {}\\nDoes it ask for a shorter or a longer answer?' \\
        --wordings configs/length_wordings/extra_j.json [...] \\
        --test configs/length_wordings/probe_independent_i.json --test ..._j.json \\
        --judge-data artifacts/data-full/eval/length_flip.jsonl --guard artifacts/data-full/eval/domain_style.jsonl
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.fast.criteria_lexicon import LEXICON_AXES, lexicon_matrix
from usl.fast.criterion_reader import (LENGTH, CriterionReader, ReaderConfig, _head, direction_accuracy,
                                      library_wordings, read_wordings, training_examples)
from usl.fast.criteria_lexicon import split_sign
from usl.types import DataError


class BackboneReader:
    """A length reader over frozen hidden states of ``backbone``: ``read(texts)`` -> P(shorter), P(longer)."""

    kind = LENGTH  # what ``direction_accuracy`` reads of a reader, besides ``read``

    def __init__(self, backbone: str, layers: list[int], frame: str, home: str | None):
        from transformers import AutoModel

        from usl.data.backbone import load_tokenizer, resolve_backbone

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

    def fit(self, examples: list[tuple[str, int]]) -> None:
        """The length reader's heads and ``ReaderConfig``'s training settings (lr, epochs, batch, label
        smoothing, three heads), seeded 0, 1, 2; no cross-fitting (``fit_reader`` reads MiniLM only)."""
        cfg = ReaderConfig(layers=tuple(self.layers))
        h, m, lex = self.states([t for t, _ in examples])
        y = torch.tensor([label for _, label in examples])
        width = h.shape[-1] // len(self.layers)
        for k in range(cfg.heads):
            torch.manual_seed(k)
            hd = _head(cfg, len(LEXICON_AXES), width)
            opt = torch.optim.AdamW(hd.parameters(), cfg.lr, weight_decay=0.01)
            for _ in range(cfg.epochs):
                hd.train()
                perm = torch.randperm(len(y))
                for i in range(0, len(perm), cfg.batch):
                    b = perm[i:i + cfg.batch]
                    loss = nn.functional.cross_entropy(hd(h[b].float(), m[b], lex[b]), y[b],
                                                       label_smoothing=cfg.label_smoothing)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            self.heads.append(hd.eval())

    def read(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            h, m, lex = self.states(todo)
            with torch.inference_mode():
                p = torch.stack([hd(h.float(), m, lex).softmax(-1) for hd in self.heads]).mean(0).numpy()
            self._memo.update(zip(todo, p))
        return np.stack([self._memo[t][1:] for t in texts]) if texts else np.zeros((0, 2), np.float32)


def examples_for(extra: list[tuple[str, int]], tests: dict[str, list]) -> list[tuple[str, int]]:
    """What `usl train-reader` trains a length reader on with these ``--wordings`` files' wordings (``extra``)
    and ``--test`` files'."""
    return training_examples(library_wordings(0, LENGTH.name), extra, tests.values(), 0)[0]


def judge_figures(read, args, flip: list, guards: dict[str, list]) -> None:
    """The default judge over --judge-data under each test set's length wordings (``criteria_wordings.py``'s
    reckoning: the mean over wordings of the share of pairs judged right, and how many reach 0.95) and over
    each --guard file (``flip`` and ``guards``, read once), as shipped and with this reader giving the length
    prior's direction."""
    from usl.evaluation import metrics
    from usl.evaluation.report import judge_samples
    from usl.judges import fast

    wordings = _criteria_wordings()
    shipped = fast.FastJudge._criteria

    def with_direction(self, criteria):
        C, signs = shipped(self, criteria)
        texts = [split_sign(c)[0] for c in criteria]
        if texts:  # the judge's own length reader (memoised, on its MiniLM pass) says how far it is a length wish
            q = torch.from_numpy(self.model.reader.probs(texts))
            p = torch.from_numpy(np.asarray(read(texts), np.float32))
            C["len"] = (1 - q[:, 0]) * (p[:, 1] - p[:, 0]) / (p[:, 1] + p[:, 0]).clamp(min=1e-6)
        return C, signs

    try:
        for name, patch in (("shipped", shipped), ("this reader's direction", with_direction)):
            fast.FastJudge._criteria = patch
            judge = fast.FastJudge(home=args.home)
            for f, samples in guards.items():
                acc = metrics.accuracy(judge_samples(judge, samples, batch_size=512))[0]
                print(f"{name}: {f}: accuracy {acc:.4f}", flush=True)
            for t in args.test:
                probe = {fam: w for fam, w in wordings.read_probe(t).items() if fam.startswith("length_")}
                per = wordings.per_wording(judge, flip, probe)
                row = {fam: f"{np.mean(list(v.values())):.3f} ({sum(a >= 0.95 for a in v.values())}/{len(v)} >= 0.95)"
                       for fam, v in per.items()}
                print(f"{name}: {t}: {row}", flush=True)
    finally:
        fast.FastJudge._criteria = shipped


def _criteria_wordings():
    """``scripts/criteria_wordings.py`` as a module (its probe-file reading and per-wording accuracy)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("criteria_wordings", Path(__file__).with_name("criteria_wordings.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="smollm2-135m", help="a backbone spec (usl.data.backbone)")
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
    try:  # every file read, and the layers parsed, before anything is trained or judged
        tests = {f: read_wordings(f) for f in args.test}
        try:
            layers = [int(x) for x in args.layers.split(",")]
        except ValueError:
            raise ValueError(f"--layers {args.layers!r}: expected layer numbers separated by commas") from None
        extra = [x for f in args.wordings for x in read_wordings(f)]
        flip, guards = [], {}
        if args.judge_data:
            from usl.data.paper_jsonl import read_samples

            flip, guards = read_samples(args.judge_data), {f: read_samples(f) for f in args.guard}
    except (DataError, OSError, ValueError) as e:
        raise SystemExit(f"error: {e}") from e
    if args.reader:
        r = CriterionReader.load(args.reader, LENGTH.name)
        if r is None:
            raise SystemExit(f"{args.reader}: no {LENGTH.dir}/")
    else:
        r = BackboneReader(args.backbone, layers, args.frame, args.home)
        examples = examples_for(extra, tests)
        r.fit(examples)
        print(f"trained on {len(examples)} texts in {time.time() - t0:.0f} s", flush=True)
    for f, ex in tests.items():
        print(f"reader alone: {f}: { {k: round(v, 3) for k, v in direction_accuracy(r, ex).items()} }", flush=True)
    if args.judge_data:
        judge_figures(r.read, args, flip, guards)


if __name__ == "__main__":
    main()
