"""A spec's names checked against the store before anything loads: benchmark, baseline, topics, reference.

A misspelt name is the commonest mistake on the command line, and the judge takes seconds to load:
``check_names`` reads only a few rows of SQLite (no judge, no answers, no scipy), so a typo fails in
well under a second, and every refusal lists the names there are. The server makes the same checks
(``usl.server.boards``); topics go through the one matcher both use, ``usl.data.topics.match_topics``.
"""

from __future__ import annotations

import dataclasses

from usl.data.topics import load_topics, match_topics
from usl.leaderboard.types import LeaderboardSpec
from usl.store.benchmarks import load_benchmark
from usl.store.db import Store
from usl.leaderboard.calibrations import check_fits, stored
from usl.leaderboard.reference import REFERENCES


def check_names(store: Store, spec: LeaderboardSpec, reference: str | None = None) -> LeaderboardSpec:
    """``spec`` with its topics as sorted unique ids (as the server records them), after checking that its
    benchmark, baseline, topics, calibration (and that it fits the board) and the published ``reference``
    board exist; raises ``ValueError``
    (``DataError`` for the benchmark) listing the known ones. Topics of a benchmark that has none built yet
    are left for the engine, which builds them on first use and matches with the same rule."""
    if reference:
        check_reference(reference)
    bench = load_benchmark(store, spec.benchmark)           # an unknown benchmark names the known ones
    if spec.baseline and spec.baseline not in bench.models:
        raise ValueError(f"baseline {spec.baseline!r} is not a model of benchmark {bench.name!r}; "
                         f"models: {', '.join(bench.models)}")
    if spec.calibration:                                     # an unknown name lists the stored ones

        check_fits(stored(store, spec.calibration), spec)
    if not spec.topics:
        return spec
    topics = load_topics(store, bench.name)
    if not topics:
        return spec
    return dataclasses.replace(spec, topics=tuple(sorted(t.id for t in match_topics(spec.topics, topics))))


def check_reference(name: str) -> None:
    """Raise ``ValueError`` listing the published boards when ``name`` is none of them."""
    if name not in REFERENCES:
        raise ValueError(f"unknown reference leaderboard {name!r}; known: {', '.join(REFERENCES)}")
