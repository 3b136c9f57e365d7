"""The fast judge's training commands, ``train-style`` and ``train-reader``, as plain typer functions.

They live here, not in ``usl.cli``, so that ``python -m usl.fast`` can serve ``train-style`` on a GPU
machine with only the training stack installed (``usl.cli`` imports every command group, the server's
included). ``usl.cli.train`` registers them on the main app.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from usl.console import user_errors
from usl.data import backbone
from usl.data.substance import REAL_PAIR_SOURCES


def _texts_file(path: str) -> tuple[list[bytes], list[str]]:
    """(keys, texts) of the answers in a paper-format JSONL file (``.jsonl``, ``.jsonl.gz``: both
    answers of every pair, as a judge reads them), a JSON list of answer texts, or
    ``{"keys": [hex], "texts": [...]}`` where each text may be cut after what the scorer reads
    (``usl.fast.style_scorer.reading_prefix``) and its key is that of the whole answer (``text_key``)."""
    from usl.fast.style_scorer import text_key
    from usl.data.io import read_json

    if path.endswith((".jsonl", ".jsonl.gz", ".jsonl.xz")):
        from usl.crm.formatting import judged_texts
        from usl.data.paper_jsonl import read_samples

        texts = list(dict.fromkeys(t for s in read_samples(path)
                                   for t in judged_texts(s.prompt, s.model_a, s.model_b)[1:]))
        return [text_key(t) for t in texts], texts
    got = read_json(path)
    if isinstance(got, list) and all(isinstance(t, str) for t in got):
        return [text_key(t) for t in got], got
    if (isinstance(got, dict) and isinstance(got.get("keys"), list) and isinstance(got.get("texts"), list)
            and len(got["keys"]) == len(got["texts"]) and all(isinstance(t, str) for t in got["texts"])):
        keys = []
        for i, k in enumerate(got["keys"]):
            try:
                keys.append(bytes.fromhex(k))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}: field 'keys[{i}]': not a hex string ({e})") from e
            if len(keys[-1]) != len(text_key("")):
                raise ValueError(f"{path}: field 'keys[{i}]': {len(keys[-1])} bytes, not {len(text_key(''))} "
                                 "(the first bytes of the answer's SHA-256, as text_key gives them)")
        return keys, got["texts"]
    raise ValueError(f"{path}: expected a JSON list of answer texts, or an object with 'keys' and 'texts' "
                     "lists of one length")


def train_style_command(
        train: List[str] = typer.Option([], "--train", help="Paper-format JSONL (repeatable): the winners of pairs "
                                        "whose criteria family starts with --prefix are the styled answers."),
        out: str = typer.Option("artifacts/style-scorer", "--out", help="Output directory."),
        prefix: str = typer.Option("domain_", help="Criteria families that name an answer's style."),
        aux_registers: List[str] = typer.Option([], "--aux-registers", help="Answers written in named registers "
                                                "(JSONL: query, register, answer; e.g. "
                                                "configs/register_answers.jsonl), learned beside --train's styles with "
                                                "a head each and dropped after training: the saved scorer "
                                                "scores the styles alone, having learned them against other "
                                                "registers too; repeatable."),
        known: List[str] = typer.Option([], "--known", help="Answer texts to score and keep in the scorer's shipped "
                                        "table (a board's answers): a JSON list (.gz, .xz ok), keys+texts, or "
                                        "the answers of a paper-format JSONL; repeatable."),
        score: List[str] = typer.Option([], "--score", help="Answer texts to score into OUT/scores.npz (the "
                                        "training and dev answers, for `usl train-fast`; not shipped); same "
                                        "formats; repeatable."),
        base: Optional[str] = typer.Option(None, help="Directory of the base encoder (default: the packaged "
                                           "all-MiniLM-L6-v2)."),
        lora_r: int = typer.Option(16, help="LoRA rank."),
        lr: float = typer.Option(5e-4, help="LoRA learning rate."),
        epochs: int = typer.Option(8, help="Epochs."),
        max_len: int = typer.Option(256, help="Tokens of an answer that are read."),
        folds: int = typer.Option(5, help="Cross-fitting folds."),
        seed: int = typer.Option(0, help="Seed."),
        combine: List[str] = typer.Option([], "--combine", help="Instead of training: a directory written by "
                                          "`usl train-style` (repeatable, two or more, each fitted with another "
                                          "--seed); OUT gets one scorer whose scores are their mean.")) -> None:
    """Fine-tune the style scorer (MiniLM + LoRA) whose scores the fast CRM reads; a GPU makes it minutes.

    Writes OUT/style_scorer/ (what the fast CRM's recipe key style_scorer: OUT ships with it),
    OUT/heldout.npz (cross-fitted scores of the styled training answers) and OUT/scores.npz.
    With --combine, joins scorers already fitted (an ensemble over seeds) and trains nothing."""
    import time

    from usl.fast.style_scorer import StyleScorerConfig, fit_style, text_key, write_table

    with user_errors():
        from usl.fast.train import styled_answers_by_query
        from usl.data.paper_jsonl import read_samples

        t0 = time.time()
        if combine:
            if train or aux_registers or known or score:
                raise ValueError("--combine joins fitted scorers: it takes no --train, --aux-registers, --known "
                                 "or --score")
            from usl.fast.style_scorer import combine_dirs

            scorer = combine_dirs(combine, out)
            report = {"out": out, "labels": list(scorer.cfg.labels), "members": scorer.cfg.members,
                      "known": len(scorer.known), "seconds": round(time.time() - t0, 1)}
            (Path(out) / "training.json").write_text(json.dumps(report | {"combine": list(combine)}, indent=2))
            typer.echo(json.dumps(report))
            return
        if not train:
            raise ValueError("usl train-style needs --train (or --combine)")
        samples = [s for f in train for s in read_samples(f)]
        by_query = styled_answers_by_query(samples, prefix)
        if not by_query:
            raise ValueError(f"no pairs with a criteria family starting with {prefix!r} in {', '.join(train)}")
        styles = tuple(sorted({label for g in by_query.values() for label in g}))
        n_registers = n_joined = 0
        if aux_registers:
            from usl.fast.style_scorer import read_register_answers

            for f in aux_registers:
                for q, written in read_register_answers(f).items():
                    n_registers += len(written)
                    n_joined += q in by_query
                    by_query[q] = by_query.get(q, {}) | written
        groups = list(by_query.values())
        sets = {}
        for name, files in (("known", known), ("score", score)):
            keys, texts = [], []
            for f in files:
                k, t = _texts_file(f)
                keys += k
                texts += t
            sets[name] = (keys, texts)
        cfg = StyleScorerConfig(labels=tuple(sorted({label for g in groups for label in g})), lora_r=lora_r, lr=lr,
                                epochs=epochs, max_len=max_len, folds=folds, seed=seed)
        scorer, held = fit_style(groups, cfg, base_path=base)
        if aux_registers:  # the styles' heads alone; their scores are those of the network that learned all
            keep = [cfg.labels.index(label) for label in styles]
            scorer, held = scorer.only(styles), {t: v[keep] for t, v in held.items()}
            cfg = scorer.cfg
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        tables = {}
        for name, (keys, texts) in sets.items():
            scores = scorer.compute(texts, batch=128 if device == "cuda" else None, device=device) if texts else []
            tables[name] = dict(zip(keys, scores))
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        scorer.known = tables["known"]
        scorer.save(o)
        write_table(o / "heldout.npz", {text_key(t): s for t, s in held.items()})
        if tables["score"]:
            write_table(o / "scores.npz", tables["score"])
        elif (o / "scores.npz").exists():  # left by an earlier run: another model's scores
            (o / "scores.npz").unlink()
        report = {"out": out, "labels": list(cfg.labels), "queries": len(groups),
                  "register_answers": n_registers, "register_queries_joined": n_joined,
                  "heldout": len(held),
                  "known": len(tables["known"]), "scored": len(tables["score"]), "device": device,
                  "seconds": round(time.time() - t0, 1)}
        (o / "training.json").write_text(json.dumps(report | {"train": list(train)}, indent=2))
        typer.echo(json.dumps(report))


def train_reader_command(
        out: str = typer.Option("artifacts/length-reader", "--out", help="Output directory."),
        kind: str = typer.Option("length", help="What the reader reads: length (shorter, longer or neither) "
                                 "or domain (academy, business, literature, plain or none)."),
        wordings: List[str] = typer.Option([], "--wordings", help="A wordings file written for the reader: a JSON "
                                           "object of side (concise, detailed, domain_academy, ..., domain_plain, "
                                           "other or neutral) -> list of criteria; repeatable."),
        test: List[str] = typer.Option([], "--test", help="A wordings file the reader must not train on: its "
                                       "accuracy per side is reported; repeatable."),
        library_seed: int = typer.Option(0, help="Seed of the criteria library's train/held-out split (the --seed "
                                         "of `usl data build-train`): only its training wordings are read."),
        holdout_family: List[str] = typer.Option([], "--holdout-family", help="A criteria family to leave out "
                                                 "whole (the --holdout-family of `usl data build-train`): its "
                                                 "library wordings and its side of every wordings file; "
                                                 "repeatable."),
        epochs: int = typer.Option(20, help="Epochs per head."),
        heads: int = typer.Option(3, help="Heads averaged, one seed each."),
        folds: int = typer.Option(5, help="Cross-fitting folds for the library's wordings."),
        seed: int = typer.Option(0, help="Seed."),
        lexicon: bool = typer.Option(True, "--lexicon/--no-lexicon", help="Give the heads the keyword features "
                                     "(usl.fast.criteria_lexicon) beside the pooled token states.")) -> None:
    """Train a criterion reader: which way a criterion points on length (shorter, longer, neither), or
    which domain style it asks for (--kind domain).

    Writes OUT/length_reader/ or OUT/domain_reader/ (what the fast CRM's recipe keys length_reader: OUT
    or domain_reader: OUT ship with it) and OUT/heldout.json (cross-fitted readings of every
    training wording). CPU, a few minutes."""
    import time

    from usl.fast.criterion_reader import (
        KINDS,
        ReaderConfig,
        direction_accuracy,
        fit_reader,
        in_reader_frame,
        library_wordings,
        read_wordings,
        sides_of,
        training_examples,
        write_readings,
    )

    with user_errors():
        t0 = time.time()
        cfg = ReaderConfig(kind=kind, epochs=epochs, heads=heads, folds=folds, seed=seed, lexicon=lexicon)
        lib = library_wordings(library_seed, kind, holdout_family)
        # a held-out family's side of a wordings file goes too ("concise" is length_concise's side), for
        # every kind of reader: one that reads it as "none" would learn its wordings all the same
        gone = {side for f in holdout_family for side in sides_of(f)}
        extra = [x for f in wordings for x in read_wordings(f, kind, skip=gone)]
        tests = {f: read_wordings(f, kind) for f in test}
        examples, lib, dropped, leaked = training_examples(lib, extra, tests.values(), library_seed, kind)
        # every training text gets a reading from heads that did not see it: the fast CRM trains on these
        reader, held = fit_reader(examples, cfg, crossfit=[t for t, _ in examples])
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        reader.save(o)
        write_readings(o / "heldout.json", held)
        counts = {name: sum(label == k for _, label in examples) for k, name in enumerate(KINDS[kind].labels)}
        report = {"out": out, "kind": kind, "examples": counts, "library_wordings": len(in_reader_frame(lib, kind)),
                  "dropped_as_test": dropped, "dropped_as_held_out_library": leaked,
                  "test": {f: direction_accuracy(reader, ex) for f, ex in tests.items()},
                  "seconds": round(time.time() - t0, 1)}
        (o / "training.json").write_text(json.dumps(report | {"wordings": list(wordings), "library_seed": library_seed,
                                                              "holdout_family": list(holdout_family),
                                                              "config": cfg.__dict__}, indent=2, default=list))
        typer.echo(json.dumps(report))


def train_substance_command(
        alpaca: str = typer.Option("", "--alpaca", help="AlpacaEval folder (outputs/, split.json; default: the shared "
                                                        "data's alpaca_eval)."),
        out: str = typer.Option("artifacts/substance", "--out", help="Output directory (the reader, its card and "
                                                                     "the board's readings)."),
        base: Optional[str] = typer.Option(None, help="The base model: an offline package's alias (smollm2-135m, "
                                                      "gemma3-270m), a Hugging Face directory or a GGUF file "
                                                      "(default: the packaged all-MiniLM-L6-v2)."),
        negatives: float = typer.Option(1.5, help="Non-answers made per real answer."),
        pairs: str = typer.Option("", help="Preference pairs (JSONL, `usl data build-train`'s quality/train.jsonl): "
                                           "also train a quality head, r(A) - r(B) the logit of A over B."),
        dev_pairs: str = typer.Option("", help="Dev pairs for the quality head (quality/dev.jsonl)."),
        real_pairs: str = typer.Option("", "--real-pairs", help="Training pairs (JSONL, `usl data build-train`'s "
                                                                "train.jsonl): both answers of its --real-sources "
                                                                "pairs are real answers too, with non-answers made "
                                                                "from them (no refusals: their queries may ask for "
                                                                "harm)."),
        real_sources: str = typer.Option(",".join(REAL_PAIR_SOURCES), "--real-sources",
                                         help="Comma-separated source prefixes of --real-pairs whose answers are "
                                              "real (written by people or models, not constructed)."),
        dev_queries: int = typer.Option(32, help="Training queries kept for dev (early stopping)."),
        epochs: int = typer.Option(2, help="Epochs."),
        lr: float = typer.Option(3e-4, help="LoRA learning rate."),
        batch: int = typer.Option(64, help="Batch size."),
        max_minutes: float = typer.Option(0.0, min=0.0, help="Stop training after this long, keeping the best "
                                                            "state so far (0: no limit)."),
        init: str = typer.Option("", help="Train on from this reader (its folder: LoRA and head; a quality head is "
                                          "added, starting at zero, when --pairs are given) instead of a new one."),
        test_items: int = typer.Option(0, min=0, help="Board test items read after training (0: all, about 50k)."),
        seed: int = typer.Option(0, help="Seed.")) -> None:
    """Train the substance reader (usl.fast.substance): real answers of every model to the training queries
    against non-answers made from them; report its accuracy by kind on the board queries, which it never
    sees in training, and store its readings of every board answer (GPU: minutes; CPU: hours)."""
    with user_errors():
        import time

        import numpy as np
        import torch

        from usl import paths
        from usl.crm.formatting import judged_texts
        from usl.data import leakage
        from usl.data import substance as data
        from usl.data.pairs.alpaca import load_outputs
        from usl.data.paper_jsonl import read_samples
        from usl.fast import substance

        t0 = time.time()
        if base and base not in backbone.ALIASES and not Path(base).exists() and (
                base.endswith(".gguf") or base.startswith(("/", ".", "~"))):
            raise ValueError(f"--base {base}: no such file or directory")   # a hub id (owner/name) is left to the hub
        if base in backbone.ALIASES:
            backbone.resolve_backbone(base)      # a missing package is named now; the GGUF is converted once
        if dev_pairs and not pairs:
            raise ValueError("--dev-pairs needs --pairs")
        if init and not (Path(init) / "head.safetensors").is_file():
            raise ValueError(f"--init {init}: no substance reader there (adapter and head.safetensors)")
        train_pairs, dev_pair_list = preference_pairs(pairs), preference_pairs(dev_pairs)   # bad lines named now
        sources = tuple(p.strip() for p in real_sources.split(",") if p.strip())
        real = [s for s in read_samples(real_pairs) if s.source.startswith(sources)] if real_pairs else []
        if real_pairs and not real:
            raise ValueError(f"--real-pairs {real_pairs}: no pair of the sources {', '.join(sources)}")
        shared = paths.shared_data()
        if not alpaca and shared is None:
            raise ValueError("no AlpacaEval folder: pass --alpaca DIR or set USL_SHARED_DATA")
        src = Path(alpaca) if alpaca else shared / "alpaca_eval"
        outputs = load_outputs(src)
        rng = np.random.default_rng(seed)
        queries = list(outputs.train)
        order = rng.permutation(len(queries))
        dev_q = [queries[i] for i in order[:dev_queries]]
        train_q = [queries[i] for i in order[dev_queries:]]
        leakage.assert_clean(leakage.BoardGuard(outputs.board), real, what=f"--real-pairs {real_pairs}")
        extra, extra_q = data.pair_answers(judged_texts(s.prompt, s.model_a, s.model_b) for s in real)
        train_items = data.examples(outputs.answers, train_q, rng, negatives_per_answer=negatives)
        train_items += data.examples(extra, extra_q, rng, kinds=data.PAIR_KINDS, negatives_per_answer=negatives)
        dev_items = data.examples(outputs.answers, dev_q, rng)
        model = substance.SubstanceModel(init or None, base=base, heads=2 if train_pairs else 1, trainable=True).to(
            torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        typer.echo(f"{len(train_items)} training items, {len(dev_items)} dev items, {len(train_pairs)} training "
                   f"pairs, {len(dev_pair_list)} dev pairs on {model.device}")
        as_tuples = lambda items: [(i.query, i.text, i.answers) for i in items]
        history = substance.train(model, as_tuples(train_items), as_tuples(dev_items), pairs=train_pairs,
                                  dev_pairs=dev_pair_list, epochs=epochs, batch=batch, lr=lr, seed=seed,
                                  max_seconds=max_minutes * 60 or None)
        folder = Path(out)
        card = {"recipe": {"base": base or substance.DEFAULT_BASE, "heads": model.heads, "negatives": negatives,
                           "pairs": Path(pairs).name if pairs else None, "init": init or None,
                           "real_pairs": {"file": Path(real_pairs).name, "sources": list(sources),
                                          "queries": len(extra_q),
                                          "answers": sum(len(v) for v in extra.values())} if real_pairs else None,
                           "dev_queries": dev_queries, "epochs": epochs, "lr": lr, "batch": batch, "seed": seed,
                           "max_minutes": max_minutes or None, "lora_r": 16,
                           "targets": sorted(model.encoder.peft_config["default"].target_modules),
                           "tokens": [substance.QUERY_TOKENS, substance.HEAD_TOKENS, substance.TAIL_TOKENS]},
                "data": {"train_items": len(train_items), "dev_items": len(dev_items), "train_queries": len(train_q),
                         "train_pairs": len(train_pairs), "dev_pairs": len(dev_pair_list)},
                "history": history}
        model.save(folder, card)    # first: what follows only reads
        typer.echo(f"-> {folder} trained in {time.time() - t0:.0f}s")
        board = {m: outputs.answers[m] for m in outputs.board_models if m in outputs.answers}
        test = data.examples(board, list(outputs.board), np.random.default_rng(seed + 1),
                             kinds=data.KINDS + data.HELD_OUT_KINDS)
        if test_items and len(test) > test_items:
            test = [test[i] for i in np.sort(np.random.default_rng(seed + 2).choice(len(test), test_items, replace=False))]
        z = model.logits([i.query for i in test], [i.text for i in test], batch=256)
        kinds = np.array([i.kind for i in test])
        truth = np.array([i.answers for i in test])
        length = np.array([len(i.text) for i in test])
        groups = {k: kinds == k for k in ("real",) + data.KINDS + data.HELD_OUT_KINDS}
        groups["real_short"] = groups["real"] & (length <= np.quantile(length[groups["real"]], 0.1))  # shortest tenth
        by_kind = {k: {"n": int(m.sum()), "accuracy": round(float(np.mean((z[m] > 0) == truth[m])), 4)}
                   for k, m in groups.items() if m.any()}
        for k, r in by_kind.items():
            typer.echo(f"  {k:<14} {r['n']:>6} {r['accuracy']:.4f}" + ("  (never trained on)" if k in data.HELD_OUT_KINDS else ""))
        board_pairs = list(dict.fromkeys((q, a) for m in sorted(set(board) | {outputs.baseline}) for q in outputs.board
                                         if (a := outputs.answers.get(m, {}).get(q))))
        zb = model.readings([q for q, _ in board_pairs], [a for _, a in board_pairs], batch=256)
        card |= {"board_test": by_kind, "seconds": round(time.time() - t0, 1)}
        (folder / "card.json").write_text(json.dumps(card, indent=1) + "\n")
        substance.save_readings(folder / substance.BOARD_FILE, board_pairs, zb)
        typer.echo(f"-> {folder} ({len(board_pairs)} board readings) in {time.time() - t0:.0f}s")


def preference_pairs(path: str) -> list[tuple[str, str, str, bool]]:
    """(query, A, B, A preferred) of a JSONL of preference samples, ties left out, each read as a judge reads
    it (``judged_texts``: a conversation's shared turns are the query), so the quality head learns the view it
    is scored on."""
    if not path:
        return []
    from usl.crm.formatting import judged_texts
    from usl.data.paper_jsonl import read_samples

    return [(*judged_texts(s.prompt, s.model_a, s.model_b), s.preference == "model_a")
            for s in read_samples(path) if s.preference != "tie"]


def train_criteria_command(
        config: str = typer.Option("configs/criteria_reader.yaml", "--config", help="The reader's recipe (YAML)."),
        set_: List[str] = typer.Option([], "--set", help="Override a recipe field: key=value (YAML value)."),
        out: str = typer.Option("artifacts/criteria-reader", "--out",
                                help="Folder the reader is written under (OUT/criteria_reader/); "
                                     "src/usl/weights/fast-crm rebuilds the shipped one.")) -> None:
    """Train the criteria reader (usl.fast.criteria_reading): a criterion's kind and length direction, read
    by the judge, length control, the contradiction check and the page. CPU, a few minutes; prints its
    figures on the library's held-out wordings (dev) and the recipe's test files."""
    from usl.fast.criteria_reading import CriteriaReaderConfig, fit

    with user_errors():
        cfg = CriteriaReaderConfig.from_yaml(config, set_)
        reader = fit(cfg)
        folder = reader.save(out)
        summary = {k: v for k, v in reader.trained.items() if k != "test"} | {
            "test": {name: {k: v for k, v in r.items() if k != "length_wrong"} for name, r in reader.trained["test"].items()}}
        typer.echo(json.dumps(summary, indent=1))
        typer.echo(f"-> {folder}")


def train_keywords_command(
        config: str = typer.Option("configs/keyword_reader.yaml", "--config", help="The reader's recipe (YAML)."),
        set_: List[str] = typer.Option([], "--set", help="Override a recipe field: key=value (YAML value)."),
        out: str = typer.Option("artifacts/keyword-reader", "--out",
                                help="Folder the reader is written under (OUT/keyword_reader/); "
                                     "src/usl/weights/fast-crm rebuilds the shipped one.")) -> None:
    """Train the keyword reader (usl.fast.keyword_reader): a criterion's keyword axes, learned from the criteria
    lexicon's readings of ~40,000 texts. CPU, about 20 minutes on 2 cores; prints how often it reads each axis
    as the lexicon does on the library's held-out wordings and the criteria reader's test files, which it
    never trains on."""
    from usl.fast.criteria_reading import CriteriaReaderConfig, library_held_out_set, wordings_set
    from usl.fast.keyword_reader import KeywordReaderConfig, agreement, fit

    with user_errors():
        cfg = KeywordReaderConfig.from_yaml(config, set_)
        reader = fit(cfg)
        folder = reader.save(out)
        rc = CriteriaReaderConfig.from_yaml(cfg.criteria_reader)
        sets = {"library held out": [x.text for x in library_held_out_set(rc.library_seed)]} | {
            Path(f).stem: [x.text for x in wordings_set(f)] for f in rc.test}
        report = {name: {k: v for k, v in agreement(reader, texts).items() if k in ("texts", "every_axis", "short",
                                                                                  "long", "negation")}
                  for name, texts in sets.items()}
        (folder / "training.json").write_text(json.dumps(report, indent=1))
        typer.echo(json.dumps(report, indent=1))
        typer.echo(f"-> {folder}")


def train_signs_command(
        config: str = typer.Option("configs/keyword_reader.yaml", "--config",
                                   help="The keyword reader's recipe (YAML): its corpus, and the sign_ fields."),
        set_: List[str] = typer.Option([], "--set", help="Override a recipe field: key=value (YAML value)."),
        out: str = typer.Option("artifacts/sign-reader", "--out",
                                help="Folder the reader is written under (OUT/sign_reader/); "
                                     "src/usl/weights/fast-crm rebuilds the shipped one.")) -> None:
    """Train the sign reader (usl.fast.sign_reader): which criteria are dislikes and of what, learned from
    split_sign's reading of the keyword reader's texts and recombinations. CPU, about 25 minutes on 2 cores; prints how
    often it splits the library's held-out wordings, the criteria reader's test files and the blind set as
    split_sign does (none of them trained on)."""
    from usl.fast.criteria_reading import CriteriaReaderConfig, blind_set, library_held_out_set, wordings_set
    from usl.fast.keyword_reader import KeywordReaderConfig
    from usl.fast.sign_reader import SignReader, agreement, fit

    with user_errors():
        cfg = KeywordReaderConfig.from_yaml(config, set_)
        folder = fit(cfg).save(out)
        reader = SignReader.load(out)  # the figures of the weights as saved (fp16)
        rc = CriteriaReaderConfig.from_yaml(cfg.criteria_reader)
        sets = {"library held out": [x.text for x in library_held_out_set(rc.library_seed)],
                "blind": [x.text for x in blind_set()]} | {
            Path(f).stem: [x.text for x in wordings_set(f)] for f in rc.test}
        report = {name: agreement(reader, texts) for name, texts in sets.items()}
        (folder / "training.json").write_text(json.dumps(report, indent=1))
        typer.echo(json.dumps(report, indent=1))
        typer.echo(f"-> {folder}")
