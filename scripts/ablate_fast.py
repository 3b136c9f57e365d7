"""Switch parts of the default judge off at inference and measure each on the eval files.

Each variant changes the loaded judge, not its training: a part whose output no trained layer reads
(the factors, the priors) is switched off exactly; a part a trained layer reads (an answer feature,
a reader's columns) is set to its neutral value (the feature's mean; a reader's "none"), which
measures what the trained model loses without it, not what a model trained without it would score.

    python scripts/ablate_fast.py --data DIR/length_flip.jsonl ... --limit 400 [--variants full,no_quality_head]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from usl.evaluation.report import evaluate
from usl.judges.fast import FastJudge


def _neutral_columns(judge, prefix: str) -> None:
    """Answer features named ``prefix*`` set to their training mean (0 once standardised)."""
    cols = [i for i, n in enumerate(judge.model.cfg.features) if n.startswith(prefix)]
    if not cols:
        raise SystemExit(f"no answer feature starts with {prefix!r}")
    inner = judge.model.answer_repr

    def answer_repr(r, feats, cos_q):
        feats = feats.copy()
        feats[:, cols] = judge.model.feat_mean[cols]
        return inner(r, feats, cos_q)
    judge.model.answer_repr = answer_repr
    judge._answer_repr = None


def _reader_none(judge, reader) -> None:
    def probs(texts):
        p = np.zeros((len(texts), len(reader.kind.labels)), np.float32)
        p[:, 0] = 1.0
        return p
    reader.probs = probs


VARIANTS = {
    "full": lambda j: None,
    "no_gate": lambda j: setattr(j, "quality", None),
    "no_quality_head": lambda j: j.model.beta.data.zero_(),
    "length_boost_1": lambda j: setattr(j.model.cfg, "length_boost", 1.0),
    "score_boost_1": lambda j: setattr(j.model.cfg, "score_boost", 1.0),
    "no_score_prior": lambda j: setattr(j.model.cfg, "score_boost", 0.0),
    "no_style_prior": lambda j: j.model.style_prior.data.zero_(),   # in code that still has it
    "no_style_scores": lambda j: _neutral_columns(j, "style_"),
    "no_register_scores": lambda j: _neutral_columns(j, "register_"),
    "no_domain_reader": lambda j: _reader_none(j, j.model.domain_reader),
    "no_cosine": lambda j: j.model.alpha.data.zero_(),   # in code that still has it
    # the other-register branch, in code that still has it
    "no_other": lambda j: [setattr(j.model.cfg, k, 0.0) for k in ("other_boost", "other_damp", "basis_boost")],
}


def figures(report) -> dict:
    out = {}
    for name, m in report.by_file.items():
        out[name.removesuffix(".jsonl")] = round(m["accuracy"], 4)
    for fam in ("length_concise", "length_detailed"):
        if fam in report.by_family:
            out[fam] = round(report.by_family[fam]["accuracy"], 4)
    out["n"] = report.overall["n"] if hasattr(report, "overall") else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default=None)
    ap.add_argument("--data", action="append", required=True)
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--combine", default="", help="variants applied before each (e.g. no_gate)")
    args = ap.parse_args()
    for v in args.variants.split(","):
        judge = FastJudge(args.weights)
        for c in filter(None, args.combine.split(",")):
            VARIANTS[c](judge)
        with torch.inference_mode():
            VARIANTS[v](judge)
        rep = evaluate(judge, args.data, limit=args.limit, batch_size=512)
        print(json.dumps({"variant": v, "combine": args.combine, **figures(rep)}), flush=True)


if __name__ == "__main__":
    main()
