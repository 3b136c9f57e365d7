"""How well can a text-only judge tell DSP's domain styles apart at all?

A supervised probe is trained to name the style of an answer (academy, business, literature,
plain) from the answers of the DSP queries that are *not* in the domain eval file, then judges the
eval queries' pairs the way the domain eval file asks: under the criteria of style ``w``, the
``w`` answer should beat the ``l`` answer, i.e. the probe's log P(w | answer_w) > log P(w | answer_l).
It is given the true style labels of the other queries (588 with all four styles, in our build),
which no CRM has, so its accuracy is a generous estimate of what this representation can reach on
these answers. Queries missing one of the styles are left out.

    python scripts/domain_ceiling.py --eval artifacts/data-full/eval/domain_style.jsonl [--contextual]

The last probe is the fast CRM's register scorer (``usl.crm.register``, hashed word and character
n-grams, one scorer per style trained pairwise within a query), fitted the same way.

``--contextual`` adds the probe on all-MiniLM-L6-v2 sentence embeddings (256 tokens; about a
minute on 2 cores). Prints overall accuracy and accuracy per ``winner>loser`` contrast.
"""

from __future__ import annotations

import argparse

import numpy as np

from usl.data.io import read_json
from usl.data.pairs.dsp import DOMAIN_FAMILIES
from usl.data.paper_jsonl import read_samples
from usl.paths import shared_data

STYLES = tuple(DOMAIN_FAMILIES)  # academy, business, literature, normal (the paper's "original")


def pairwise_accuracy(logp: np.ndarray) -> tuple[float, dict[str, float]]:
    """logp (queries, 4 answers, 4 classes) -> overall and per-contrast accuracy."""
    per: dict[str, list[bool]] = {}
    for p in logp:
        for i, w in enumerate(STYLES):
            for j, lo in enumerate(STYLES):
                if i != j:
                    per.setdefault(f"{w}>{lo}", []).append(bool(p[i, i] > p[j, i]))
    overall = float(np.mean([x for v in per.values() for x in v]))
    return overall, {k: round(float(np.mean(v)), 3) for k, v in per.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", required=True, help="domain eval JSONL: its prompts are the test queries")
    ap.add_argument("--data", default=None, help="data directory (default: USL_SHARED_DATA or ../shared/data)")
    ap.add_argument("--contextual", action="store_true")
    args = ap.parse_args(argv)

    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    root = shared_data(args.data)
    if root is None:
        raise SystemExit("no data directory: pass --data or set USL_SHARED_DATA")
    items = [x for x in read_json(root / "style" / "dsp_domain_test.json.gz")
             if all(isinstance(x["responses"].get(k), str) and x["responses"][k].strip() for k in STYLES)]
    test_q = {s.prompt for s in read_samples(args.eval)}
    is_test = np.array([x["query"] in test_q for x in items])
    texts = [x["responses"][k] for x in items for k in STYLES]
    y = np.tile(np.arange(len(STYLES)), len(items))
    rows = np.repeat(is_test, len(STYLES))
    train_texts = [t for t, r in zip(texts, rows) if not r]
    test_texts = [t for t, r in zip(texts, rows) if r]
    print(f"{int((~is_test).sum())} training queries, {int(is_test.sum())} test queries")

    probes = {"tf-idf words 1-2": TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
              "tf-idf chars 2-5": TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3,
                                                  sublinear_tf=True, max_features=200_000)}
    for name, vec in probes.items():
        vec.fit(train_texts)
        clf = LogisticRegression(C=10, max_iter=3000).fit(vec.transform(train_texts), y[~rows])
        logp = clf.predict_log_proba(vec.transform(test_texts)).reshape(-1, 4, 4)
        acc, per = pairwise_accuracy(logp)
        print(f"{name}: {acc:.3f} {per}")
    from usl.crm.register import RegisterConfig, fit_register

    groups = [dict(zip(STYLES, texts[4 * i:4 * i + 4])) for i in np.flatnonzero(~is_test)]
    scorer, _ = fit_register(groups, RegisterConfig(labels=STYLES))
    acc, per = pairwise_accuracy(scorer.scores(test_texts).reshape(-1, 4, 4))  # score of class c = its logit
    print(f"register scorer (pairwise within a query): {acc:.3f} {per}")
    if args.contextual:
        from sentence_transformers import SentenceTransformer

        from usl.data.embed import encoder_path

        model = SentenceTransformer(encoder_path(), device="cpu")
        model.max_seq_length = 256
        E = model.encode(texts, batch_size=32, normalize_embeddings=True)
        clf = LogisticRegression(C=1, max_iter=5000).fit(E[~rows], y[~rows])
        acc, per = pairwise_accuracy(clf.predict_log_proba(E[rows]).reshape(-1, 4, 4))
        print(f"MiniLM embeddings: {acc:.3f} {per}")


if __name__ == "__main__":
    main()
