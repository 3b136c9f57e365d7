"""`usl topics ...` commands: build, list, and match a use case to queries."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer

from usl import paths
from usl.cli.common import user_errors

app = typer.Typer(no_args_is_help=True)
NAME_HELP = "Benchmark. Default: the only one imported, else alpaca_eval."


def _embedder(ctx: typer.Context):
    from usl.data.embed import Embedder

    return Embedder(cache_dir=paths.cache_dir(ctx.obj.home, "embeddings"))


def _rows(topics) -> list[dict]:
    return [{"id": t.id, "name": t.name, "size": t.size, "keywords": list(t.keywords)} for t in topics]


def _print(topics) -> None:
    """A table: the id (what `--topics` takes; a name or the start of one works too), the name, the number of
    queries and the keywords."""
    rows = [("id", "name", "queries", "keywords")] + [(t.id, t.name, str(t.size), ", ".join(t.keywords))
                                                      for t in topics]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        typer.echo(f"  {r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]}")


@app.command("build")
def build(ctx: typer.Context,
          name: Optional[str] = typer.Option(None, "--name", help=NAME_HELP),
          k: int = typer.Option(12, "--k", help="Number of topics, 8 to 16."),
          names_file: Optional[str] = typer.Option(None, "--names-file", help="YAML of curated topic names "
                                                                             "(default: the packaged one)."),
          as_json: bool = typer.Option(False, "--json", help="Print the topics as JSON.")) -> None:
    """Cluster the benchmark's queries into k named topics (replaces earlier topics)."""
    from usl.data.topics import TopicConfig, build_topics
    from usl.store.benchmarks import resolve_name

    started = time.perf_counter()
    with user_errors():
        store = ctx.obj.store()
        bench = resolve_name(store, name)
        topics = build_topics(store, bench, _embedder(ctx), TopicConfig(k=k, names_file=names_file or ""),
                              progress=not as_json)
    if as_json:
        typer.echo(json.dumps(_rows(topics), indent=2, ensure_ascii=False))
        return
    typer.echo(f"built {len(topics)} topics over {sum(t.size for t in topics)} queries of {bench!r} "
               f"in {time.perf_counter() - started:.1f}s")
    _print(topics)


@app.command("list")
def list_topics(ctx: typer.Context,
                name: Optional[str] = typer.Option(None, "--name", help=NAME_HELP),
                as_json: bool = typer.Option(False, "--json", help="Print [{id, name, size, keywords}] as JSON.")) -> None:
    """Show the topics and their ids, which `usl rank --topics` takes (built first if they never were)."""
    from usl.data.topics import ensure_topics
    from usl.store.benchmarks import load_benchmark, resolve_name

    with user_errors():
        store = ctx.obj.store()
        bench = resolve_name(store, name)
        load_benchmark(store, bench)  # a clear error for an unknown benchmark
        topics = ensure_topics(store, bench, _embedder(ctx))
    if as_json:
        typer.echo(json.dumps(_rows(topics), indent=2, ensure_ascii=False))
    else:
        _print(topics)


@app.command("match")
def match(ctx: typer.Context,
          text: str = typer.Argument(..., help='Your use case in words, e.g. "I mostly ask for recipes and meal plans".'),
          name: Optional[str] = typer.Option(None, "--name", help=NAME_HELP),
          min_queries: int = typer.Option(20, "--min-queries", help="Keep at least this many queries."),
          as_json: bool = typer.Option(False, "--json", help="Print the matching query ids and texts as JSON.")) -> None:
    """Pick the benchmark queries that fit a described use case, most relevant first."""
    from usl.data.topics import select_by_use_case
    from usl.store.benchmarks import load_benchmark, resolve_name

    with user_errors():
        store = ctx.obj.store()
        bench = load_benchmark(store, resolve_name(store, name))
        ids = select_by_use_case(store, bench.name, text, _embedder(ctx), min_queries=min_queries)
    texts = {q.id: q.text for q in bench.queries}
    if as_json:
        typer.echo(json.dumps([{"id": i, "text": texts[i]} for i in ids], indent=2, ensure_ascii=False))
        return
    typer.echo(f"{len(ids)} of {len(texts)} queries match:")
    for i in ids:
        typer.echo(f"  [{i}] {' '.join(texts[i].split())[:100]}")
