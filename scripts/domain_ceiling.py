"""How well can a text-only judge tell DSP's domain styles apart at all?

A supervised probe is trained to name the style of an answer (academy, business, literature,
plain) from the answers of the DSP queries that are *not* in the domain eval file, then judges the
eval queries' pairs the way the domain eval file asks: under the criteria of style ``w``, the
``w`` answer should beat the ``l`` answer, i.e. the probe's log P(w | answer_w) > log P(w | answer_l).
It is given the true style labels of the other queries (588 with all four styles, in our build),
which no CRM has, so its accuracy is a generous estimate of what this representation can reach on
these answers. Queries missing one of the styles are left out.

    python scripts/domain_ceiling.py --eval artifacts/data-full/eval/domain_style.jsonl [--contextual]

The last probe is the fast CRM's register scorer (``usl.fast.register``, hashed word and character
n-grams, one scorer per style trained pairwise within a query), fitted the same way.

``--contextual`` adds the probe on all-MiniLM-L6-v2 sentence embeddings (256 tokens; about a
minute on 2 cores). ``--finetune`` adds all-MiniLM-L6-v2 fine-tuned the register scorer's way (a
score per style for each answer, mean-pooled, trained with a softmax over the four answers of a
query for each style), once per ``--ft`` setting ``lr,epochs,max_len,seed[,lora_r]`` (lora_r 0 =
every weight); it wants a GPU (about 30 s a setting on an H200) and only torch, transformers and
peft, so ``--only-finetune`` skips the scikit-learn probes on a machine without them, and
``--encoder`` points at a copy of the encoder there; a decoder such as SmolLM2-135M (a directory
``usl.data.backbone.convert_gguf`` wrote) is read the same way, LoRA on all its linear layers. Prints
overall accuracy and accuracy per ``winner>loser`` contrast. ``--pairwise`` (same settings) reads two
answers of a query in one input instead, the paper's pairwise reading applied to style alone
(``pairwise_probe``).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from usl.data.io import read_json
from usl.data.pairs.dsp import DOMAIN_FAMILIES
from usl.data.paper_jsonl import read_samples
from usl.paths import shared_data

STYLES = tuple(DOMAIN_FAMILIES)  # academy, business, literature, normal (the paper's "original")


def contrast_accuracy(wins: np.ndarray) -> tuple[float, dict[str, float]]:
    """wins (queries, 4, 4): ``wins[q, w, l]``, the ``w`` answer beat the ``l`` answer under ``w``'s
    criteria -> overall and per-contrast accuracy (the diagonal is not read)."""
    per = {f"{w}>{lo}": round(float(np.mean(wins[:, i, j])), 3)
           for i, w in enumerate(STYLES) for j, lo in enumerate(STYLES) if i != j}
    off = ~np.eye(len(STYLES), dtype=bool)
    return float(np.mean(wins[:, off])), per


def pairwise_accuracy(logp: np.ndarray) -> tuple[float, dict[str, float]]:
    """logp (queries, 4 answers, 4 classes) -> overall and per-contrast accuracy:
    ``logp[w, w] > logp[l, w]``."""
    own = np.diagonal(logp, axis1=1, axis2=2)                  # (queries, w): logp[w, w]
    return contrast_accuracy(own[:, :, None] > logp.transpose(0, 2, 1))


def pairwise_diff_accuracy(d: np.ndarray) -> tuple[float, dict[str, float]]:
    """d (queries, 4, 4, 4 styles) from ``pairwise_probe`` -> overall and per-contrast accuracy:
    ``d[w, l, w] > 0``."""
    return contrast_accuracy(np.diagonal(d, axis1=1, axis2=3).transpose(0, 2, 1) > 0)


def _trainable(encoder: str, lr: float, steps: int, seed: int, lora_r: int):
    """(tokenizer, encoder, linear head per style, optimizer, one-cycle schedule, device) for a probe:
    every weight trained, or a LoRA of rank ``lora_r`` (a decoder gets it on all its linear layers)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tok = AutoTokenizer.from_pretrained(encoder)
    if tok.pad_token is None:  # a decoder's tokenizer (SmolLM2 has none): padding is masked out anyway
        tok.pad_token = tok.eos_token
    enc = AutoModel.from_pretrained(encoder, dtype=torch.float32).to(dev)
    if lora_r:
        from peft import LoraConfig, get_peft_model

        bert = enc.config.model_type in ("bert", "roberta", "xlm-roberta")
        enc = get_peft_model(enc, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.05,
                                             target_modules=["query", "key", "value", "dense"] if bert
                                             else "all-linear"))
    head = torch.nn.Linear(enc.config.hidden_size, len(STYLES)).to(dev)
    opt = torch.optim.AdamW([{"params": [p for p in enc.parameters() if p.requires_grad], "lr": lr},
                             {"params": head.parameters(), "lr": 1e-3}], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[lr, 1e-3], total_steps=steps, pct_start=0.1)
    return tok, enc, head, opt, sched, dev


def _pooled_head(enc, head, x, dev: str):
    """The head over the mean of the encoder's last states (padding masked out), bf16 on a GPU."""
    import torch

    with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
        h = enc(**x).last_hidden_state
    m = x["attention_mask"].unsqueeze(-1).float()
    return head((h.float() * m).sum(1) / m.sum(1))


def _fit(order: list, epochs: int, batch: int, seed: int, enc, opt, sched, loss_of) -> None:
    """``epochs`` passes over ``order`` (shuffled each time, seeded) in batches, minimizing ``loss_of``."""
    rng = random.Random(seed)
    order = list(order)
    for _ in range(epochs):
        rng.shuffle(order)
        enc.train()
        for i in range(0, len(order), batch):
            loss = loss_of(order[i:i + batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    enc.eval()


def finetuned_probe(train: list[list[str]], test: list[list[str]], encoder: str, lr: float, epochs: int,
                    max_len: int, seed: int, lora_r: int = 0, batch: int = 8) -> np.ndarray:
    """Fine-tune ``encoder`` on the training queries' answers (4 per query, in STYLES order) and
    return the test answers' style scores, (test queries, 4 answers, 4 styles)."""
    import torch

    steps = epochs * ((len(train) + batch - 1) // batch)
    tok, enc, head, opt, sched, dev = _trainable(encoder, lr, steps, seed, lora_r)

    def scores(queries: list[list[str]]) -> "torch.Tensor":
        x = tok([t for q in queries for t in q], truncation=True, max_length=max_len, padding=True,
                return_tensors="pt").to(dev)
        return _pooled_head(enc, head, x, dev).view(len(queries), len(STYLES), len(STYLES))

    def loss_of(b: list[list[str]]) -> "torch.Tensor":
        logits = scores(b).permute(0, 2, 1).reshape(-1, len(STYLES))  # (query x style, answer)
        return torch.nn.functional.cross_entropy(logits, torch.arange(len(STYLES), device=dev).repeat(len(b)))

    _fit(train, epochs, batch, seed, enc, opt, sched, loss_of)
    with torch.no_grad():
        return torch.cat([scores(test[i:i + 16]) for i in range(0, len(test), 16)]).float().cpu().numpy()


def pairwise_probe(train: list[list[str]], test: list[list[str]], encoder: str, lr: float, epochs: int,
                   max_len: int, seed: int, lora_r: int = 0, batch: int = 4) -> np.ndarray:
    """The paper's pairwise reading for style alone: ``encoder`` reads two answers of one query in one
    input (``x [SEP] y``, cut longest-first to ``max_len`` tokens) and a linear head says, per style,
    how much more ``x`` is in that style than ``y``; the score ``d(x, y) = f(x, y) - f(y, x)`` is
    antisymmetric, so position carries no signal. Trained on every ordered pair of a training query's
    four answers (logistic loss: ``d(x_i, x_j)`` positive for style i, negative for style j). Returns
    ``d`` for the test queries, (queries, 4, 4, 4 styles), which ``pairwise_diff_accuracy`` reads."""
    import torch

    steps = epochs * ((len(train) + batch - 1) // batch)
    tok, enc, head, opt, sched, dev = _trainable(encoder, lr, steps, seed, lora_r)
    n = len(STYLES)
    ordered = [(i, j) for i in range(n) for j in range(n) if i != j]
    idx_i = torch.tensor([i for i, _ in ordered], device=dev)
    idx_j = torch.tensor([j for _, j in ordered], device=dev)

    def diffs(queries: list[list[str]]) -> "torch.Tensor":
        """(queries, n, n, styles): d[q, i, j] = f(x_i, x_j) - f(x_j, x_i), zero on the diagonal."""
        x = tok([q[i] for q in queries for i, _ in ordered], [q[j] for q in queries for _, j in ordered],
                truncation="longest_first", max_length=max_len, padding=True, return_tensors="pt").to(dev)
        f = _pooled_head(enc, head, x, dev).view(len(queries), len(ordered), n)
        full = torch.zeros(len(queries), n, n, n, device=dev)
        full[:, idx_i, idx_j] = f
        return full - full.transpose(1, 2)

    def loss_of(b: list[list[str]]) -> "torch.Tensor":
        d = diffs(b)[:, idx_i, idx_j]                                          # (queries, pairs, styles)
        own = d.gather(2, idx_i.view(1, -1, 1).expand(d.shape[0], -1, 1))
        other = d.gather(2, idx_j.view(1, -1, 1).expand(d.shape[0], -1, 1))
        return (torch.nn.functional.softplus(-own) + torch.nn.functional.softplus(other)).mean()

    _fit(train, epochs, batch, seed, enc, opt, sched, loss_of)
    with torch.no_grad():
        return torch.cat([diffs(test[i:i + 8]) for i in range(0, len(test), 8)]).float().cpu().numpy()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", required=True, help="domain eval JSONL: its prompts are the test queries")
    ap.add_argument("--data", default=None, help="data directory (default: USL_SHARED_DATA or ../shared/data)")
    ap.add_argument("--contextual", action="store_true")
    ap.add_argument("--finetune", action="store_true", help="add the fine-tuned MiniLM probe (a GPU helps)")
    ap.add_argument("--only-finetune", action="store_true", help="only the fine-tuned probe")
    ap.add_argument("--ft", action="append", default=[], help="lr,epochs,max_len,seed[,lora_r]; repeatable "
                                                              "(default 3e-5,8,256,0)")
    ap.add_argument("--pairwise", action="append", default=[], help="lr,epochs,max_len,seed[,lora_r]: the "
                                                                    "pairwise probe (two answers in one input); "
                                                                    "repeatable")
    ap.add_argument("--encoder", default=None, help="encoder directory (default: the packaged MiniLM); a decoder "
                                                    "such as SmolLM2 is read the same way (mean-pooled last states)")
    args = ap.parse_args(argv)

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
    if args.finetune or args.only_finetune:
        if args.encoder is None:
            from usl.data.encoder import encoder_path

            args.encoder = encoder_path()
        groups = [texts[4 * i:4 * i + 4] for i in range(len(items))]
        train_g = [g for g, t in zip(groups, is_test) if not t]
        test_g = [g for g, t in zip(groups, is_test) if t]
        for setting in args.pairwise:
            lr, epochs, max_len, seed, *rest = setting.split(",")
            t0 = time.time()
            D = pairwise_probe(train_g, test_g, args.encoder, float(lr), int(epochs), int(max_len), int(seed),
                               lora_r=int(rest[0]) if rest else 0)
            acc, per = pairwise_diff_accuracy(D)
            print(f"pairwise {Path(args.encoder).name} ({setting}; {time.time() - t0:.0f} s): {acc:.3f} {per}",
                  flush=True)
        for setting in args.ft or ([] if args.pairwise else ["3e-5,8,256,0"]):
            lr, epochs, max_len, seed, *rest = setting.split(",")
            t0 = time.time()
            S = finetuned_probe(train_g, test_g, args.encoder, float(lr), int(epochs), int(max_len), int(seed),
                                lora_r=int(rest[0]) if rest else 0)
            acc, per = pairwise_accuracy(S)
            print(f"fine-tuned {Path(args.encoder).name} ({setting}; {time.time() - t0:.0f} s): {acc:.3f} {per}",
                  flush=True)
        if args.only_finetune:
            return

    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    probes = {"tf-idf words 1-2": TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
              "tf-idf chars 2-5": TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3,
                                                  sublinear_tf=True, max_features=200_000)}
    for name, vec in probes.items():
        vec.fit(train_texts)
        clf = LogisticRegression(C=10, max_iter=3000).fit(vec.transform(train_texts), y[~rows])
        logp = clf.predict_log_proba(vec.transform(test_texts)).reshape(-1, 4, 4)
        acc, per = pairwise_accuracy(logp)
        print(f"{name}: {acc:.3f} {per}")
    from usl.fast.register import RegisterConfig, fit_register

    groups = [dict(zip(STYLES, texts[4 * i:4 * i + 4])) for i in np.flatnonzero(~is_test)]
    scorer, _ = fit_register(groups, RegisterConfig(labels=STYLES))
    acc, per = pairwise_accuracy(scorer.scores(test_texts).reshape(-1, 4, 4))  # score of class c = its logit
    print(f"register scorer (pairwise within a query): {acc:.3f} {per}")
    if args.contextual:
        from sentence_transformers import SentenceTransformer

        from usl.data.encoder import encoder_path

        model = SentenceTransformer(encoder_path(), device="cpu")
        model.max_seq_length = 256
        E = model.encode(texts, batch_size=32, normalize_embeddings=True)
        clf = LogisticRegression(C=1, max_iter=5000).fit(E[~rows], y[~rows])
        acc, per = pairwise_accuracy(clf.predict_log_proba(E[rows]).reshape(-1, 4, 4))
        print(f"MiniLM embeddings: {acc:.3f} {per}")


if __name__ == "__main__":
    main()
