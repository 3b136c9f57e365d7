"""all-MiniLM-L6-v2 on ONNX Runtime: reading criteria without torch or transformers.

A new criteria set costs one pass of the 22M-parameter encoder over a few short strings (about 10 ms);
importing torch and transformers and loading the model to make it cost seconds, most of a `usl rank
--no-server` (issue 47). So the encoder (a criteria adapter merged in, where a judge has one) is
exported once to ONNX into the data directory's cache, ``cache/onnx/minilm-<key>.onnx``, keyed by the
weights' files (torch and transformers are imported for that export only, in a child process: at the
first start, or the first board after the weights change), and run with onnxruntime, tokenised by the ``tokenizers``
library from the packaged ``tokenizer.json``.

``MiniLM.states(texts)`` gives every layer's hidden states (the embeddings, then each of the 6
layers), as ``output_hidden_states=True`` does; ``encode(texts)`` the mean-pooled, L2-normalised
sentence vectors (n, 384) of the last layer, as sentence-transformers pools them. Truncation keeps the
first ``max_length - 2`` word pieces between [CLS] and [SEP], as the transformers tokenizer does.
``tests/test_minilm_onnx.py`` holds both to the transformers model (cosine >= 0.999 on the 900-odd
wordings of the criteria library).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from usl import paths
from usl.data.encoder import DIM, encoder_path, frozen_encoder

log = logging.getLogger(__name__)
LAYERS = 7  # the embeddings' output and the 6 layers'
_SHARED: dict[str, "MiniLM"] = {}
_LOCK = threading.Lock()
STATES_MEMO_BATCH = 32    # batches of at most this many texts keep their states (criteria; not training's)
STATES_MEMO_SIZE = 256    # texts whose states are kept (~100 KB each)


def weights_key(*folders: str | Path) -> str:
    """What names an export: each weights file's name, size and modification time (hashing the 90 MB of
    MiniLM would cost a start a tenth of a second)."""
    h = hashlib.sha256(b"minilm-onnx-v1")
    for folder in folders:
        for f in sorted(Path(folder).rglob("*")):
            if f.is_file() and f.suffix in (".safetensors", ".json", ".bin"):
                st = f.stat()
                h.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def export(model, path: Path) -> Path:
    """Write ``model`` (a transformers BERT, e.g. ``AutoModel.from_pretrained(encoder_path())``) to ``path``
    as ONNX, every hidden state an output; atomically (another process may be exporting the same file)."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                          output_hidden_states=True).hidden_states

    inputs = ("input_ids", "attention_mask", "token_type_ids")
    outputs = tuple(f"hidden_{i}" for i in range(LAYERS))
    ids = torch.ones((2, 5), dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # a padded row: the trace keeps the mask's path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".onnx")
    os.close(fd)
    try:
        # the tracer warns that the attention mask's shape checks become constants: they hold for every
        # padded batch (the token-states test runs batches of other lengths than this one)
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(HiddenStates(model.eval()), (ids, mask, torch.zeros_like(ids)), tmp,
                              input_names=list(inputs), output_names=list(outputs), opset_version=17,
                              dynamic_axes={k: {0: "batch", 1: "tokens"} for k in inputs + outputs}, dynamo=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    log.info("exported the criteria encoder to %s", path)
    return path


def _model(adapter: str | Path | None = None):
    """The packaged MiniLM (torch, transformers), with a criteria adapter's LoRA merged in where one is given."""
    model = frozen_encoder()[1]
    if adapter is None:
        return model
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().eval()


def exported(cache: str | Path, key: str | None = None, adapter: str | Path | None = None) -> Path:
    """The ONNX file of the packaged MiniLM (with ``adapter`` merged, where given), exported first if the cache
    lacks it. ``key`` names the weights (default: the packaged MiniLM's ``weights_key``). The export runs in a
    child process (``python -m usl.data.minilm_onnx``): it imports torch, transformers and torch's ONNX
    exporter, about 450 MB that the calling process, a server among them, would otherwise keep."""
    path = Path(cache) / "onnx" / f"minilm-{key or weights_key(encoder_path())}.onnx"
    if not path.exists():
        log.info("exporting the criteria encoder to ONNX (once: %s)", path)
        cmd = [sys.executable, "-m", "usl.data.minilm_onnx", str(path)] + ([str(adapter)] if adapter else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise RuntimeError(f"exporting MiniLM to {path} failed (status {done.returncode}): {lines[-1]}")
    return path


def load(cache: str | Path, key: str | None = None, adapter: str | Path | None = None) -> "MiniLM":
    """``MiniLM(exported(cache, key, adapter))``; a cached file that ONNX Runtime cannot read (a damaged disk, a
    foreign file) is named in the log, removed and exported again, as the other caches are recomputed."""
    path = exported(cache, key, adapter)
    try:
        return MiniLM(path)
    except Exception as e:  # onnxruntime raises its own (unexported) error types for a bad model file
        log.warning("%s: unreadable (%s: %s); exporting it again", path, type(e).__name__, e)
        path.unlink(missing_ok=True)
        return MiniLM(exported(cache, key, adapter))


def frozen(cache: str | Path | None = None) -> "MiniLM":
    """The process's one packaged MiniLM, loaded from ``cache`` (default: the data directory's cache) on
    first use and exported there if that cache lacks it; later calls share it whatever their cache."""
    key = weights_key(encoder_path())
    with _LOCK:
        if key not in _SHARED:
            _SHARED[key] = load(cache if cache is not None else paths.cache_dir(), key)
        return _SHARED[key]


class MiniLM:
    """An exported encoder: ``states`` for readers of token states, ``encode`` for sentence vectors (kept in
    a small memo: users repeat criteria across requests). ``listeners`` are called as ``f(texts, hidden
    states, mask)`` after each ``encode`` pass of new texts, so that another reader takes its token states
    from that pass instead of making its own."""

    def __init__(self, onnx_path: str | Path, max_length: int = 64, threads: int = 1):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        # a few short criteria run fastest on one thread: a pool of all cores on a busy machine turns a
        # 10 ms pass into half a second of contention
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(Path(encoder_path()) / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.cls, self.sep = self.tokenizer.token_to_id("[CLS]"), self.tokenizer.token_to_id("[SEP]")
        self.max_length = max_length
        self.listeners: list = []
        self._memo: dict[str, np.ndarray] = {}
        self._states: dict[bytes, list[np.ndarray]] = {}   # token ids -> each layer's (tokens, 384) states

    def tokens(self, texts: Sequence[str], max_length: int | None = None, pad_to: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, mask), both (n, t) int64: t is ``pad_to``, else the longest text's length."""
        limit = max_length or self.max_length
        ids = [e.ids if len(e.ids) <= limit else e.ids[:limit - 1] + [self.sep]
               for e in self.tokenizer.encode_batch(list(texts))]
        width = pad_to or max((len(x) for x in ids), default=0)
        out, mask = np.zeros((len(ids), width), np.int64), np.zeros((len(ids), width), np.int64)
        for i, x in enumerate(ids):
            out[i, :len(x)], mask[i, :len(x)] = x, 1
        return out, mask

    def states(self, texts: Sequence[str], max_length: int | None = None, pad_to: int | None = None
               ) -> tuple[list[np.ndarray], np.ndarray]:
        """Every layer's hidden states (``LAYERS`` arrays of (n, t, 384), float32) and the mask (n, t).

        A small batch (criteria: the criteria tower, the readers of length and kind each read a new
        criterion) runs only its texts not read before: a text's states do not depend on the batch it
        is read in (ONNX Runtime gives the same numbers to the bit whatever else the batch holds and
        however far it is padded; ``tests/test_fast_path.py`` holds it to that), so the memo's rows are
        the pass's own. Positions past a text's tokens (masked: no reader looks at them) are zeros."""
        ids, mask = self.tokens(texts, max_length, pad_to)
        if not len(ids):
            return [np.zeros((0, 0, DIM), np.float32)] * LAYERS, mask
        if len(ids) > STATES_MEMO_BATCH:
            return self.run_ids(ids, mask), mask
        lengths = mask.sum(1).tolist()
        keys = [x[:n].tobytes() for x, n in zip(ids, lengths)]
        memo = self._states  # read through one reference: another thread may replace it
        found = {k: memo[k] for k in keys if k in memo}
        rows = list({k: i for i, k in enumerate(keys) if k not in found}.values())  # each new text once
        if rows:
            width = max(lengths[i] for i in rows)
            out = self.run_ids(ids[rows, :width], mask[rows, :width])
            fresh = {keys[i]: [h[j, :lengths[i]] for h in out] for j, i in enumerate(rows)}
            found |= fresh
            if len(memo) + len(fresh) > STATES_MEMO_SIZE:
                self._states = memo = {}
            memo.update(fresh)
        hidden = [np.zeros((len(ids), ids.shape[1], DIM), np.float32) for _ in range(LAYERS)]
        for i, (k, n) in enumerate(zip(keys, lengths)):
            for h, m in zip(hidden, found[k]):
                h[i, :n] = m
        return hidden, mask

    def run_ids(self, ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        """Every layer's hidden states (``LAYERS`` arrays of (n, t, 384)) for token ids and mask, both (n, t)."""
        return self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                       "token_type_ids": np.zeros_like(ids)})

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 384) L2-normalised mean-pooled sentence vectors."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            hidden, mask = self.states(todo)
            for f in self.listeners:
                f(todo, hidden, mask)
            m = mask[..., None].astype(np.float32)
            v = (hidden[-1] * m).sum(1) / np.maximum(m.sum(1), 1e-6)
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            if len(self._memo) > 50_000:
                self._memo = {}
            self._memo.update(zip(todo, v.astype(np.float32)))
        if not texts:
            return np.zeros((0, DIM), np.float32)
        return np.stack([self._memo[t] for t in texts])


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m usl.data.minilm_onnx OUT.onnx [ADAPTER]``: what :func:`exported` runs in a child process."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        raise SystemExit("usage: python -m usl.data.minilm_onnx OUT.onnx [ADAPTER_DIR]")
    logging.basicConfig(level=logging.WARNING)
    export(_model(args[1] if len(args) == 2 else None), Path(args[0]))


if __name__ == "__main__":
    main()
