"""Which of a benchmark's queries a board ranks on (all of them, those of the named topics, or those of a use
case), and the topics its rows break down by. Topics are built on first use (``auto_topics``: one-off, needs
the sentence embedder), else only read; a benchmark whose topics could not be built is not tried again
unless a spec names topics.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from usl.data import topics as topics_mod
from usl.leaderboard.answers import Answers
from usl.leaderboard.types import LeaderboardSpec
from usl.store.db import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    query_ids: tuple[str, ...]
    topic_columns: dict[str, list[int]]      # topic name -> column indices into query_ids
    topic_map: dict[str, str]                # query id -> first topic name (for examples)


class QuerySelection:
    def __init__(self, store: Store, auto_topics: bool = True, lock: threading.RLock | None = None):
        """``lock``: the one its owner guards its stores with (topics are built under it)."""
        self.store, self.auto_topics = store, auto_topics
        self._lock = lock or threading.RLock()
        self._no_topics: set[str] = set()   # benchmarks whose topics could not be built

    def topics(self, benchmark: str):
        return topics_mod.load_topics(self.store, benchmark)

    def select(self, spec: LeaderboardSpec, data: Answers) -> Selection:
        """The spec's queries (its topics, its use case, or all) and the topics its rows break down by."""
        if spec.topics and spec.use_case:
            raise ValueError("select queries by topics or by use case, not both")
        all_ids = [q.id for q in data.benchmark.queries]
        topics = self._stored(data.name, compute=bool(spec.topics), required=bool(spec.topics))
        if spec.topics:
            chosen = topics_mod.match_topics(spec.topics, topics)
            wanted = {q for t in chosen for q in t.query_ids}
            query_ids = tuple(q for q in all_ids if q in wanted)
            topics = chosen
        elif spec.use_case.strip():
            wanted = set(topics_mod.select_by_use_case(self.store, data.name, spec.use_case))
            query_ids = tuple(q for q in all_ids if q in wanted)
        else:
            query_ids = tuple(all_ids)
        if not query_ids:
            raise ValueError("the selection holds no query")
        pos = {q: i for i, q in enumerate(query_ids)}
        columns, topic_map = {}, {}
        for t in topics:
            cols = sorted(pos[q] for q in t.query_ids if q in pos)
            if cols:
                columns[t.name] = cols
                for q in t.query_ids:
                    topic_map.setdefault(q, t.name)
        return Selection(query_ids, columns, topic_map)

    def _stored(self, benchmark: str, compute: bool, required: bool) -> list:
        with self._lock:
            found = topics_mod.load_topics(self.store, benchmark)
            if found or not (compute or self.auto_topics) or (benchmark in self._no_topics and not required):
                return found
            try:
                return list(topics_mod.ensure_topics(self.store, benchmark))
            except (ValueError, OSError) as e:   # DataError is a ValueError
                if required:
                    raise
                self._no_topics.add(benchmark)
                log.warning("no topics for %r (%s); rows carry no per-topic win rates", benchmark, e)
                return []
