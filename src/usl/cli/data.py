"""`usl data ...` commands: import benchmarks, show what the store holds."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import typer

from usl import paths
from usl.cli.common import user_errors
from usl.data.imported import Imported
from usl.types import DataError

log = logging.getLogger(__name__)
app = typer.Typer(no_args_is_help=True)
import_app = typer.Typer(no_args_is_help=True, help="Import a benchmark (queries + model answers) into the store.")
app.add_typer(import_app, name="import")


REPLACE_HELP = "Replace a stored benchmark of the same name (without it, an import never replaces one)."


def _save(ctx: typer.Context, imp: Imported, started: float, replace: bool) -> None:
    from usl.store.benchmarks import benchmark_stats, list_benchmarks, save_benchmark

    store = ctx.obj.store()
    if imp.benchmark.name in list_benchmarks(store) and not replace:
        old = benchmark_stats(store, imp.benchmark.name)
        raise DataError(f"benchmark {imp.benchmark.name!r} exists ({old['queries']} queries, {old['n_models']} "
                        f"models); add --replace to replace it with this import ({len(imp.benchmark.queries)} "
                        f"queries, {len(imp.benchmark.models)} models), or --name to store it beside it")
    saved = save_benchmark(store, imp.benchmark, imp.responses, imp.source)
    b = saved
    typer.echo(f"imported {b.name!r}: {len(b.queries)} queries, {len(b.models)} models "
               f"(baseline {b.baseline}), {len(imp.responses)} answers, version {b.version} "
               f"in {time.perf_counter() - started:.1f}s")
    for model, n in imp.missing:
        typer.echo(f"  missing answers: {model}: {n} of {len(b.queries)} (counted as missing, never as losses)")
    for note in imp.notes:
        typer.echo(f"  note: {note}")


def _split_models(models: Optional[str]) -> Optional[list[str]]:
    return [m.strip() for m in models.split(",") if m.strip()] if models else None


@import_app.command("alpaca-eval")
def import_alpaca_eval(
        ctx: typer.Context,
        source: Optional[str] = typer.Option(
            None, "--source", help="Folder or file of AlpacaEval model_outputs (local), or a URL: "
                                   "github:tatsu-lab/alpaca_eval[@REF], https://github.com/OWNER/REPO, or an "
                                   "HTTP folder with split.json + outputs/. Default: ../shared/data/alpaca_eval."),
        split: Optional[str] = typer.Option(None, "--split", help="board | train | all. Default: board when "
                                                                  "split.json exists, else all."),
        name: Optional[str] = typer.Option(None, "--name", help="Benchmark name. Default: alpaca_eval "
                                                                "(alpaca_eval_train / alpaca_eval_all for other splits)."),
        models: Optional[str] = typer.Option(None, "--models", help="Comma-separated models to import. Default: "
                                                                    "split.json's board models, else every file."),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="Baseline model. Default: split.json's, "
                                                                        "else gpt4_1106_preview."),
        replace: bool = typer.Option(False, "--replace", help=REPLACE_HELP),
) -> None:
    """Import AlpacaEval outputs; the baseline's instructions are the queries."""
    from usl.data import alpaca_eval as ae

    started = time.perf_counter()
    with user_errors():
        if source is None:
            shared = paths.shared_data()
            if shared is None or not (shared / "alpaca_eval").is_dir():
                raise DataError("no local copy found (../shared/data/alpaca_eval); set USL_SHARED_DATA to the "
                                "folder that holds alpaca_eval/, or pass --source PATH or "
                                f"--source {ae.DEFAULT_GITHUB}")
            source = str(shared / "alpaca_eval")
        local = source
        if ae.is_remote(source):
            local = str(ae.fetch(source, paths.cache_dir(ctx.obj.home, "downloads", "alpaca_eval"),
                                 models=_split_models(models), progress=True))
        imp = ae.load_alpaca_eval(local, split=split, models=_split_models(models), baseline=baseline,
                                  name=name, progress=True)
        if ae.is_remote(source):
            imp = Imported(imp.benchmark, imp.responses, f"alpaca_eval:{source} split={imp.source.rsplit('=', 1)[1]}",
                           imp.missing, imp.notes)
        _save(ctx, imp, started, replace)


@import_app.command("arena")
def import_arena(
        ctx: typer.Context,
        source: Path = typer.Option(..., "--source", help="Folder with question.jsonl(.gz) and model_answer/*.jsonl(.gz)."),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="Baseline model. Default: the release's "
                                                                        "usual baseline if present, else the most complete."),
        name: Optional[str] = typer.Option(None, "--name", help="Benchmark name. Default: the folder's name."),
        replace: bool = typer.Option(False, "--replace", help=REPLACE_HELP),
) -> None:
    """Import an Arena-Hard / MT-Bench style folder."""
    from usl.data.arena import load_arena

    started = time.perf_counter()
    with user_errors():
        _save(ctx, load_arena(source, baseline=baseline, name=name), started, replace)


@import_app.command("jsonl")
def import_jsonl(
        files: list[Path] = typer.Argument(..., help="Preference files in the paper's JSONL (.jsonl or .jsonl.gz)."),
        as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """Validate preference files in the paper's JSONL format and report counts (nothing is stored)."""
    from usl.data.paper_jsonl import read_samples

    with user_errors():
        report = {}
        for f in files:
            samples = read_samples(f)
            report[str(f)] = {
                "samples": len(samples),
                "preferences": dict(sorted(Counter(s.preference for s in samples).items())),
                "distinct_criteria": len({c for s in samples for c in s.criteria}),
                "multi_turn": sum(len(s.model_a) > 2 or len(s.model_b) > 2 for s in samples),
            }
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        for f, r in report.items():
            typer.echo(f"{f}: {r['samples']} samples {r['preferences']}, {r['distinct_criteria']} distinct "
                       f"criteria, {r['multi_turn']} multi-turn")


@app.command("stats")
def stats(
        ctx: typer.Context,
        name: Optional[str] = typer.Option(None, "--name", help="Benchmark. Default: alpaca_eval, or the only one."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON (stable key order)."),
) -> None:
    """Queries, models, answers and missing answers of an imported benchmark."""
    from usl.store.benchmarks import benchmark_stats, resolve_name

    with user_errors():
        store = ctx.obj.store()
        st = benchmark_stats(store, resolve_name(store, name))
    if as_json:
        typer.echo(json.dumps(st, indent=2, ensure_ascii=False))
        return
    typer.echo(f"{st['name']} (version {st['version']}): {st['queries']} queries, {st['n_models']} models, "
               f"baseline {st['baseline']}, {st['answers']} answers, {st['missing']} missing, {st['topics']} topics")
    width = max(len(m["name"]) for m in st["models"])
    for m in st["models"]:
        flag = f"  ({m['missing']} missing)" if m["missing"] else ""
        typer.echo(f"  {m['name']:<{width}}  {m['answers']:>5} answers{flag}")


@app.command("queries")
def queries(
        ctx: typer.Context,
        benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Benchmark. Default: alpaca_eval, or "
                                                                          "the only one."),
        topics: str = typer.Option("", "--topics", help="Comma-separated topic ids or names (`usl topics "
                                                        "list`) to restrict to."),
        fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl | table"),
) -> None:
    """The benchmark's queries with their topics: a template for your model's answers.

    JSONL prints one {"instruction", "output": "", "query_id", "topics"} per query: fill in each
    output and give the file to `usl data add-model` (an output left empty counts as a missing answer).
    """
    from usl.data.topics import load_topics, match_topics
    from usl.store.benchmarks import load_benchmark, resolve_name

    with user_errors():
        if fmt not in ("jsonl", "table"):
            raise ValueError(f"--format must be jsonl or table, got {fmt!r}")
        store = ctx.obj.store()
        bench = load_benchmark(store, resolve_name(store, benchmark))
        requested = [t for t in topics.split(",") if t.strip()]
        stored = load_topics(store, bench.name) if requested else []
        if requested and not stored:
            raise DataError(f"benchmark {bench.name!r} has no topics yet; `usl topics list --name {bench.name}` "
                            "builds them")
        wanted = {t.id for t in match_topics(requested, stored)}
        chosen = [q for q in bench.queries if not wanted or wanted & set(q.topic_ids)]
    if fmt == "jsonl":
        for q in chosen:
            line = {"instruction": q.text, "output": "", "query_id": q.id, "topics": list(q.topic_ids)}
            typer.echo(json.dumps(line, ensure_ascii=False))
        return
    width = max([len(q.id) for q in chosen] + [2])
    for q in chosen:
        typer.echo(f"{q.id:<{width}}  {','.join(q.topic_ids) or '-'}  {' '.join(q.text.split())[:100]}")


# `usl data add-model` / `remove-model` and `usl data build-train ...` live in their own modules.
from usl.cli import data_models as _dm  # noqa: E402

_dm.register(app)
_dm.register_votes(app)

try:
    from usl.cli import data_train as _dt
except ImportError as e:  # pragma: no cover - only while that module is being written
    if e.name != "usl.cli.data_train":
        raise
else:
    _dt.register(app)
