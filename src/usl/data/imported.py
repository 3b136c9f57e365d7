"""What every importer returns: a benchmark, its answers, and what was missing or skipped."""

from __future__ import annotations

from dataclasses import dataclass

from usl.types import Benchmark, DataError, Response


@dataclass(frozen=True)
class Imported:
    """``missing`` is ``((model, n_missing), ...)`` over the benchmark's queries, models without gaps
    left out; ``notes`` are human-readable remarks (skipped items, duplicates) for the import log."""

    benchmark: Benchmark
    responses: tuple[Response, ...]
    source: str
    missing: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse an import in which a model (the baseline included) answers none of the queries,
        as an empty or mismatched outputs file does: nobody could rank it, or rank against it.
        (A benchmark without queries is the store's to refuse.) The store itself still takes a
        benchmark whose answers come later."""
        n = len(self.benchmark.queries)
        silent = [m for m, k in self.missing if k >= n]     # (missing is empty when n is 0)
        if silent:
            raise DataError(f"no answer to any of the {n} queries from model(s) {', '.join(silent)} "
                            "(an empty outputs file, or one for other instructions?); nothing was imported",
                            path=self.source)


def count_missing(benchmark: Benchmark, responses: tuple[Response, ...]) -> tuple[tuple[str, int], ...]:
    have: dict[str, int] = {}
    for r in responses:
        have[r.model] = have.get(r.model, 0) + 1
    n = len(benchmark.queries)
    return tuple((m, n - have.get(m, 0)) for m in sorted(benchmark.models, key=str.casefold)
                 if have.get(m, 0) < n)
