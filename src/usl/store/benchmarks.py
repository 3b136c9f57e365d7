"""Benchmarks in the store: queries (in order), models, their answers, and the baseline.

A benchmark is written in one transaction. Re-importing the same name replaces it (and drops
its topics, which were computed from the old queries); re-importing identical content is a
no-op, so caches keyed on the benchmark survive a repeated ``make serve``.

A missing answer is never stored: no row, never an empty string. ``benchmark_stats`` reports
answers and missing per model so later stages cannot mistake a gap for a loss.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Iterable

from usl.store.db import Store
from usl.types import Benchmark, DataError, Query, Response

log = logging.getLogger(__name__)
DEFAULT_BENCHMARK = "alpaca_eval"


def benchmark_version(queries: Iterable[Query], responses: Iterable[Response], baseline: str,
                      models: Iterable[str]) -> str:
    """sha256 (first 16 hex digits) over a canonical JSON of the content; order-sensitive for queries."""
    h = hashlib.sha256()
    h.update(json.dumps({"baseline": baseline, "models": sorted(models)}).encode())
    for q in queries:
        h.update(json.dumps(["q", q.id, q.text]).encode())
    for r in sorted(responses, key=lambda r: (r.query_id, r.model)):
        h.update(json.dumps(["r", r.query_id, r.model, r.text]).encode())
    return h.hexdigest()[:16]


def save_benchmark(store: Store, benchmark: Benchmark, responses: Iterable[Response],
                   source: str) -> Benchmark:
    """Validate and write; returns the benchmark with its content version filled in."""
    responses = list(responses)
    _validate(benchmark, responses)
    version = benchmark_version(benchmark.queries, responses, benchmark.baseline, benchmark.models)
    saved = Benchmark(benchmark.name, benchmark.queries, benchmark.models, benchmark.baseline, version)
    with store.transaction() as con:
        row = con.execute("SELECT version, source FROM benchmarks WHERE name=?", (benchmark.name,)).fetchone()
        if row == (version, source):
            log.info("benchmark %r unchanged (version %s); nothing to do", benchmark.name, version)
            return saved
        _delete(con, benchmark.name)
        con.execute("INSERT INTO benchmarks(name, baseline, version, source) VALUES (?,?,?,?)",
                    (benchmark.name, benchmark.baseline, version, source))
        con.executemany("INSERT INTO queries(benchmark, id, position, text, source) VALUES (?,?,?,?,?)",
                        [(benchmark.name, q.id, i, q.text, q.source) for i, q in enumerate(benchmark.queries)])
        con.executemany("INSERT INTO models(benchmark, name) VALUES (?,?)",
                        [(benchmark.name, m) for m in benchmark.models])
        con.executemany("INSERT INTO responses(benchmark, query_id, model, text) VALUES (?,?,?,?)",
                        [(benchmark.name, r.query_id, r.model, r.text) for r in responses])
    log.info("saved benchmark %r: %d queries, %d models, %d answers (version %s)", benchmark.name,
             len(benchmark.queries), len(benchmark.models), len(responses), version)
    return saved


def add_model(store: Store, name: str, model: str, responses: Iterable[Response], *,
              replace: bool = False) -> Benchmark:
    """Add one model's answers to a stored benchmark (or, with ``replace``, swap an added model's
    answers for these) in one transaction; the other models, the queries and the topics stay as
    they are. Returns the benchmark with its new content version."""
    responses = list(responses)
    with store.transaction() as con:
        bench = load_benchmark(store, name)
        if model == bench.baseline:
            raise DataError(f"{model!r} is the baseline of benchmark {name!r}: every board is judged against its "
                            "answers; import the benchmark again to change them")
        if model in bench.models and not replace:
            raise DataError(f"model {model!r} is already in benchmark {name!r}; pass --replace to replace its "
                            f"answers, or --name to add it under another name")
        if any(r.model != model for r in responses):
            raise DataError(f"answers of another model than {model!r} given to add_model")
        models = bench.models if model in bench.models else bench.models + (model,)
        _validate(Benchmark(name, bench.queries, models, bench.baseline), responses)
        con.execute("DELETE FROM responses WHERE benchmark=? AND model=?", (name, model))
        con.execute("INSERT OR IGNORE INTO models(benchmark, name) VALUES (?,?)", (name, model))
        con.executemany("INSERT INTO responses(benchmark, query_id, model, text) VALUES (?,?,?,?)",
                        [(name, r.query_id, r.model, r.text) for r in responses])
        version = _refresh_version(con, bench, models)
    log.info("%s model %r in benchmark %r: %d answers (version %s)", "replaced" if model in bench.models else "added",
             model, name, len(responses), version)
    return Benchmark(name, bench.queries, tuple(sorted(models, key=str.casefold)), bench.baseline, version)


def remove_model(store: Store, name: str, model: str) -> Benchmark:
    """Remove one model and its answers from a stored benchmark; nothing else changes."""
    with store.transaction() as con:
        bench = load_benchmark(store, name)
        if model not in bench.models:
            raise DataError(f"no model {model!r} in benchmark {name!r}; models: {', '.join(bench.models)}")
        if model == bench.baseline:
            raise DataError(f"{model!r} is the baseline of benchmark {name!r}: it cannot be removed")
        con.execute("DELETE FROM responses WHERE benchmark=? AND model=?", (name, model))
        con.execute("DELETE FROM models WHERE benchmark=? AND name=?", (name, model))
        models = tuple(m for m in bench.models if m != model)
        version = _refresh_version(con, bench, models)
    log.info("removed model %r from benchmark %r (version %s)", model, name, version)
    return Benchmark(name, bench.queries, models, bench.baseline, version)


def _refresh_version(con, bench: Benchmark, models: Iterable[str]) -> str:
    """The benchmark's content version after a change of its models, as an import of the same content
    would compute it (so caches keyed on the version see the change)."""
    responses = [Response(q, m, t) for q, m, t in con.execute(
        "SELECT query_id, model, text FROM responses WHERE benchmark=?", (bench.name,))]
    version = benchmark_version(bench.queries, responses, bench.baseline, models)
    con.execute("UPDATE benchmarks SET version=? WHERE name=?", (version, bench.name))
    return version


def delete_benchmark(store: Store, name: str) -> None:
    with store.transaction() as con:
        _delete(con, name)


def _delete(con, name: str) -> None:
    # Explicit deletes: query_topics has no foreign key, and this must not rely on PRAGMA foreign_keys.
    con.execute("DELETE FROM query_topics WHERE benchmark=?", (name,))
    con.execute("DELETE FROM topics WHERE benchmark=?", (name,))
    con.execute("DELETE FROM responses WHERE benchmark=?", (name,))
    con.execute("DELETE FROM models WHERE benchmark=?", (name,))
    con.execute("DELETE FROM queries WHERE benchmark=?", (name,))
    con.execute("DELETE FROM benchmarks WHERE name=?", (name,))


def _validate(b: Benchmark, responses: list[Response]) -> None:
    if not b.name.strip():
        raise DataError("benchmark name must not be empty")
    if not b.queries:
        raise DataError(f"benchmark {b.name!r} has no queries")
    ids = [q.id for q in b.queries]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"benchmark {b.name!r}: duplicate query id {dup!r}")
    if len(set(b.models)) != len(b.models):
        dup = next(m for m in b.models if b.models.count(m) > 1)
        raise DataError(f"benchmark {b.name!r}: model {dup!r} is named twice")
    if b.baseline not in b.models:
        raise DataError(f"benchmark {b.name!r}: baseline {b.baseline!r} is not among its models")
    known_q, known_m, seen = set(ids), set(b.models), set()
    for r in responses:
        if r.query_id not in known_q:
            raise DataError(f"answer of {r.model!r} to unknown query {r.query_id!r}")
        if r.model not in known_m:
            raise DataError(f"answer from unknown model {r.model!r}")
        if not r.text.strip():
            raise DataError(f"empty answer of {r.model!r} to query {r.query_id!r}: leave it out instead")
        if (r.query_id, r.model) in seen:
            raise DataError(f"two answers of {r.model!r} to query {r.query_id!r}")
        seen.add((r.query_id, r.model))


def list_benchmarks(store: Store) -> list[str]:
    return [r[0] for r in store.con.execute("SELECT name FROM benchmarks ORDER BY name")]


def resolve_name(store: Store, name: str | None) -> str:
    """The benchmark a command means: the given name, else the only one stored, else ``alpaca_eval``."""
    if name:
        return name
    known = list_benchmarks(store)
    return known[0] if len(known) == 1 else DEFAULT_BENCHMARK


def _require(store: Store, name: str) -> tuple[str, str, str, str]:
    row = store.con.execute("SELECT baseline, version, source, imported_at FROM benchmarks WHERE name=?",
                            (name,)).fetchone()
    if row is None:
        known = list_benchmarks(store)
        hint = f"known: {', '.join(known)}" if known else "none imported yet; run `usl data import alpaca-eval`"
        raise DataError(f"unknown benchmark {name!r}; {hint}")  # the server's wording (usl.server.boards)
    return row


def stored_version(store: Store, name: str = DEFAULT_BENCHMARK) -> str:
    """The benchmark's content version as stored now (one indexed read): a process that keeps a
    benchmark in memory compares it with this to see another process's ``add_model`` or re-import."""
    return _require(store, name)[1]


def load_benchmark(store: Store, name: str = DEFAULT_BENCHMARK) -> Benchmark:
    """Queries in their stored order (with topic ids when topics were built), models by name."""
    baseline, version, _, _ = _require(store, name)
    topics: dict[str, list[str]] = {}
    for qid, tid in store.con.execute(
            "SELECT query_id, topic_id FROM query_topics WHERE benchmark=? ORDER BY topic_id", (name,)):
        topics.setdefault(qid, []).append(tid)
    queries = tuple(Query(qid, text, src, tuple(topics.get(qid, ())))
                    for qid, text, src in store.con.execute(
                        "SELECT id, text, source FROM queries WHERE benchmark=? ORDER BY position", (name,)))
    models = tuple(m for (m,) in store.con.execute(
        "SELECT name FROM models WHERE benchmark=? ORDER BY name COLLATE NOCASE, name", (name,)))
    return Benchmark(name, queries, models, baseline, version)


def load_responses(store: Store, name: str = DEFAULT_BENCHMARK) -> dict[tuple[str, str], str]:
    """``{(query_id, model): text}``; a pair that is absent had no answer."""
    _require(store, name)
    return {(q, m): t for q, m, t in store.con.execute(
        "SELECT query_id, model, text FROM responses WHERE benchmark=?", (name,))}


def benchmark_stats(store: Store, name: str = DEFAULT_BENCHMARK) -> dict:
    """A JSON-ready summary with a fixed key order (so `usl data stats --json` is byte-stable)."""
    baseline, version, source, imported_at = _require(store, name)
    n_queries = store.con.execute("SELECT COUNT(*) FROM queries WHERE benchmark=?", (name,)).fetchone()[0]
    counts = dict(store.con.execute(
        "SELECT model, COUNT(*) FROM responses WHERE benchmark=? GROUP BY model", (name,)).fetchall())
    models = [m for (m,) in store.con.execute(
        "SELECT name FROM models WHERE benchmark=? ORDER BY name COLLATE NOCASE, name", (name,))]
    by_source = dict(store.con.execute(
        "SELECT source, COUNT(*) FROM queries WHERE benchmark=? GROUP BY source ORDER BY source", (name,)))
    n_topics = store.con.execute("SELECT COUNT(*) FROM topics WHERE benchmark=?", (name,)).fetchone()[0]
    rows = [{"name": m, "answers": counts.get(m, 0), "missing": n_queries - counts.get(m, 0)} for m in models]
    return {
        "name": name,
        "version": version,
        "baseline": baseline,
        "queries": n_queries,
        "models": rows,
        "n_models": len(models),
        "answers": sum(counts.values()),
        "missing": sum(r["missing"] for r in rows),
        "query_sources": by_source,
        "topics": n_topics,
        "source": source,
        "imported_at": imported_at,
    }
