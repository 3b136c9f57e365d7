"""`usl quality`: the quality reading of the default judge (fit its gate, read a benchmark's pairs)."""

from __future__ import annotations

import typer

from usl.cli.common import confirm_spend, llm_failures, user_errors

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.command("fit-kinds")
def fit_kinds_cmd(
    weights: str = typer.Option("", help="The fast CRM's weights folder, where criterion_kinds.json is written "
                                         "(default: the shipped one)."),
    l2: float = typer.Option(1e-4, min=0.0, help="L2 penalty of the kind classifier."),
) -> None:
    """Learn which kind of wish a criterion states (length, style, domain, quality, correctness) from the
    criteria library's training wordings (usl.fast.criterion_kinds). Run usl quality fit-gate after it."""
    with user_errors():
        from usl.fast import criterion_kinds
        from usl.fast.sign_reader import SignReader, splitter
        from usl.data.criteria import load_library

        folder, encoder = _weights_and_encoder(weights)
        split = splitter(SignReader.load(folder))  # the judge's sign reading: the kinds of what it leaves
        model = criterion_kinds.fit(load_library(), lambda t: encoder.encode([x for x, _ in split(t)]).numpy(),
                                    l2=l2)
        model.save(folder)
        typer.echo(f"kinds of held-out wordings: {model.fitted_on['held_out_accuracy']:.3f} "
                   f"{model.fitted_on['held_out_accuracy_by_kind']} -> {folder / criterion_kinds.KINDS_FILE}")


@app.command("fit-gate")
def fit_gate_cmd(
    fast_predictions: list[str] = typer.Option(..., help="`usl eval --judge fast:WEIGHTS --predictions F` over eval "
                                                         "files: the fast judge's readings without a gate (repeatable)."),
    quality_predictions: list[str] = typer.Option(..., help="`usl eval --judge READER --predictions F` on the same "
                                                            "files (repeatable)."),
    weights: str = typer.Option("", help="The fast CRM's weights folder, where quality_gate.json is written "
                                         "(default: the shipped one)."),
    reader: str = typer.Option("quality", help="Judge spec of the quality reader the gate weighs."),
    l2: float = typer.Option(1e-3, min=0.0, help="L2 penalty on the gate's kind weights."),
    report_out: str = typer.Option("", help="Also write the cross-fitted accuracies as a `usl eval`-style report "
                                            "(by_file, by_family), e.g. for a model card's table."),
) -> None:
    """Learn how much each criterion leans on the quality reading (usl.quality.gate) from pairs with
    both readings, print each file's accuracy cross-fitted over halves of the criteria wordings, and record
    the judge's accuracy on each kind of criterion beside the kind classifier."""
    with user_errors():
        from dataclasses import replace
        from pathlib import Path

        from usl.fast.criteria_reading import READER_DIR, CriteriaReader
        from usl.fast.criterion_kinds import KindModel, kind_reading, reliability_by_kind
        from usl.fast.sign_reader import SignReader, splitter
        from usl.quality.gate import fit_gate, read_predictions, samples_from_predictions
        from usl.data.criteria import load_library
        from usl.judges.registry import load_judge

        folder, encoder = _weights_and_encoder(weights)
        kinds = KindModel.load(folder)
        if kinds is None:
            raise ValueError(f"{folder}: no criterion_kinds.json; run usl quality fit-kinds first")
        fast, quality = {}, {}
        for path in fast_predictions:
            fast |= read_predictions(path)
        for path in quality_predictions:
            quality |= read_predictions(path)
        criteria_reader = CriteriaReader.load(folder) if (folder / READER_DIR).is_dir() else None
        split = splitter(SignReader.load(folder))
        kind_probs, kinds_from = kind_reading(criteria_reader, kinds, lambda t: encoder.encode(t).numpy(), split)
        samples = samples_from_predictions(fast, quality, kind_probs, split)
        identity = load_judge(reader).identity
        info = {"fast_predictions": [Path(p).name for p in fast_predictions],
                "quality_predictions": [Path(p).name for p in quality_predictions]}
        gate, families = fit_gate(samples, kinds.kinds, reader, identity, kinds_from=kinds_from, l2=l2, info=info)
        gate.save(folder)
        by_family = {f: {"n": r["n"], "accuracy": r["gate"]} for f, r in families.items()}
        replace(kinds, reliability=reliability_by_kind(by_family, load_library())).save(folder)
        typer.echo(f"gate for {identity}: {len(samples)} samples, log-loss {gate.fitted_on['log_loss']}; "
                   "accuracy cross-fitted over halves of the criteria wordings:")
        typer.echo(f"  {'file':<28} {'n':>6} {'fast':>6} {'reader':>6} {'gate':>6}")
        for file, r in gate.fitted_on["cross_fit"].items():
            typer.echo(f"  {file:<28} {r['n']:>6} {r['fast']:>6.3f} {r['quality']:>6.3f} {r['gate']:>6.3f}")
        typer.echo(f"-> {folder / 'quality_gate.json'}, reliability by kind -> {folder / 'criterion_kinds.json'}")
        if report_out:
            import json

            report = {"judge": load_judge(f"fast:{folder}" if weights else "default").identity,
                      "source": "usl quality fit-gate: each pair judged by the gate fitted on the other half of the "
                                "criteria wordings; inputs " + ", ".join(info["fast_predictions"] + info["quality_predictions"]),
                      "by_file": {f: {"n": r["n"], "accuracy": r["gate"]} for f, r in gate.fitted_on["cross_fit"].items()},
                      "by_family": by_family}
            Path(report_out).write_text(json.dumps(report, indent=1) + "\n")
            typer.echo(f"report -> {report_out}")


@app.command("fit-substance")
def fit_substance_cmd(
        ctx: typer.Context,
        weights: str = typer.Option("", help="The fast CRM's weights folder whose substance/ reader is calibrated "
                                             "(default: the shipped one)."),
        alpaca: str = typer.Option("", "--alpaca", help="AlpacaEval folder (default: the shared data's)."),
        per_group: int = typer.Option(160, help="Pairs of each kind (non-answer, length, general)."),
        dev_queries: int = typer.Option(32, help="How many training queries train-substance kept for dev (the "
                                                 "pairs are built on those alone)."),
        seed: int = typer.Option(0, help="The seed train-substance ran with."),
        save_readings: str = typer.Option("", help="Also keep the pairs' readings (g, za, zb, labels) in this .npz.")) -> None:
    """Fit the calibration (weight, alpha, beta) of substance first (usl.fast.substance.substance_first) on pairs of
    the substance reader's dev queries: real answers against non-answers under style wishes, concise against
    verbose answers under length wishes, and confidently labelled general pairs. Writes
    substance/calibration.json beside the weights."""
    with user_errors():
        import json
        from pathlib import Path

        import numpy as np

        from usl import paths
        from usl.data import substance as data
        from usl.data.criteria import load_library
        from usl.data.io import iter_jsonl
        from usl.data.pairs.alpaca import load_outputs
        from usl.fast import substance
        from usl.judges.fast import FastJudge
        from usl.types import Criteria
        from usl.weights import shipped

        folder = Path(weights) if weights else shipped("fast-crm")
        shared = paths.shared_data()
        if not alpaca and shared is None:
            raise ValueError("no AlpacaEval folder: pass --alpaca DIR or set USL_SHARED_DATA")
        src = Path(alpaca) if alpaca else shared / "alpaca_eval"
        outputs = load_outputs(src)
        queries = list(outputs.train)
        dev = [queries[i] for i in np.random.default_rng(seed).permutation(len(queries))[:dev_queries]]
        library = load_library()
        families = [f for f in library.families if library[f].kind in ("length", "style", "domain")]
        wishes = {f: library.split(f, seed=0).train for f in families}
        notes = src / "annotations" / "weighted_alpaca_eval_gpt4_turbo"
        annotations = {p.name.split(".jsonl")[0]: [row for _, row in iter_jsonl(p)] for p in sorted(notes.glob("*.jsonl.gz"))}
        pairs = data.calibration_pairs(outputs.answers, annotations, dev, wishes, np.random.default_rng(seed + 2),
                                       baseline=outputs.baseline, per_group=per_group)
        judge = FastJudge(folder, home=ctx.obj.home, name="default")
        if judge.substance is None:
            raise ValueError(f"{folder}: no {substance.FOLDER}/ reader to calibrate; train one with usl train-substance")
        bank, judge.substance = judge.substance, None           # the verdict g without substance first
        g = np.zeros(len(pairs))
        by_likes: dict[tuple[str, ...], list[int]] = {}
        for i, p in enumerate(pairs):
            by_likes.setdefault(p.likes, []).append(i)
        for likes, idx in by_likes.items():
            probs = judge.judge_matrix(Criteria(likes=likes), [pairs[i].query for i in idx], [pairs[i].a for i in idx],
                                       [pairs[i].b for i in idx])
            g[idx] = np.log(probs) - np.log1p(-probs)
        za = bank.read([p.query for p in pairs], [p.a for p in pairs])
        zb = bank.read([p.query for p in pairs], [p.b for p in pairs])
        y = np.array([p.a_wins for p in pairs])
        if save_readings:
            np.savez(save_readings, g=g, za=za, zb=zb, y=y, group=np.array([p.group for p in pairs]))
        weight, alpha, beta, loss = substance.fit_calibration(g, za, zb, y)
        groups = np.array([p.group for p in pairs])
        names = sorted(set(groups.tolist()))
        acc = lambda logit: {k: round(float(np.mean((logit[groups == k] > 0) == y[groups == k])), 4) for k in names}
        report = {"weight": weight, "alpha": alpha, "beta": beta, "log_loss": round(loss, 5),
                  "pairs": {k: int((groups == k).sum()) for k in names}, "dev_queries": dev_queries, "seed": seed,
                  "accuracy": {"criteria_alone": acc(g), "raw_reader": acc(substance.substance_first(g, za, zb)),
                               "calibrated": acc(substance.substance_first(g, za, zb, weight, alpha, beta))}}
        (folder / substance.FOLDER / substance.CALIBRATION_FILE).write_text(json.dumps(report, indent=1) + "\n")
        typer.echo(json.dumps(report, indent=1))


@app.command("fit-length")
def fit_length_cmd(
        ctx: typer.Context,
        train: str = typer.Option(..., help="`usl data build-train`'s train.jsonl: its length/alpaca_style pairs (one "
                                            "model's shorter and longer answers to a training query) are read."),
        weights: str = typer.Option("", help="The fast CRM's weights folder whose substance/ reader gets the length "
                                             "correction (default: the shipped one)."),
        pairs: int = typer.Option(800, min=10, help="How many pairs to read (a seeded draw of them all)."),
        seed: int = typer.Option(0, help="Seed of the draw.")) -> None:
    """Fit the quality reading's length correction (usl.judges.substance: lambda in Q(A, B) = r(A) - r(B) - lambda *
    log-length ratio) on pairs of one model's shorter and longer answers to one training query (AlpacaEval's
    concise, default and verbose answers of its style models), which say the same at two lengths. Writes
    substance/length_correction.json beside the weights; refit the gate and the calibration after it."""
    with user_errors():
        import json
        import random
        from pathlib import Path

        from usl import paths
        from usl.data.paper_jsonl import read_samples
        from usl.fast import substance
        from usl.judges.substance import LENGTH_FILE, fit_length_correction
        from usl.weights import shipped

        if weights and not Path(weights).is_dir():
            raise ValueError(f"--weights {weights}: no such folder")
        folder = (Path(weights) if weights else shipped("fast-crm")) / substance.FOLDER
        if not (folder / "head.safetensors").is_file():
            raise ValueError(f"{folder}: no substance reader with a quality head to correct")
        found = {s.group: (s.prompt, *sorted((s.response_a, s.response_b), key=len))   # a pair's two orders: once
                 for s in read_samples(train) if s.source.startswith("length/alpaca_style")}
        if not found:
            raise ValueError(f"{train}: no length/alpaca_style pairs (build it with usl data build-train)")
        chosen = list(found.values())
        random.Random(seed).shuffle(chosen)
        chosen = chosen[:pairs]
        bank = substance.SubstanceBank.shared(folder, paths.cache_dir(ctx.obj.home) / "substance")
        q, short, long = [c[0] for c in chosen], [c[1] for c in chosen], [c[2] for c in chosen]
        r = bank.quality(q + q, short + long)
        report = fit_length_correction(r[:len(q)], r[len(q):], short, long)
        report |= {"queries": len(set(q)), "seed": seed, "source": f"{Path(train).name}: length/alpaca_style pairs"}
        (folder / LENGTH_FILE).write_text(json.dumps(report, indent=1) + "\n")
        typer.echo(json.dumps(report, indent=1) + f"\n-> {folder / LENGTH_FILE}")


def _weights_and_encoder(weights: str):
    """The fast CRM's weights folder (default: the shipped one) and its criteria encoder."""
    from pathlib import Path

    from usl.weights import shipped
    from usl.fast.criteria_encoder import ADAPTER_DIR, CriteriaEncoder

    folder = Path(weights) if weights else shipped("fast-crm")
    adapter = folder / ADAPTER_DIR
    return folder, CriteriaEncoder(adapter if adapter.exists() else None)


@app.command("fill")
def fill_cmd(
    ctx: typer.Context,
    benchmark: str = typer.Option("alpaca_eval", help="Benchmark whose (answer, baseline) pairs are read."),
    baseline: str = typer.Option("", help="Baseline model (default: the benchmark's)."),
    judge: str = typer.Option("default", help="The judge whose quality reading is filled: default, or "
                                              "default:quality=JUDGE with the reader JUDGE (llm:MODEL,...)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Send an LLM reader's requests without asking (scripts)."),
) -> None:
    """Read and store the quality reading of every (answer, baseline) pair of a benchmark, with progress;
    a killed run resumes where it stopped. Boards of that benchmark then need no reading. With an LLM
    reader (``default:quality=llm:...``) the requests and tokens are shown, and asked for, first."""
    with user_errors():
        from tqdm import tqdm

        from usl.judges.base import HasQualityTerm
        from usl.leaderboard.service import LeaderboardService
        from usl.leaderboard.types import LeaderboardSpec

        service = LeaderboardService(ctx.obj.store(), home=ctx.obj.home)
        j = service.judge(judge)
        reading = j.quality if isinstance(j, HasQualityTerm) else None
        if reading is None:
            raise ValueError(f"judge {judge!r} has no quality reading to fill")
        spec = LeaderboardSpec(benchmark=benchmark, judge=judge, baseline=baseline or None)
        queries, answers, baselines = service.pair_texts(spec)
        n = reading.missing(queries, answers, baselines)
        spend = llm_spend(reading, queries, answers, baselines) if n else ""
        typer.echo(f"{len(queries):,} pairs, {n:,} not read yet by {reading.gate.reader_identity} "
                   f"(2 orders each){f': {spend}' if spend else ''}")
        if spend:
            confirm_spend(spend, yes)
        # the bar closes (ends its line) before a failure is told
        with llm_failures("readings made so far are stored; rerun to resume"), \
                tqdm(total=n, unit="pair", desc="quality readings") as bar:
            reading.readings(queries, answers, baselines, progress=lambda done, total: bar.update(done - bar.n))


def llm_reader(reading):
    """The LLM judge that ``reading`` asks for its quality readings, or None for a local reader."""
    from usl.judges.llm_api import LLMJudge
    from usl.judges.quality import VerdictReader

    reader = reading.reader
    judge = reader.judge if isinstance(reader, VerdictReader) else reader
    return judge if isinstance(judge, LLMJudge) else None


def llm_spend(reading, queries, answers, baselines) -> str:
    """What reading the missing pairs sends an LLM reader, and where: "16 requests, ~1.2k prompt tokens
    (chars/4 estimate), <= 16 completion tokens to http://host/v1"; '' for a reader that is no LLM."""
    import numpy as np

    from usl.data.pairs.general import QUALITY_CRITERIA
    from usl.judges.base import JudgeRequest
    from usl.judges.llm_cost import estimate_cost
    from usl.judges.redact import public_url
    from usl.types import Criteria

    judge = llm_reader(reading)
    if judge is None:
        return ""
    config = judge.config

    todo = np.flatnonzero(np.isnan(reading.bank.lookup(queries, answers, baselines)))
    crit = Criteria(QUALITY_CRITERIA, ())
    reqs = [JudgeRequest(crit, queries[i], a, b) for i in todo
            for a, b in ((answers[i], baselines[i]), (baselines[i], answers[i]))]
    return f"{estimate_cost(reqs, config).describe()} to {public_url(config.base_url)} (model {config.model})"
