"""`usl quality`: the quality reading of the default judge (fit its gate, read a benchmark's pairs)."""

from __future__ import annotations

import typer

from usl.cli.common import user_errors

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.command("fit-gate")
def fit_gate_cmd(
    ctx: typer.Context,
    fast_predictions: str = typer.Option(..., help="`usl eval --judge fast:WEIGHTS --predictions F` on the dev file: "
                                                   "the fast judge's readings (fitted without a gate)."),
    quality_predictions: str = typer.Option(..., help="`usl eval --judge READER --predictions F` on the same file."),
    weights: str = typer.Option("", help="The fast CRM's weights folder, where quality_gate.json is written "
                                         "(default: the shipped one)."),
    reader: str = typer.Option("quality", help="Judge spec of the quality reader the gate weighs."),
    l2: float = typer.Option(1e-3, min=0.0, help="L2 penalty on the gate's weights."),
) -> None:
    """Learn how much each criterion leans on the quality reading (usl.crm.quality_gate)."""
    with user_errors():
        from pathlib import Path

        from usl.crm import shipped_weights
        from usl.crm.criteria_encoder import ADAPTER_DIR, CriteriaEncoder
        from usl.crm.quality_gate import QualityGate, fit_from_predictions, read_predictions
        from usl.judges.registry import load_judge

        folder = Path(weights) if weights else shipped_weights("fast-crm")
        adapter = folder / ADAPTER_DIR
        encoder = CriteriaEncoder(adapter if adapter.exists() else None)
        w, b, alpha, info = fit_from_predictions(read_predictions(fast_predictions),
                                                 read_predictions(quality_predictions),
                                                 lambda t: encoder.encode(list(t)).numpy(), l2=l2)
        identity = load_judge(reader).identity
        info |= {"fast_predictions": Path(fast_predictions).name, "quality_predictions": Path(quality_predictions).name}
        QualityGate(tuple(float(x) for x in w), b, alpha, reader, identity, info).save(folder)
        typer.echo(f"gate for {identity}: alpha {alpha:.3f}, {info['samples']} samples, log-loss {info['log_loss']} "
                   f"-> {folder / 'quality_gate.json'}")


@app.command("fit-kinds")
def fit_kinds_cmd(
    report: str = typer.Option(..., help="`usl eval --judge default --out R` over the eval files: the judge's "
                                         "accuracy on each kind of criterion, shown beside each board's criteria."),
    weights: str = typer.Option("", help="The fast CRM's weights folder, where criterion_kinds.json is written "
                                         "(default: the shipped one)."),
    l2: float = typer.Option(1e-4, min=0.0, help="L2 penalty of the kind classifier."),
) -> None:
    """Learn which kind of wish a criterion states (length, style, domain, quality, correctness) from the
    criteria library's training wordings, and record the judge's accuracy on each kind (usl.crm.criterion_kinds)."""
    with user_errors():
        import json
        from pathlib import Path

        from usl.crm import criterion_kinds, shipped_weights
        from usl.crm.criteria_encoder import ADAPTER_DIR, CriteriaEncoder
        from usl.crm.fast_model import split_sign
        from usl.data.criteria import load_library

        folder = Path(weights) if weights else shipped_weights("fast-crm")
        try:
            rep = json.loads(Path(report).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{report}: not an eval report ({e})") from None
        if "by_family" not in rep:
            raise ValueError(f"{report}: no 'by_family' figures; write it with usl eval --out")
        adapter = folder / ADAPTER_DIR
        encoder = CriteriaEncoder(adapter if adapter.exists() else None)
        model = criterion_kinds.fit(load_library(), lambda t: encoder.encode([split_sign(x)[0] for x in t]).numpy(),
                                    rep, l2=l2)
        model.save(folder)
        typer.echo(f"kinds on held-out wordings: {model.fitted_on['held_out_accuracy']:.3f} "
                   f"{model.fitted_on['held_out_accuracy_by_kind']}")
        for kind, r in model.reliability.items():
            typer.echo(f"  {kind:<11} judge accuracy {r['accuracy']:.3f} on {r['n']} pairs")
        typer.echo(f"-> {folder / criterion_kinds.KINDS_FILE}")


@app.command("fill")
def fill_cmd(
    ctx: typer.Context,
    benchmark: str = typer.Option("alpaca_eval", help="Benchmark whose (answer, baseline) pairs are read."),
    baseline: str = typer.Option("", help="Baseline model (default: the benchmark's)."),
    judge: str = typer.Option("default", help="The judge whose quality reading is filled."),
) -> None:
    """Read and store the quality reading of every (answer, baseline) pair of a benchmark, with progress;
    a killed run resumes where it stopped. Boards of that benchmark then need no reading."""
    with user_errors():
        from tqdm import tqdm

        from usl.leaderboard.service import LeaderboardService
        from usl.leaderboard.types import LeaderboardSpec

        service = LeaderboardService(ctx.obj.store(), home=ctx.obj.home)
        j = service.judge(judge)
        reading = getattr(j, "quality", None)
        if reading is None:
            raise ValueError(f"judge {judge!r} has no quality reading to fill")
        spec = LeaderboardSpec(benchmark=benchmark, judge=judge, baseline=baseline or None)
        queries, answers, baselines = service.pair_texts(spec)
        n = reading.missing(queries, answers, baselines)
        typer.echo(f"{len(queries):,} pairs, {n:,} not read yet by {reading.gate.reader_identity} "
                   f"(2 orders each){_cost(reading, queries, answers, baselines)}")
        bar = tqdm(total=n, unit="pair", desc="quality readings")
        reading.readings(queries, answers, baselines, progress=lambda done, total: bar.update(done - bar.n))
        bar.close()


def _cost(reading, queries, answers, baselines) -> str:
    """What reading the missing pairs costs an LLM judge: requests and prompt tokens, told before it starts."""
    config = getattr(reading.reader, "config", None)
    if config is None or not hasattr(config, "verdict"):
        return ""
    import numpy as np

    from usl.data.pairs.general import QUALITY_CRITERIA
    from usl.judges.base import JudgeRequest
    from usl.judges.llm_cost import estimate_cost
    from usl.types import Criteria

    todo = np.flatnonzero(np.isnan(reading.bank.lookup(queries, answers, baselines)))
    crit = Criteria(QUALITY_CRITERIA, ())
    reqs = [JudgeRequest(crit, queries[i], a, b) for i in todo
            for a, b in ((answers[i], baselines[i]), (baselines[i], answers[i]))]
    return f": {estimate_cost(reqs, config).describe()}"
