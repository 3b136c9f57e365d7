"""Tiny offline backbones and data for the CRM tests: no downloads, a few seconds on 2 CPU cores."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ("short concise answer long detailed verbose formal casual friendly code python example list "
         "bullet points explain simple technical humor serious polite direct story poem summary the a is "
         "of and to in it for with on as be this that user prefers avoid response model query").split()


def tiny_tokenizer(corpus_extra: list[str] | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<pad>", "<unk>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = [" ".join(WORDS)] * 5 + (corpus_extra or [])
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>",
                                   pad_token="<pad>")


def tiny_backbone(out: Path, *, arch: str = "qwen3", pad: bool = True) -> Path:
    """A 2-layer, hidden-64 random model + tiny BPE tokenizer saved as an HF directory.

    ``arch``: ``qwen3`` (the paper's family), ``llama`` (SmolLM2's), ``gemma3`` (Gemma-3's text
    model) or ``bert`` (an encoder, as all-MiniLM-L6-v2)."""
    import torch
    from transformers import (BertConfig, BertModel, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig,
                              LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM)

    torch.manual_seed(0)
    tok = tiny_tokenizer()
    if not pad:
        tok.pad_token = None
    tok.save_pretrained(str(out))
    decoder = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                   pad_token_id=tok.pad_token_id, eos_token_id=2, tie_word_embeddings=True)
    if arch == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(**decoder))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**decoder))
    elif arch == "gemma3":
        model = Gemma3ForCausalLM(Gemma3TextConfig(**decoder, sliding_window=64))
    elif arch == "bert":
        model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=1024,
                                     pad_token_id=tok.pad_token_id or 0))
    else:
        raise ValueError(f"arch {arch!r}")
    model.save_pretrained(str(out))
    return out


def sample_dict(i: int, *, pref: str = "model_a", n_crit: int = 2, long: int = 0, group: str = "",
                loser: bool = True) -> dict:
    short, verbose = "a short concise answer", " ".join(["a long detailed verbose answer"] * (3 + long))
    a, b = (short, verbose) if i % 2 == 0 else (verbose, short)
    d = {"idx": f"s{i}", "prompt": f"explain python list {i}",
         "model_a": [{"role": "user", "content": f"explain python list {i}"}, {"role": "assistant", "content": a}],
         "model_b": [{"role": "user", "content": f"explain python list {i}"}, {"role": "assistant", "content": b}],
         "criteria": [f"user prefers {w} answer" for w in ("concise", "short", "direct", "simple")[:n_crit]],
         "preference": pref, "source": "tiny"}
    if loser:
        d["loser_criteria"] = [f"user prefers {w} answer" for w in ("verbose", "detailed", "long")]
    if group:
        d["group"] = group
    return d


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tiny_data(path: Path, n: int = 16, long: int = 0) -> Path:
    rows = [sample_dict(i, pref="model_a" if i % 2 == 0 else "model_b", long=long) for i in range(n)]
    return write_jsonl(path, rows)


STYLE_TOPICS = ["rivers", "bridges", "tides", "forests", "volcanoes", "glaciers", "deserts", "comets", "bees",
                "coral", "storms", "caves", "salt", "copper", "wheat", "owls", "maps", "clocks", "glass", "paper"]


def styled_groups(topics: list[str]) -> list[dict[str, str]]:
    """Each query has an answer in a scholarly and in a sales register: same content, other words."""
    return [{"domain_academy": f"Empirical studies of {t} suggest, per the literature, that {t} vary; "
                               f"further research into {t} is warranted.",
             "domain_business": f"Our {t} deliver strong value for customers; {t} drive revenue growth "
                                f"and a competitive edge for the brand."} for t in topics]


def domain_rows(topics: list[str]) -> list[dict]:
    """Paper-format domain pairs over ``styled_groups``: each style's criteria pick its answer."""
    rows = []
    for i, g in enumerate(styled_groups(topics)):
        q = f"Tell me about {topics[i]}."
        for family, crit in (("domain_academy", "Scholarly, like a journal article."),
                             ("domain_business", "Speak like a sales executive.")):
            a, b = g["domain_academy"], g["domain_business"]
            if i % 2:
                a, b = b, a
            rows.append({"idx": f"{i}-{family}", "prompt": q, "criteria": [crit], "source": "domain/toy",
                         "family": family,
                         "model_a": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
                         "model_b": [{"role": "user", "content": q}, {"role": "assistant", "content": b}],
                         "preference": "model_a" if a == g[family] else "model_b"})
    return rows
