"""Benchmarks in the real SQLite store: round trip, replacement, atomicity, stats."""

from __future__ import annotations

import pytest

from usl.store import Store
from usl.store.benchmarks import (benchmark_stats, list_benchmarks, load_benchmark, load_responses,
                                  save_benchmark)
from usl.types import Benchmark, DataError, Query, Response


def bench(name="b", n=3, models=("base", "m1", "M0")) -> tuple[Benchmark, list[Response]]:
    qs = tuple(Query(str(i), f"question {i}", "src") for i in range(n))
    rs = [Response(q.id, m, f"{m} says {q.id}") for q in qs for m in models]
    return Benchmark(name, qs, tuple(models), "base"), rs


def test_round_trip_and_stats(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    b, rs = bench()
    rs = [r for r in rs if not (r.model == "m1" and r.query_id == "2")]  # one missing answer
    saved = save_benchmark(store, b, rs, source="test")
    assert len(saved.version) == 16
    loaded = load_benchmark(store, "b")
    assert loaded.queries == b.queries and loaded.baseline == "base" and loaded.version == saved.version
    assert loaded.models == ("base", "M0", "m1")  # case-insensitive by name
    resp = load_responses(store, "b")
    assert resp[("0", "m1")] == "m1 says 0" and ("2", "m1") not in resp and len(resp) == 8
    st = benchmark_stats(store, "b")
    assert list(st)[:5] == ["name", "version", "baseline", "queries", "models"]
    assert st["queries"] == 3 and st["missing"] == 1
    assert {m["name"]: (m["answers"], m["missing"]) for m in st["models"]} == \
        {"base": (3, 0), "M0": (3, 0), "m1": (2, 1)}


def test_query_order_is_kept(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    qs = tuple(Query(i, f"q{i}") for i in ["10", "2", "7"])
    save_benchmark(store, Benchmark("b", qs, ("base",), "base"), [], "t")
    assert [q.id for q in load_benchmark(store, "b").queries] == ["10", "2", "7"]


def test_version_tracks_content(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    b, rs = bench()
    v1 = save_benchmark(store, b, rs, "t").version
    assert save_benchmark(store, b, list(reversed(rs)), "t").version == v1
    rs2 = rs[:-1] + [Response(rs[-1].query_id, rs[-1].model, "changed")]
    assert save_benchmark(store, b, rs2, "t").version != v1
    assert load_benchmark(store, "b").version != v1


def test_replace_drops_old_rows_and_topics(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    b, rs = bench(n=5)
    save_benchmark(store, b, rs, "t")
    with store.transaction() as con:
        con.execute("INSERT INTO topics(benchmark, id, name) VALUES ('b', 't0', 'Topic')")
        con.execute("INSERT INTO query_topics VALUES ('b', '0', 't0')")
    assert load_benchmark(store, "b").queries[0].topic_ids == ("t0",)
    b2, rs2 = bench(n=2)
    save_benchmark(store, b2, rs2, "t")
    assert len(load_benchmark(store, "b").queries) == 2 and len(load_responses(store, "b")) == 6
    assert store.con.execute("SELECT COUNT(*) FROM topics").fetchone()[0] == 0
    assert store.con.execute("SELECT COUNT(*) FROM query_topics").fetchone()[0] == 0


@pytest.mark.parametrize("mutate, pattern", [
    (lambda b, rs: (Benchmark(b.name, b.queries, b.models, "nobody"), rs), "baseline 'nobody' is not among"),
    (lambda b, rs: (b, rs + [Response("99", "base", "x")]), "unknown query '99'"),
    (lambda b, rs: (b, rs + [Response("0", "ghost", "x")]), "unknown model 'ghost'"),
    (lambda b, rs: (b, rs[1:] + [Response(rs[0].query_id, rs[0].model, "  ")]), "empty answer"),
    (lambda b, rs: (b, rs + [rs[0]]), "two answers"),
    (lambda b, rs: (Benchmark(b.name, b.queries + b.queries[:1], b.models, b.baseline), rs), "duplicate query id '0'"),
    (lambda b, rs: (Benchmark(b.name, (), b.models, b.baseline), []), "has no queries"),
])
def test_bad_benchmark_changes_nothing(tmp_path, mutate, pattern):
    store = Store(tmp_path / "s.sqlite")
    b, rs = bench()
    save_benchmark(store, b, rs, "t")
    before = benchmark_stats(store, "b")
    bad_b, bad_rs = mutate(bench(n=4)[0], bench(n=4)[1])
    with pytest.raises(DataError, match=pattern):
        save_benchmark(store, bad_b, bad_rs, "t2")
    assert benchmark_stats(store, "b") == before


def test_failure_inside_transaction_rolls_back(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    b, rs = bench()
    save_benchmark(store, b, rs, "t")
    before = benchmark_stats(store, "b")

    def exploding():
        yield from bench(n=4)[1]
        raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        save_benchmark(store, bench(n=4)[0], exploding(), "t2")
    assert benchmark_stats(store, "b") == before


def test_unknown_benchmark_lists_known(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(DataError, match="unknown benchmark 'x'; none imported yet.*usl data import alpaca-eval"):
        load_benchmark(store, "x")
    save_benchmark(store, *bench("a"), source="t")
    save_benchmark(store, *bench("c"), source="t")
    assert list_benchmarks(store) == ["a", "c"]
    with pytest.raises(DataError, match=r"unknown benchmark 'x'; known: a, c"):
        benchmark_stats(store, "x")
