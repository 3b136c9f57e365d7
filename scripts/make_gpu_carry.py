"""Pack what a GPU box needs for the MiniLM CRM grid, or for the fast CRM's style scorer, into what fits a
64 MiB carry.

    python scripts/make_gpu_carry.py --data artifacts/data-full --out artifacts/gpu_m

Writes ``minilm/`` (all-MiniLM-L6-v2 from the installed package, floats as fp16: 45 MB; loaded as
fp32 there), ``train.jsonl.xz`` (xz: a third of gzip's size; the grid unpacks it) and
``dev.jsonl.gz`` (answers longer than ~1,250 characters keep their head and tail around ``[...]``:
at ``max_length: 512`` each answer of a pair gets at most ~200 tokens, so nothing the model would
have seen is lost; dev subsampled to ``--dev-n``), and ``eval/*.jsonl.gz`` unless ``--no-eval``
(room for a board export to score, ``scripts/crm_fidelity.py``). The grid itself is
``scripts/gpu_crm_grid.sh``.

    python scripts/make_gpu_carry.py --style board.json --data artifacts/data-full --out artifacts/gpu_s

packs instead what ``usl train-style`` needs there (section "Recipe" of
``src/usl/weights/fast-crm/MODEL_CARD.md``), in folders each of which fits beside the tree a call sends
(``--room``): ``a/`` holds the training pairs whose criteria family starts with ``--prefix`` (the
styled answers: all the scorer trains on), ``board.json.xz`` (the ``--style`` answers, for
``--known``) and ``score.json.xz`` (every answer of ``train.jsonl`` and ``dev.jsonl``, for
``--score``), both as ``{"keys", "texts"}`` with each text cut after the words that hold the scorer's
first ``--max-len`` tokens and keyed by its whole text, the encoder's config and tokenizer and the
first part of its fp16 weights (``model.part0``); ``b/``, ``c/``, ... the further parts. Carry each
folder but the last in a call of its own and copy it out of the tree (``/root`` stays while the
machine is warm: ``cp -r .carry/s/a /root/s``, then ``cp .carry/s/b/* /root/s``, ...); the last
folder travels with the call that runs ``scripts/gpu_style.sh``, which joins the parts in order.

    python scripts/make_gpu_carry.py --gguf gemma-3-270m-q4_k_m.gguf --data .carry/s3 --out .carry/gm

packs a GGUF base too large for one carry into parts ``p0``, ``p1``, ... (one call each), keeping exactly what the
texts of a ``--substance`` carry need (``pack_gguf``); ``GGUF_PARTS=.carry/gm bash scripts/gpu_substance.sh``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import random
import shutil
import subprocess
from pathlib import Path


def trim(text: str, head: int, tail: int) -> str:
    return text if len(text) <= head + tail + 100 else text[:head] + " [...] " + text[-tail:]


def pack_jsonl(src: Path, dst: Path, head: int = 0, tail: int = 0, limit: int = 0, seed: int = 0,
               cut=None, keep=None) -> int:
    """``src``'s lines (those whose record ``keep`` accepts) with each answer trimmed to ``head`` and ``tail``
    characters, or by ``cut(text)``."""
    cut = cut or (lambda text: trim(text, head, tail))
    lines = [line for line in src.read_text().splitlines() if keep is None or keep(json.loads(line))]
    if limit:
        random.Random(seed).shuffle(lines)
        lines = lines[:limit]
    opener = lzma.open if dst.suffix == ".xz" else gzip.open
    with opener(dst, "wt") as fo:
        for line in lines:
            d = json.loads(line)
            for side in ("model_a", "model_b"):
                for m in d[side]:
                    if m["role"] == "assistant":
                        m["content"] = cut(m["content"])
            fo.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(lines)


def fp16_encoder(out: Path) -> bytes:
    """The packaged all-MiniLM-L6-v2's config and tokenizer copied into ``out``; its weights as fp16
    safetensors bytes (45 MB; loaded as fp32 there)."""
    from safetensors.torch import load_file, save

    from usl.data.encoder import encoder_path

    src = Path(encoder_path())
    out.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (src / f).exists():
            shutil.copy(src / f, out / f)
    sd = load_file(str(src / "model.safetensors"))
    return save({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in sd.items()})


def int8_encoder(out: Path) -> None:
    """The packaged all-MiniLM-L6-v2 into ``out`` at 23 MB: its config and tokenizer, every matrix as int8
    with one fp32 scale a row (``W ~ q * s``), vectors as fp16 (``unpack_int8`` restores fp32 there). Rounding
    a row to 255 levels errs by at most half a level, about the precision of the bf16 the GPU computes in."""
    import torch
    from safetensors.torch import load_file, save_file

    from usl.data.encoder import encoder_path

    src = Path(encoder_path())
    out.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (src / f).exists():
            shutil.copy(src / f, out / f)
    packed = {}
    for k, v in load_file(str(src / "model.safetensors")).items():
        if v.is_floating_point() and v.dim() == 2:
            scale = v.abs().amax(1, keepdim=True).clamp(min=1e-12) / 127
            packed[k + ".q"] = torch.round(v / scale).to(torch.int8).contiguous()
            packed[k + ".s"] = scale.float().contiguous()
        else:
            packed[k] = (v.half() if v.is_floating_point() else v).contiguous()
    save_file(packed, str(out / "model.int8.safetensors"))


def unpack_int8(folder: Path) -> None:
    """``model.int8.safetensors`` in ``folder`` -> ``model.safetensors`` (fp32), as transformers loads it."""
    from safetensors.torch import load_file, save_file

    packed = load_file(str(folder / "model.int8.safetensors"))
    sd = {}
    for k, v in packed.items():
        if k.endswith(".s"):
            continue
        if k.endswith(".q"):
            sd[k[:-2]] = (v.float() * packed[k[:-2] + ".s"]).contiguous()
        else:
            sd[k] = v.float() if v.is_floating_point() else v
    save_file(sd, str(folder / "model.safetensors"), metadata={"format": "pt"})


def pack_quality_inputs(data: Path, shared: Path, out: Path, head: int, tail: int) -> dict:
    """What the quality reader's GPU run needs (``scripts/gpu_quality.sh``): the int8 encoder, its training
    and dev pairs and every eval file (answers trimmed to what a 512-token input keeps), ``dev.jsonl`` (the
    pairs the judge's combination is fitted on), and the default board's texts whole (``board.json.xz``:
    the stored readings are keyed by the exact texts)."""
    from usl.data.pairs.alpaca import board_answers, load_outputs

    out.mkdir(parents=True, exist_ok=True)
    int8_encoder(out / "minilm")
    counts = {"quality_train": pack_jsonl(data / "quality" / "train.jsonl", out / "quality_train.jsonl.xz", head, tail),
              "quality_dev": pack_jsonl(data / "quality" / "dev.jsonl", out / "quality_dev.jsonl.xz", head, tail)}
    (out / "eval").mkdir(exist_ok=True)
    for f in [data / "dev.jsonl", *sorted((data / "eval").glob("*.jsonl"))]:
        counts[f.stem] = pack_jsonl(f, out / "eval" / f"{f.stem}.jsonl.xz", head, tail)
    alp = load_outputs(shared / "alpaca_eval")
    board = board_answers(alp)
    with lzma.open(out / "board.json.xz", "wt") as fo:
        json.dump(board, fo, ensure_ascii=False)
    counts["board_pairs"] = sum(a is not None for m in alp.board_models for a in board["answers"][m])
    return counts


def carry_room(limit: int = 64 * 2**20, margin: int = 2**20) -> int:
    """Bytes a carry may hold beside what a device call sends with it: this checkout's tracked files and
    its untracked files that git does not ignore."""
    try:
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError) as e:
        why = e.stderr.decode(errors="replace").strip() if isinstance(e, subprocess.CalledProcessError) else e
        raise SystemExit(f"the room beside the tree is measured with git in the repository's root ({why}); "
                         "run there, or give --room MiB") from None
    tree = sum(Path(f.decode()).stat().st_size for f in files if f and Path(f.decode()).is_file())
    if tree + margin >= limit:
        raise SystemExit(f"the tree a call sends is {tree / 2**20:.1f} MiB: no room beside it in a 64 MiB call")
    return limit - tree - margin


def split_parts(weights: bytes, out: Path, room: int) -> list[Path]:
    """Spread ``weights`` over ``out/a`` (beside what is already there) and further folders ``b``, ``c``,
    ..., as ``model.part0``, ``model.part1``, ..., each folder at most ``room`` bytes."""
    folders, start, k = [out / "a"], 0, 0
    used = sum(p.stat().st_size for p in folders[0].rglob("*") if p.is_file())
    if used >= room:
        raise SystemExit(f"{folders[0]}: {used / 2**20:.1f} MiB of inputs leave no room for the encoder")
    while start < len(weights):
        folder = folders[-1]
        folder.mkdir(parents=True, exist_ok=True)
        end = min(len(weights), start + room - used)
        (folder / f"model.part{k}").write_bytes(weights[start:end])
        start, k, used = end, k + 1, 0
        if start < len(weights):
            folders.append(out / chr(ord("a") + len(folders)))
    return folders


def pack_style_inputs(data: Path, known: Path, out: Path, prefix: str = "domain_", max_len: int = 256) -> dict:
    """``out``'s training pairs of styled answers and the answers to score, as ``usl train-style``
    reads them (``--train``, ``--known``, ``--score``); the counts of each. Every input is read and
    checked before anything is written: a bad one leaves ``out`` as it was."""
    from transformers import AutoTokenizer

    from usl.fast.commands import _texts_file
    from usl.fast.style_scorer import reading_prefix
    from usl.data.encoder import encoder_path

    tables = {}
    for name, files in (("board", [known]), ("score", [data / "train.jsonl", data / "dev.jsonl"])):
        read = [_texts_file(str(f)) for f in files]
        tables[name] = ([k for keys, _ in read for k in keys], [t for _, texts in read for t in texts])
    with open(data / "train.jsonl", encoding="utf-8") as fi:  # read_samples above has checked every line
        styled = [line for line in fi if line.strip() and (json.loads(line).get("family") or "").startswith(prefix)]
    if not styled:
        raise ValueError(f"{data / 'train.jsonl'}: no pair whose criteria family starts with {prefix!r}")
    tok = AutoTokenizer.from_pretrained(encoder_path())
    out.mkdir(parents=True, exist_ok=True)
    for name, (keys, texts) in tables.items():
        with lzma.open(out / f"{name}.json.xz", "wt") as fo:
            json.dump({"keys": [k.hex() for k in keys], "texts": [reading_prefix(t, tok, max_len) for t in texts]},
                      fo, ensure_ascii=False)
    with lzma.open(out / "train_styled.jsonl.xz", "wt") as fo:
        fo.writelines(styled)
    return {"board": len(tables["board"][0]), "score": len(tables["score"][0]), "styled_pairs": len(styled)}


def pack_substance_inputs(shared: Path, out: Path, data: Path | None = None) -> dict:
    """What ``usl train-substance`` needs on a bare GPU box (``scripts/gpu_substance.sh``) beside its base:
    AlpacaEval's split and the training and board queries' outputs, each answer cut to what the reader reads
    (xz; 16 MB in all); with ``data`` (a ``usl data build-train`` folder), also its quality pairs for the
    quality head and the eval files the judge's gate is fitted and measured on, cut the same way."""
    import lzma

    from usl.data.io import read_json
    from usl.fast.substance import reading_text

    src = shared / "alpaca_eval"
    shutil.rmtree(out, ignore_errors=True)
    (out / "alpaca" / "outputs").mkdir(parents=True)
    split = read_json(src / "split.json")
    shutil.copy(src / "split.json", out / "alpaca" / "split.json")
    base = read_json(src / "outputs" / f"{split['baseline']}.json.gz")
    keep = {base[i]["instruction"] for i in split["train"] + split["board"]}
    for p in sorted((src / "outputs").glob("*.json.gz")):
        rows = [dict(x, output=reading_text(x["output"])) for x in read_json(p)
                if x.get("instruction") in keep and isinstance(x.get("output"), str)]
        with lzma.open(out / "alpaca" / "outputs" / (p.name.removesuffix(".gz") + ".xz"), "wt", preset=9) as f:
            json.dump(rows, f)
    counts = {"models": len(list((out / "alpaca" / "outputs").iterdir()))}
    if data is not None:
        # cut as the reader cuts: it reads the same text from the packed answer as from the whole one
        counts["quality_train"] = pack_jsonl(data / "quality" / "train.jsonl", out / "quality_train.jsonl.xz",
                                             cut=reading_text)
        counts["quality_dev"] = pack_jsonl(data / "quality" / "dev.jsonl", out / "quality_dev.jsonl.xz",
                                           cut=reading_text)
        from usl.data.substance import REAL_PAIR_SOURCES

        # the training pairs whose answers are real too (train-substance --real-pairs)
        counts["real_pairs"] = pack_jsonl(data / "train.jsonl", out / "real_pairs.jsonl.xz", cut=reading_text,
                                          keep=lambda d: d.get("source", "").startswith(REAL_PAIR_SOURCES))
        (out / "eval").mkdir()
        for name in SUBSTANCE_EVAL:
            counts[name] = pack_jsonl(data / "eval" / f"{name}.jsonl", out / "eval" / f"{name}.jsonl.xz",
                                      cut=reading_text)
    return counts


def pack_gguf(gguf: Path, texts: Path, out: Path, part_bytes: int = 24_200_000, preset: int = 6) -> dict:
    """A GGUF base too large for one carry, made to travel in parts: its token embedding's rows for tokens that
    no text under ``texts`` uses (a ``--substance`` carry: every string of its JSON files) are zeroed, so they
    compress to nothing (Gemma-3-270M: 253 MB, 178 MB of it a 262,144-token embedding of which the data uses
    about 79,000 tokens; 121 MB as xz), then xz, split into ``out/p0/part``, ``out/p1/part``, ... (one carry
    call each). ``out/p0/tokenizer.tar.xz`` is the tokenizer as this machine's transformers rebuilds it (checked
    by ``usl.data.backbone.check_tokenizer``), for a box whose version rebuilds it wrong.
    ``scripts/gpu_substance.sh`` with ``GGUF_PARTS=out`` puts them back together; the rows a text uses are
    unchanged, so the model reads those texts as the whole file would."""
    import io
    import lzma
    import tarfile
    import tempfile

    import numpy as np
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    from usl.data.backbone import check_tokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    check_tokenizer(tok, str(gguf))
    strings: list[str] = []

    def walk(x) -> None:
        if isinstance(x, str):
            strings.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for f in sorted(p for p in texts.rglob("*") if p.name.endswith((".json", ".jsonl", ".xz", ".gz"))):
        opener = lzma.open if f.suffix == ".xz" else gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt") as fh:
            body = fh.read()
        for doc in body.splitlines() if ".jsonl" in f.name else [body]:
            walk(json.loads(doc))
    strings = list(dict.fromkeys(strings))
    if not strings:
        raise ValueError(f"{texts}: no JSON texts (.json, .jsonl, .xz, .gz) to keep the tokens of; nothing was written")
    used = set(tok.all_special_ids)
    for i in range(0, len(strings), 2000):
        for ids in tok(strings[i:i + 2000], add_special_tokens=False)["input_ids"]:
            used.update(ids)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        trimmed = Path(tmp) / gguf.name
        shutil.copy(gguf, trimmed)
        emb = next((t for t in GGUFReader(str(trimmed)).tensors if t.name == "token_embd.weight"), None)
        if emb is None:
            raise ValueError(f"{gguf}: no token_embd.weight tensor; nothing was written")
        rows = int(emb.shape[-1])
        table = np.memmap(trimmed, dtype=np.uint8, mode="r+", offset=int(emb.data_offset),
                          shape=(rows, int(emb.n_bytes) // rows))
        keep = np.zeros(rows, dtype=bool)
        keep[[i for i in used if 0 <= i < rows]] = True
        table[~keep] = 0
        table.flush()
        del table
        packed = lzma.compress(trimmed.read_bytes(), preset=preset)
        tok.save_pretrained(Path(tmp) / "tokenizer")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            tar.add(Path(tmp) / "tokenizer", arcname="tokenizer")
    for i in range(0, len(packed), part_bytes):
        (out / f"p{i // part_bytes}").mkdir()
        (out / f"p{i // part_bytes}" / "part").write_bytes(packed[i:i + part_bytes])
    (out / "p0" / "tokenizer.tar.xz").write_bytes(buf.getvalue())
    return {"texts": len(strings), "tokens_kept": int(keep.sum()), "tokens": rows,
            "parts": -(-len(packed) // part_bytes), "xz_mb": round(len(packed) / 1e6, 1)}


# the gate's files (the fast CRM card's recipe) and the new-topic file
SUBSTANCE_EVAL = ("quality", "human", "general", "style", "domain_style", "length_flip", "new_topic", "wish_quality")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="artifacts/data-full", help="a `usl data build-train` output folder")
    ap.add_argument("--out", default="artifacts/gpu_m")
    ap.add_argument("--head", type=int, default=800)
    ap.add_argument("--tail", type=int, default=350)
    ap.add_argument("--dev-n", type=int, default=700)
    ap.add_argument("--no-eval", action="store_true", help="leave the eval files out")
    ap.add_argument("--quality", metavar="SHARED", help="pack the quality reader's inputs instead; SHARED: the "
                    "public data folder (../shared/data), whose default board is read whole")
    ap.add_argument("--substance", metavar="SHARED", help="pack usl train-substance's inputs instead (SHARED: the "
                    "shared data folder); with --data holding quality/, its pairs and eval files too")
    ap.add_argument("--gguf", metavar="FILE", help="pack a GGUF base in parts instead (pack_gguf); --data: the "
                    "--substance carry whose texts it will read")
    ap.add_argument("--style", metavar="KNOWN", help="pack usl train-style's inputs instead; KNOWN: the board's "
                    "answer texts (a JSON list, .gz or .xz ok)")
    ap.add_argument("--prefix", default="domain_", help="with --style: criteria families that name a style")
    ap.add_argument("--max-len", type=int, default=256, help="with --style: tokens of an answer the scorer reads")
    ap.add_argument("--room", type=float, default=0, help="with --style: MiB a carry folder may hold (default: "
                    "64 MiB less the tree a call sends, less 1)")
    args = ap.parse_args()
    out, data = Path(args.out), Path(args.data)
    if args.quality:
        if not (data / "quality" / "train.jsonl").is_file():
            raise SystemExit(f"{data / 'quality' / 'train.jsonl'}: no such file (usl data build-train --out {data})")
        print(json.dumps(pack_quality_inputs(data, Path(args.quality), out, args.head, args.tail)))
        return
    if args.gguf:
        if not Path(args.gguf).is_file() or not Path(args.gguf).name.endswith(".gguf"):
            raise SystemExit(f"--gguf {args.gguf}: no such .gguf file")
        if not data.is_dir():
            raise SystemExit(f"--data {data}: no such folder (the --substance carry whose texts the base will read)")
        try:
            print(json.dumps(pack_gguf(Path(args.gguf), data, out)))
        except ValueError as e:
            raise SystemExit(str(e)) from None
        return
    if args.substance:
        quality = data if (data / "quality" / "train.jsonl").is_file() else None
        print(json.dumps(pack_substance_inputs(Path(args.substance), out, quality)))
        return
    if args.style:
        for f in (Path(args.style), data / "train.jsonl", data / "dev.jsonl"):
            if not f.is_file():
                raise SystemExit(f"{f}: no such file")
        try:
            counts = pack_style_inputs(data, Path(args.style), out / "a", args.prefix, args.max_len)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        weights = fp16_encoder(out / "a" / "minilm")
        room = int(args.room * 2**20) if args.room else carry_room()
        folders = split_parts(weights, out, room)
        sizes = ", ".join(f"{d.name} {sum(p.stat().st_size for p in d.rglob('*') if p.is_file()) / 2**20:.1f} MiB"
                          for d in folders)
        print(f"{out}: {counts}; {sizes} (each carried beside the tree, {room / 2**20:.1f} MiB of room)")
        return
    (out / "minilm").mkdir(parents=True, exist_ok=True)
    (out / "minilm" / "model.safetensors").write_bytes(fp16_encoder(out / "minilm"))
    n_tr = pack_jsonl(data / "train.jsonl", out / "train.jsonl.xz", args.head, args.tail)
    n_dev = pack_jsonl(data / "dev.jsonl", out / "dev.jsonl.gz", args.head, args.tail, args.dev_n)
    for f in [] if args.no_eval else sorted((data / "eval").glob("*.jsonl")):
        (out / "eval").mkdir(exist_ok=True)
        pack_jsonl(f, out / "eval" / (f.name + ".gz"), 10**9, 0)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: train {n_tr} lines, dev {n_dev}, {size / 2**20:.1f} MiB (the carry limit is 64 MiB with the tree)")


if __name__ == "__main__":
    main()
