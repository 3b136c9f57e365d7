"""`usl data add-model` and `usl data remove-model`: one model in or out of a stored benchmark; and
`usl data export-votes`: the votes cast with "check the judge", for `usl eval`.

Only that model's answers are written or deleted: the other models, the queries and the topics stay
as they are, and the judge reads the new answers alone (its per-answer caches keep the rest).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer

from usl.cli.common import JUDGE_EPILOG, user_errors


def register(app: typer.Typer) -> None:
    @app.command("add-model", epilog=JUDGE_EPILOG)
    def add_model(
        ctx: typer.Context,
        file: Path = typer.Argument(..., help="AlpacaEval model_outputs.json, or JSONL of {instruction, output} "
                                              "(.gz too)."),
        name: Optional[str] = typer.Option(None, "--name", help="Model name. Default: the file's 'generator', "
                                                                "else its file name."),
        benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Benchmark. Default: alpaca_eval, or "
                                                                          "the only one."),
        replace: bool = typer.Option(False, "--replace", help="Replace the answers of a model of that name."),
        judge: List[str] = typer.Option(["default"], "--judge", help="Judge that reads the new answers now "
                                                                     "(repeatable; 'none': leave it to the "
                                                                     "first board)."),
    ) -> None:
        """Add one model's answers to a benchmark, matched to its queries by instruction text."""
        from usl.data.own_model import match_answers, read_model_answers
        from usl.store.benchmarks import add_model as store_add, load_benchmark, resolve_name

        started = time.perf_counter()
        with user_errors():
            store = ctx.obj.store()
            bench_name = resolve_name(store, benchmark)
            bench = load_benchmark(store, bench_name)
            matched = match_answers(bench, read_model_answers(file), name)
            saved = store_add(store, bench_name, matched.model, matched.responses, replace=replace)
            for line in matched.report(len(bench.queries)):
                typer.echo(line)
            typer.echo(f"{'replaced' if matched.model in bench.models else 'added'} {matched.model!r} in "
                       f"{bench_name!r}: now {len(saved.models)} models (baseline {saved.baseline}), version "
                       f"{saved.version}, in {time.perf_counter() - started:.1f}s")
            _read_answers(ctx, bench_name, [j for j in judge if j.strip().lower() != "none"])

    @app.command("remove-model")
    def remove_model(
        ctx: typer.Context,
        model: str = typer.Argument(..., help="The model to remove."),
        benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Benchmark. Default: alpaca_eval, or "
                                                                          "the only one."),
    ) -> None:
        """Remove one model and its answers from a benchmark."""
        from usl.store.benchmarks import remove_model as store_remove, resolve_name

        with user_errors():
            store = ctx.obj.store()
            bench_name = resolve_name(store, benchmark)
            saved = store_remove(store, bench_name, model)
        typer.echo(f"removed {model!r} from {bench_name!r}: now {len(saved.models)} models, version {saved.version}")


def register_votes(app: typer.Typer) -> None:
    @app.command("export-votes")
    def export_votes(ctx: typer.Context,
                     out: Path = typer.Argument(..., help="JSONL file to write (.gz to compress).")) -> None:
        """Write the votes cast with "check the judge" in the paper's JSONL (for `usl eval --data FILE`)."""
        from usl.data.paper_jsonl import write_samples
        from usl.store.votes import vote_samples

        with user_errors():
            n = write_samples(out, vote_samples(ctx.obj.store()))
        typer.echo(f"wrote {n} votes to {out}")

    @app.command("delete-votes")
    def delete_votes(ctx: typer.Context,
                     model: Optional[str] = typer.Option(None, "--model", help="Only the votes on this model's answers."),
                     benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark's votes."),
                     ) -> None:
        """Delete stored votes (all, or a model's or a benchmark's), and every calibration fitted on one of them."""
        from usl.store.votes import delete_votes as delete

        with user_errors():
            n, gone = delete(ctx.obj.store(), benchmark=benchmark, model=model)
        typer.echo(f"deleted {n} votes" + (f" and the calibration(s) fitted on them: {', '.join(gone)}" if gone else ""))


class _Clock:
    """Wall and CPU seconds (every thread of the process) of a block: ``f"{clock}"`` -> "41.2s (CPU 70.3s)"."""

    def __enter__(self) -> _Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:.1f}s (CPU {self.cpu:.1f}s)"


def _read_answers(ctx: typer.Context, benchmark: str, judges: list[str]) -> None:
    """Each judge's per-answer reading of the benchmark, now (only the new answers are new to it); then,
    for a judge with a quality reading, the pairs of the new answers with the baseline's, with a bar and
    a time of their own: its transformer reads each pair, a cost apart from the answers' reading."""
    if not judges:
        return
    from usl.cli.rank import _progress
    from usl.judges.base import HasQualityTerm
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec

    svc = LeaderboardService(ctx.obj.store(), home=ctx.obj.home, auto_topics=False)
    for spec in judges:
        with _Clock() as clock, _progress(f"{spec}: reading answers", "answer") as progress:
            judge = svc.prepare(benchmark, spec, progress, quality=False)
        typer.echo(f"judge {spec}: answers read in {clock}")
        reading = judge.quality if isinstance(judge, HasQualityTerm) else None
        if reading is None:
            continue
        pairs = svc.pair_texts(LeaderboardSpec(benchmark=benchmark, judge=spec))
        n = reading.missing(*pairs)
        if n:
            typer.echo(f"judge {spec}: its quality reader (a transformer) reads {n} new (answer, baseline) pairs")
        with _Clock() as clock, _progress(f"{spec}: quality readings", "pair") as progress:
            reading.readings(*pairs, progress=progress)
        if n:
            typer.echo(f"judge {spec}: quality readings of {n} pairs in {clock}")
