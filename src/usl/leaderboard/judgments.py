"""The judgment cache: every verdict a scoring job obtains, in the store's ``judgments`` table.

Keyed by (judge identity, canonical criteria key, benchmark, baseline, model, query id, order,
content fingerprint); that key is the table's primary key, so a judgment cannot be stored twice
and a write is ``INSERT OR IGNORE``. Each batch is committed on its own: a job killed at any
moment keeps every batch it finished and loses only the one in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from usl.store.db import Store

# Order codes of the ``swapped`` column.
MODEL_FIRST, BASELINE_FIRST, BOTH_ORDERS = 0, 1, 2


@dataclass(frozen=True)
class CacheScope:
    """The part of the key shared by every judgment of one leaderboard."""

    judge: str          # judge identity name@version
    criteria: str       # Criteria.key()
    benchmark: str
    baseline: str


@dataclass(frozen=True)
class Judgment:
    model: str
    query_id: str
    swapped: int        # MODEL_FIRST, BASELINE_FIRST or BOTH_ORDERS
    content: int        # answers.pair_fingerprint
    p_a: float
    p_tie: float = 0.0


@dataclass(frozen=True)
class CachedRows:
    """Stored judgments of one scope as parallel columns; ``score`` = p_a + p_tie / 2."""

    model: list[str]
    query_id: list[str]
    swapped: np.ndarray
    content: np.ndarray
    score: np.ndarray

    def fill(self, models: tuple[str, ...], query_ids: tuple[str, ...], content: np.ndarray,
             orders: tuple[int, ...]) -> list[np.ndarray]:
        """Per order, the (M, Q) scores whose content fingerprint still matches; NaN elsewhere."""
        outs = [np.full(content.shape, np.nan) for _ in orders]
        if not self.model:
            return outs
        mi = {m: i for i, m in enumerate(models)}
        qi = {q: j for j, q in enumerate(query_ids)}
        im = np.fromiter(map(lambda m: mi.get(m, -1), self.model), np.int64, len(self.model))
        iq = np.fromiter(map(lambda q: qi.get(q, -1), self.query_id), np.int64, len(self.query_id))
        known = np.flatnonzero((im >= 0) & (iq >= 0))
        known = known[content[im[known], iq[known]] == self.content[known]]
        for order, out in zip(orders, outs):
            sel = known[self.swapped[known] == order]
            out[im[sel], iq[sel]] = self.score[sel]
        return outs


class JudgmentCache:
    def __init__(self, store: Store):
        self.store = store

    def lookup(self, scope: CacheScope) -> "CachedRows":
        """Every stored judgment of the scope, as columns (one SELECT)."""
        rows = self.store.con.execute(
            "SELECT model, query_id, swapped, content, p_a + 0.5 * p_tie FROM judgments "
            "WHERE judge=? AND criteria=? AND benchmark=? AND baseline=?",
            (scope.judge, scope.criteria, scope.benchmark, scope.baseline)).fetchall()
        if not rows:
            return CachedRows([], [], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        m, q, sw, c, sc = zip(*rows)
        return CachedRows(list(m), list(q), np.array(sw, np.int64), np.array(c, np.int64), np.array(sc, float))

    def insert(self, scope: CacheScope, judgments: Iterable[Judgment]) -> int:
        """Write one batch in one transaction; returns how many rows were new."""
        rows = [(scope.judge, scope.criteria, scope.benchmark, scope.baseline, j.model, j.query_id,
                 j.swapped, j.content, float(j.p_a), float(j.p_tie)) for j in judgments]
        with self.store.transaction() as con:
            before = con.total_changes
            con.executemany(
                "INSERT OR IGNORE INTO judgments(judge, criteria, benchmark, baseline, model, query_id, "
                "swapped, content, p_a, p_tie) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            return con.total_changes - before

    def count(self, scope: CacheScope | None = None) -> int:
        if scope is None:
            return self.store.con.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        return self.store.con.execute(
            "SELECT COUNT(*) FROM judgments WHERE judge=? AND criteria=? AND benchmark=? AND baseline=?",
            (scope.judge, scope.criteria, scope.benchmark, scope.baseline)).fetchone()[0]
