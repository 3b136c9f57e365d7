"""Style scores of an answer from a fine-tuned sentence encoder (all-MiniLM-L6-v2 with LoRA).

The n-gram register scorer (``register.py``) sees words and characters; answers to one query written
in two domain styles often differ in a handful of them (DSP's academy and business answers), and a
bag of n-grams misses how they are put together. This scorer fine-tunes the criteria tower's
encoder, rank-16 LoRA plus a linear head over mean-pooled tokens, to give each answer one score per
style label, trained the register scorer's way: for each query and each label, a softmax over that
query's answers must pick the answer written in the label's style. Comparing answers to the same
query cancels their shared content. On the 72 held-out DSP queries of the domain eval file it
picks the right answer of a pair 0.83-0.86 of the time when told the style, where the n-gram scorer
manages 0.78 (``scripts/domain_ceiling.py``).

Its scores are extra answer features of the fast CRM (``style_<label>``), after the n-gram
register's. Training answers get cross-fitted scores (``fit_style`` returns them); a GPU makes
fitting a matter of minutes (``usl train-style``). Judging runs on the CPU: one encoder pass per
member for each new answer, in bfloat16 where the CPU has bf16 units (483 AlpacaEval answers in about 5 s
on 2 cores; ``scripts/bench_add_model.py``). Answers it has scored before are looked up instead:
a table of known answers shipped with the weights (the default board's, so that a first start costs
nothing extra), and a disk cache of what it computed.

Files in a model directory (``style_scorer/``): ``config.json``, ``weights.safetensors`` (the LoRA
matrices and the head, fp16, about 1.3 MB) and optionally ``known.npz`` (answer text hash ->
scores).

A scorer may hold several members, fitted with different seeds and joined by ``combine_dirs``
(``usl train-style --combine``): its scores are the mean of theirs. Seeds of one recipe disagree
enough that the mean of two is better than either (on the domain eval file, told the style: 0.843
and 0.847 alone, 0.861 together); each member costs one more encoder pass for a new answer, so
the default judge ships one (``docs/log.md``, 2026-11-29: four gave the same board).
Member 0's tensors are named ``lora.*`` and ``head.*``, member i's ``m<i>.lora.*`` and ``m<i>.head.*``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from usl import atomic
from usl.fast.cpu_batches import SHAPE_STEP, cpu_reads_bf16, warm_up_texts
from usl.fast.register import weights_fingerprint
from usl.data.encoder import encoder_path

log = logging.getLogger(__name__)

DIR = "style_scorer"
KNOWN = "known.npz"
TARGETS = ("query", "key", "value", "dense")
LORA_SCALE = 2.0   # lora_alpha / lora_r


@dataclass(frozen=True)
class StyleScorerConfig:
    labels: tuple[str, ...]
    base: str = "sentence-transformers/all-MiniLM-L6-v2"  # the packaged copy is used when installed
    lora_r: int = 16
    lr: float = 5e-4           # LoRA learning rate (one-cycle schedule)
    head_lr: float = 1e-3
    epochs: int = 8
    max_len: int = 256         # tokens of an answer that are read
    batch: int = 8             # queries per step (all their answers)
    folds: int = 5             # cross-fitting folds for the training answers
    seed: int = 0
    members: int = 1           # scorers averaged (``combine_dirs``)

    def __post_init__(self) -> None:
        if not self.labels:
            raise ValueError("style scorer: no labels")
        for name in ("lora_r", "epochs", "max_len", "batch", "folds", "members"):
            if getattr(self, name) < 1:
                raise ValueError(f"style scorer: {name}={getattr(self, name)} must be >= 1")


KEY_BYTES = 12


def member_prefix(i: int) -> str:
    """How member ``i``'s tensors are named in a scorer's state (member 0 carries no prefix)."""
    return f"m{i}." if i else ""


def _member_state(state: Mapping[str, object], i: int) -> dict[str, object]:
    pre = member_prefix(i)
    if i:
        return {k[len(pre):]: v for k, v in state.items() if k.startswith(pre)}
    return {k: v for k, v in state.items() if k.startswith(("lora.", "head."))}


def _as_array(v) -> np.ndarray:
    """A weight as float32 numpy: loaded weights are arrays, freshly trained ones torch tensors."""
    return v.astype(np.float32) if isinstance(v, np.ndarray) else v.float().cpu().numpy()


def text_key(text: str) -> bytes:
    """How tables of scores name an answer: the first 12 bytes of its SHA-256."""
    return hashlib.sha256(text.encode()).digest()[:KEY_BYTES]


def _base_path(cfg: StyleScorerConfig, base_path: str | None) -> str:
    if base_path:
        return base_path
    if cfg.base == "sentence-transformers/all-MiniLM-L6-v2":
        return encoder_path()
    return cfg.base


def _network(cfg: StyleScorerConfig, base_path: str | None):
    """(tokenizer, LoRA-wrapped encoder, head) with fresh LoRA and head weights."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = _base_path(cfg, base_path)
    tok = AutoTokenizer.from_pretrained(path)
    level, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # the checkpoint's pooler, which mean pooling leaves out, is no news
    hf_logging.disable_progress_bar()
    try:
        enc = AutoModel.from_pretrained(path, dtype=torch.float32, add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()
    enc = get_peft_model(enc, LoraConfig(r=cfg.lora_r, lora_alpha=int(LORA_SCALE * cfg.lora_r), lora_dropout=0.05,
                                         target_modules=list(TARGETS)))
    head = torch.nn.Linear(enc.config.hidden_size, len(cfg.labels))
    return tok, enc, head


def _pooled_scores(tok, enc, head, texts: Sequence[str], max_len: int, device: str):
    import torch

    x = tok(list(texts), truncation=True, max_length=max_len, padding=True, return_tensors="pt").to(device)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda" and enc.training):
        h = enc(**x).last_hidden_state
    m = x["attention_mask"].unsqueeze(-1).float()
    return head((h.float() * m).sum(1) / m.sum(1))


def _base_encoder(cfg: StyleScorerConfig, base_path: str | None):
    """(tokenizer, the base encoder without LoRA) in float32, for scoring."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = _base_path(cfg, base_path)
    level, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # the checkpoint's pooler, which mean pooling leaves out, is no news
    hf_logging.disable_progress_bar()
    try:
        return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path, dtype=torch.float32,
                                                                              add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()


def merge_lora(enc, lora: Mapping[str, object], scaling: float):
    """``enc`` with each LoRA pair merged into its linear layer, in place: W += scaling * B @ A.

    ``lora`` is peft's state dict (``base_model.model.<module>.lora_A.weight`` and ``lora_B``); this
    is peft's ``merge_and_unload`` without building a peft model (nor importing peft) per member.
    Raises when a pair names no linear layer of ``enc``."""
    import torch

    modules = dict(enc.named_modules())
    pairs = {k.removesuffix(".lora_A.weight") for k in lora if k.endswith(".lora_A.weight")}
    if not pairs or len(lora) != 2 * len(pairs):
        raise ValueError(f"style scorer: LoRA tensors are not A/B pairs ({sorted(lora)[:3]})")
    with torch.no_grad():
        for name in sorted(pairs):
            module = modules.get(name.removeprefix("base_model.model."))
            b = lora.get(f"{name}.lora_B.weight")
            if not isinstance(module, torch.nn.Linear) or b is None:
                raise ValueError(f"style scorer: the LoRA weights do not fit the encoder ({name})")
            module.weight += (b.float() @ lora[f"{name}.lora_A.weight"].float()) * scaling
    return enc


def _pooled(enc, head, x):
    """Head over the mean of the tokens' last hidden states (padding left out); ``x`` the tokenizer's batch."""
    h = enc(**x).last_hidden_state.float()   # the encoder may read in bfloat16; the head is float32
    m = x["attention_mask"].unsqueeze(-1).float()
    return head((h * m).sum(1) / m.sum(1))


class StyleScorer:
    """``scores(texts)`` -> (n, len(labels)) float32: one style score per label."""

    dir = DIR  # where it is saved in a model directory
    prefix = "style_"  # of its answer features' names

    def __init__(self, cfg: StyleScorerConfig, state: Mapping[str, object], base_path: str | None = None,
                 known: Mapping[bytes, np.ndarray] | None = None):
        self.cfg = cfg
        self.state = {k: v for k, v in state.items()}  # LoRA tensors ("lora.*") and head ("head.*")
        self.base_path = base_path
        self.known: dict[bytes, np.ndarray] = dict(known or {})  # shipped with the weights
        self.lookup: dict[bytes, np.ndarray] = {}  # more known scores, not saved (training answers)
        self.cache_dir: Path | None = None  # set by a judge: computed scores persist there
        self._cache: dict[bytes, np.ndarray] | None = None
        self._net = None
        self._loading = threading.Lock()
        self._where: tuple | None = None   # (device, dtype) the networks were last moved to

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.prefix + label for label in self.cfg.labels)

    @functools.cached_property
    def fingerprint(self) -> str:
        return weights_fingerprint(self.cfg, (c for k in sorted(self.state)
                                              for c in (k.encode(), _as_array(self.state[k]).tobytes())))

    # -- scoring -----------------------------------------------------------------------------------
    def _model(self):
        """(tokenizer, [(merged encoder, head) per member]): the base encoder is read once and each
        member's LoRA merged into a copy of it (``merge_lora``), as peft's ``merge_and_unload`` would; the
        last member merges into the base itself (one encoder fewer held while loading); loaded by one thread,
        whichever asks first."""
        with self._loading:
            if self._net is None:
                self._net = self._build()
            return self._net

    def _build(self):
        import copy

        import torch

        tok, base = _base_encoder(self.cfg, self.base_path)
        nets = []
        for i in range(self.cfg.members):
            state = {k: torch.as_tensor(v) for k, v in _member_state(self.state, i).items()}
            lora = {k[len("lora."):]: v for k, v in state.items() if k.startswith("lora.")}
            if not lora:
                raise ValueError(f"style scorer: member {i}'s weights do not fit the encoder (no LoRA tensors)")
            last = i == self.cfg.members - 1
            enc = merge_lora(base if last else copy.deepcopy(base), lora, LORA_SCALE)
            head = torch.nn.Linear(base.config.hidden_size, len(self.cfg.labels))
            head.load_state_dict({k[len("head."):]: v.float() for k, v in state.items() if k.startswith("head.")})
            nets.append((enc.eval(), head.eval()))
        return tok, nets

    def load_network(self) -> None:
        """Load the network and score made-up texts of every batch shape (``warm_up_texts``), storing nothing: a
        server does this at start, so that no request grows its memory by loading a model or making kernels."""
        self.compute(warm_up_texts(self.cfg.max_len, per_shape=8))

    def compute(self, texts: Sequence[str], batch: int | None = None, device: str = "cpu") -> np.ndarray:
        """Scores by the network, ignoring the tables.

        Each text is tokenized once for every member, and batches hold texts of similar token counts,
        padded to the longest of the batch: the encoder's cost is its tokens, so sorting by tokens
        rather than characters leaves less padding to read. On 2 CPU cores the encoder passes are
        nearly all of the cost of a new answer (``scripts/bench_add_model.py``); on a CPU with bf16 matrix
        units the encoders read in bfloat16 (``cpu_reads_bf16``), about four times as fast. ``batch``: 8 texts
        on a CPU (483 answers, after a first call: 4.5 s and no peak growth, against 6.2 s and 84-148 MB in
        batches of 32; ``docs/log.md``, 2026-12-03), 32 on a GPU."""
        out = np.zeros((len(texts), len(self.cfg.labels)), np.float32)
        if not texts:
            return out
        import torch
        from tqdm.auto import tqdm

        tok, nets = self._model()
        batch = batch or (8 if str(device).startswith("cpu") else 32)
        where = (str(device), torch.bfloat16 if cpu_reads_bf16(device) else torch.float32)
        with self._loading:     # moved once, by one thread: another may be reading with the networks
            if self._where != where:
                for enc, head in nets:
                    enc.to(device, where[1])
                    head.to(device)
                self._where = where
        ids = tok(list(texts), truncation=True, max_length=self.cfg.max_len)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        with torch.inference_mode():
            for s in tqdm(range(0, len(order), batch), desc="style scores", unit="batch",
                          disable=True if len(order) < 4 * batch else None):
                idx = order[s:s + batch]
                # padded to a multiple of SHAPE_STEP tokens: the CPU's kernels are made and kept per shape
                x = tok.pad({"input_ids": [ids[i] for i in idx]}, pad_to_multiple_of=SHAPE_STEP,
                            return_tensors="pt").to(device)
                out[idx] = sum(_pooled(enc, head, x) for enc, head in nets).cpu().numpy() / len(nets)
        return out

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(self.cfg.labels)), np.float32)
        keys = [text_key(t) for t in texts]
        cache = self._disk_cache()
        todo = []
        for i, k in enumerate(keys):
            hit = self.known.get(k)
            if hit is None:
                hit = self.lookup.get(k)
            if hit is None:
                hit = cache.get(k)
            if hit is None:
                todo.append(i)
            else:
                out[i] = hit
        if todo:
            uniq = list(dict.fromkeys(texts[i] for i in todo))
            wall, cpu = time.perf_counter(), time.process_time()
            fresh = dict(zip(uniq, self.compute(uniq)))
            log.info("%s: %d new answers, %d encoder passes each, in %.1fs (CPU %.1fs)", self.dir, len(uniq),
                     self.cfg.members, time.perf_counter() - wall, time.process_time() - cpu)
            for i in todo:
                out[i] = fresh[texts[i]]
            cache.update((text_key(t), s) for t, s in fresh.items())
            self._save_cache()
        return out

    def only(self, labels: Sequence[str]) -> StyleScorer:
        """The same scorer with the heads of ``labels`` alone (in that order): their scores unchanged, the
        others gone. How `usl train-style --aux-registers` keeps the styles of a scorer that learned
        written registers beside them."""
        missing = [label for label in labels if label not in self.cfg.labels]
        if missing or not labels:
            raise ValueError(f"style scorer: cannot keep labels {missing or list(labels)}; it has {self.cfg.labels}")
        rows = [self.cfg.labels.index(label) for label in labels]
        state = {k: (v[rows] if k.split(".")[-2] == "head" else v) for k, v in self.state.items()}
        return StyleScorer(replace(self.cfg, labels=tuple(labels)), state, base_path=self.base_path,
                           known={k: v[rows] for k, v in self.known.items()})

    # -- the disk cache of computed scores --------------------------------------------------------
    def _cache_file(self) -> Path | None:
        return self.cache_dir / f"{self.prefix}{self.fingerprint}.npz" if self.cache_dir else None

    def _disk_cache(self) -> dict[bytes, np.ndarray]:
        if self._cache is None:
            self._cache = {}
            f = self._cache_file()
            if f is not None and f.exists():
                try:
                    self._cache = read_table(f, len(self.cfg.labels))
                except ValueError as e:  # a torn file: recompute
                    log.warning("%s", e)
        return self._cache

    def _save_cache(self) -> None:
        """Write the computed scores, with those another process of the data directory wrote meanwhile
        (``usl data add-model`` beside a running server)."""
        f = self._cache_file()
        if f is None or not self._cache:
            return
        if f.exists():
            try:
                for k, v in read_table(f, len(self.cfg.labels)).items():
                    self._cache.setdefault(k, v)
            except ValueError:  # a torn file: rewritten with what this process holds
                pass
        try:
            write_table(f, self._cache)
        except OSError as e:  # a full disk or a read-only home costs a recomputation later, not the run
            log.warning("style scorer: could not write its cache %s (%s)", f, e)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, out_dir: str | Path) -> None:
        import torch
        from safetensors.torch import save_file

        out = Path(out_dir) / self.dir
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: torch.as_tensor(v).to(torch.float16).contiguous() for k, v in self.state.items()},
                  out / "weights.safetensors")
        (out / "config.json").write_text(json.dumps(asdict(self.cfg), indent=2))
        if self.known:
            write_table(out / KNOWN, self.known)
        elif (out / KNOWN).exists():  # a table left by an earlier scorer holds another model's scores
            (out / KNOWN).unlink()

    @classmethod
    def load(cls, path: str | Path, base_path: str | None = None) -> StyleScorer | None:
        """The scorer saved with a model (``path`` is the model directory), or None if it has none."""
        d = Path(path) / cls.dir
        if not d.exists():
            return None
        try:
            from safetensors.numpy import load_file  # arrays: a judge that only reads tables imports no torch

            raw = json.loads((d / "config.json").read_text())
            cfg = StyleScorerConfig(**(raw | {"labels": tuple(raw["labels"])}))
            state = load_file(d / "weights.safetensors")
            known = read_table(d / KNOWN, len(cfg.labels)) if (d / KNOWN).exists() else {}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{d}: unreadable style scorer ({e}); retrain it with `usl train-style`") from e
        return cls(cfg, state, base_path=base_path, known=known)


def write_table(path: Path, table: Mapping[bytes, np.ndarray]) -> None:
    """Atomically; keys as a (n, 12) byte matrix: numpy's fixed-width bytes type would drop a key's
    trailing zeros."""
    bad = [k for k in table if len(k) != KEY_BYTES]
    if bad:
        raise ValueError(f"{path}: keys must be {KEY_BYTES} bytes; got {len(bad[0])} ({bad[0].hex()})")
    keys = np.frombuffer(b"".join(table), dtype=np.uint8).reshape(-1, KEY_BYTES)
    scores = np.stack(list(table.values())).astype(np.float32) if table else np.zeros((0, 0), np.float32)
    atomic.savez(path, compress=True, keys=keys, scores=scores)


def read_table(path: Path, n_labels: int) -> dict[bytes, np.ndarray]:
    try:
        with np.load(path) as z:
            keys, scores = z["keys"], z["scores"]
    except Exception as e:  # OSError, BadZipFile, zlib.error, EOFError, KeyError...: a torn or foreign file
        raise ValueError(f"{path}: unreadable table of style scores ({type(e).__name__}: {e})") from e
    if keys.dtype.kind == "S":  # an early format: fixed-width bytes, trailing zeros dropped
        keys = [bytes(k).ljust(KEY_BYTES, b"\0") for k in keys]
    elif keys.dtype == np.uint8 and keys.ndim == 2 and keys.shape[1] == KEY_BYTES:
        keys = [k.tobytes() for k in keys]
    else:
        raise ValueError(f"{path}: keys of type {keys.dtype} and shape {keys.shape}, not (n, {KEY_BYTES}) bytes")
    if len(keys) and scores.shape != (len(keys), n_labels):
        raise ValueError(f"{path}: {scores.shape} scores for {len(keys)} answers and {n_labels} labels")
    return dict(zip(keys, scores))


def _mean_tables(tables: Sequence[Mapping[bytes, np.ndarray]], weights: Sequence[float]) -> dict[bytes, np.ndarray]:
    """Weighted mean per answer, over the answers every table holds (the others get computed)."""
    common = set(tables[0]).intersection(*tables[1:])
    total = float(sum(weights))
    return {k: (sum(w * t[k].astype(np.float32) for t, w in zip(tables, weights)) / total).astype(np.float32)
            for k in tables[0] if k in common}


def combine_dirs(dirs: Sequence[str | Path], out: str | Path) -> StyleScorer:
    """Join the scorers of several ``usl train-style`` directories into one whose scores are their mean.

    Their labels, base encoder and reading must match (members differ by seed). Writes ``out`` as
    ``usl train-style`` would: ``style_scorer/`` (all members, and the mean of the known tables),
    ``heldout.npz`` and ``scores.npz`` (means over the answers every directory scored)."""
    if len(dirs) < 2:
        raise ValueError("combining style scorers needs two directories or more")
    scorers, held, scored = [], [], []
    for d in dirs:
        sc = StyleScorer.load(d)
        if sc is None:
            raise FileNotFoundError(f"{d}: no {DIR}/ (write one with `usl train-style`)")
        first = scorers[0].cfg if scorers else sc.cfg
        for name in ("labels", "base", "max_len", "lora_r"):
            if getattr(sc.cfg, name) != getattr(first, name):
                raise ValueError(f"{d}: style scorer {name}={getattr(sc.cfg, name)!r} differs from "
                                 f"{dirs[0]}'s {getattr(first, name)!r}; only seeds may differ")
        scorers.append(sc)
        n = len(sc.cfg.labels)
        held.append(read_table(Path(d) / "heldout.npz", n) if (Path(d) / "heldout.npz").exists() else {})
        scored.append(read_table(Path(d) / "scores.npz", n) if (Path(d) / "scores.npz").exists() else {})
    state: dict[str, object] = {}
    m = 0
    for sc in scorers:
        for i in range(sc.cfg.members):
            state |= {member_prefix(m) + k: v for k, v in _member_state(sc.state, i).items()}
            m += 1
    weights = [sc.cfg.members for sc in scorers]
    combined = StyleScorer(replace(scorers[0].cfg, members=m), state,
                           known=_mean_tables([sc.known for sc in scorers], weights))
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    combined.save(o)
    for name, tables in (("heldout.npz", held), ("scores.npz", scored)):
        if all(tables):
            write_table(o / name, _mean_tables(tables, weights))
        elif (o / name).exists():
            (o / name).unlink()
    return combined


def read_register_answers(path: str | Path) -> dict[str, dict[str, str]]:
    """Answers written in named registers, a JSON object a line with "query", "register" and "answer"
    -> query -> {"register_<register>": answer}. Errors name the file, the line and the field."""
    out: dict[str, dict[str, str]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: expected an object with query, register and answer")
            for key in ("query", "register", "answer"):
                if not isinstance(row.get(key), str) or not row[key].strip():
                    raise ValueError(f"{path}:{n}: field {key!r} must be a non-empty string")
            if not row["register"].replace("_", "").isalnum():
                raise ValueError(f"{path}:{n}: field 'register' {row['register']!r}: letters, digits and _ only")
            label = f"register_{row['register']}"
            group = out.setdefault(row["query"], {})
            if label in group:
                raise ValueError(f"{path}:{n}: a second {row['register']!r} answer to the query {row['query']!r}")
            group[label] = row["answer"]
    if not out:
        raise ValueError(f"{path}: no answers")
    return out


# -- fitting ---------------------------------------------------------------------------------------
def _fit_one(groups: Sequence[Mapping[str, str]], cfg: StyleScorerConfig, base_path: str | None,
             device: str, seed: int) -> dict:
    import torch
    from peft import get_peft_model_state_dict

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok, enc, head = _network(cfg, base_path)
    enc.to(device)
    head.to(device)
    opt = torch.optim.AdamW([{"params": [p for p in enc.parameters() if p.requires_grad], "lr": cfg.lr},
                             {"params": head.parameters(), "lr": cfg.head_lr}], weight_decay=0.01)
    steps = cfg.epochs * ((len(groups) + cfg.batch - 1) // cfg.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[cfg.lr, cfg.head_lr], total_steps=max(steps, 1),
                                                pct_start=0.1)
    col = {label: j for j, label in enumerate(cfg.labels)}
    order = list(range(len(groups)))
    enc.train()
    for _ in range(cfg.epochs):
        rng.shuffle(order)
        for s in range(0, len(order), cfg.batch):
            batch = [groups[i] for i in order[s:s + cfg.batch]]
            texts: list[str] = []
            terms = []  # (rows of this query's answers, label column, row of the label's answer)
            for g in batch:
                uniq = list(dict.fromkeys(g.values()))
                rows = list(range(len(texts), len(texts) + len(uniq)))
                texts += uniq
                for label, t in g.items():
                    terms.append((rows, col[label], rows[uniq.index(t)]))
            S = _pooled_scores(tok, enc, head, texts, cfg.max_len, device)
            ce = torch.nn.functional.cross_entropy
            loss = torch.stack([ce(S[rows, c], torch.tensor(rows.index(w), device=device))
                                for rows, c, w in terms]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    state = {f"lora.{k}": v.detach().cpu() for k, v in get_peft_model_state_dict(enc).items()}
    state |= {f"head.{k}": v.detach().cpu() for k, v in head.state_dict().items()}
    return state


def fit_style(groups: Sequence[Mapping[str, str]], cfg: StyleScorerConfig, base_path: str | None = None,
              device: str | None = None) -> tuple[StyleScorer, dict[str, np.ndarray]]:
    """Fit on ``groups`` (one dict label -> answer text per query) and cross-fit their answers.

    Returns the scorer fitted on every group, and for each answer text of the groups its scores from
    the scorer of the fold that left its group out (what training the CRM should see). Scores are
    those of the fp16 weights that are saved.
    """
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    unknown = sorted({label for g in groups for label in g} - set(cfg.labels))
    if unknown:
        raise ValueError(f"style scorer: groups have labels {unknown} that are not among {cfg.labels}")
    groups = [g for g in groups if len(set(g.values())) > 1]
    if len(groups) < 2:
        raise ValueError("style scorer: needs at least two queries with two or more differently styled answers")
    k = max(2, min(cfg.folds, len(groups)))
    fold = np.random.default_rng(cfg.seed).permutation(len(groups)) % k
    held: dict[str, np.ndarray] = {}
    for f in range(k):
        log.info("style scorer: fold %d/%d", f + 1, k)
        state = _fit_one([g for g, i in zip(groups, fold) if i != f], cfg, base_path, device, cfg.seed + 1 + f)
        mine = list(dict.fromkeys(t for g, i in zip(groups, fold) if i == f for t in g.values()))
        fold_scorer = StyleScorer(cfg, {k: v.half() for k, v in state.items()}, base_path=base_path)
        held.update(zip(mine, fold_scorer.compute(mine, batch=128 if device != "cpu" else None, device=device)))
    log.info("style scorer: fitting on all %d queries", len(groups))
    state = {k: v.half() for k, v in _fit_one(groups, cfg, base_path, device, cfg.seed).items()}
    return StyleScorer(cfg, state, base_path=base_path), held


def reading_prefix(text: str, tok, max_len: int) -> str:
    """``text`` cut after the whole words that hold its first ``max_len`` tokens: the scorer reads
    the same tokens from both, and a carried copy of a long answer gets much shorter."""
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
    spans = enc["offset_mapping"]
    if len(spans) <= max_len:
        return text
    end = spans[max_len - 1][1]
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[:end]
