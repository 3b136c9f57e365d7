"""Turning leaderboards into what the page shows: placements against the default, and CSV.

A model's *position* orders the board by win rate (1 = best). Its *rank range* is the set of
positions its 95% CI allows: it cannot be beaten by a model whose CI lies wholly below its own,
nor beat one whose CI lies wholly above. Worked example, CIs [60, 70], [55, 65], [20, 30]:
the first two overlap, so both may be 1st or 2nd (ranges 1-2, 1-2); the third is 3-3.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Sequence

from usl.leaderboard import stats
from usl.leaderboard.types import Leaderboard, Row


def positions(rows: Sequence[Row]) -> dict[str, int]:
    """Model -> 1-based position by win rate (ties broken by name, so it is deterministic)."""
    order = sorted(rows, key=lambda r: (-r.win_rate, r.model))
    return {r.model: i + 1 for i, r in enumerate(order)}


def rank_ranges(rows: Sequence[Row]) -> dict[str, tuple[int, int]]:
    """Model -> (best, worst) position its CI allows (see the module docstring)."""
    out = {}
    for r in rows:
        lo, hi = r.ci
        surely_better = sum(1 for o in rows if o is not r and o.ci[0] > hi)
        surely_worse = sum(1 for o in rows if o is not r and o.ci[1] < lo)
        out[r.model] = (1 + surely_better, len(rows) - surely_worse)
    return out


def _corr(fn, a: dict[str, float], b: dict[str, float]) -> float | None:
    """The engine's correlation over the common models; None when undefined (< 2 models, constant)."""
    if len(a.keys() & b.keys()) < 2:
        return None
    value = fn(a, b)
    return None if math.isnan(value) else round(value, 4)


def compare(custom: Leaderboard, default: Leaderboard) -> dict:
    """Placements of every model of ``custom`` beside its default ones, and the engine's rank
    correlations (Kendall's tau-b, Spearman's rho) over the win rates of the models both hold."""
    pos, rng = positions(custom.rows), rank_ranges(custom.rows)
    dpos, drng = positions(default.rows), rank_ranges(default.rows)
    dwin = {r.model: r.win_rate for r in default.rows}
    placements = []
    for r in sorted(custom.rows, key=lambda r: pos[r.model]):
        d = drng.get(r.model)
        placements.append({
            "model": r.model, "position": pos[r.model],
            "rank_low": rng[r.model][0], "rank_high": rng[r.model][1],
            "default_position": dpos.get(r.model),
            "default_rank_low": d[0] if d else None, "default_rank_high": d[1] if d else None,
            "default_win_rate": dwin.get(r.model),
        })
    cwin = {r.model: r.win_rate for r in custom.rows}
    return {"kendall_tau": _corr(stats.kendall_tau, cwin, dwin),
            "spearman_rho": _corr(stats.spearman_rho, cwin, dwin), "placements": placements}


def to_csv(lb: Leaderboard, default: Leaderboard | None = None) -> str:
    """One row per model: rank, win rate with CI, per-topic win rates, length, counts."""
    topics = sorted({t for r in lb.rows for t in r.topics})
    dpos = positions(default.rows) if default is not None else {}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "model", "win_rate", "ci_low", "ci_high", "lc_win_rate", "default_position",
                *[f"topic:{t}" for t in topics], "avg_length", "n", "n_missing"])
    for r in sorted(lb.rows, key=lambda r: (r.rank, -r.win_rate, r.model)):
        low, high = (f"{r.ci[0]:.2f}", f"{r.ci[1]:.2f}") if lb.has_interval else ("", "")
        w.writerow([r.rank, _cell(r.model), f"{r.win_rate:.2f}", low, high,
                    "" if r.lc_win_rate is None else f"{r.lc_win_rate:.2f}", dpos.get(r.model, ""),
                    *["" if t not in r.topics else f"{r.topics[t]:.2f}" for t in topics],
                    f"{r.avg_length:.1f}", r.n, r.n_missing])
    return buf.getvalue()


def _cell(text: str) -> str:
    """Neutralise spreadsheet formulas (a model name like ``=HYPERLINK(...)``)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
