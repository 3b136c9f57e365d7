"""Placements, rank ranges and CSV export, with worked answers."""

from __future__ import annotations

import csv
import io

from usl.leaderboard.types import Leaderboard, Row
from usl.server.views import compare, positions, rank_ranges, to_csv


def row(model: str, wr: float, lo: float, hi: float, **kw) -> Row:
    return Row(model=model, rank=1, win_rate=wr, ci=(lo, hi), n=10, **kw)


def test_rank_ranges_worked_example():
    # the module docstring's example: the first two overlap, the third is clearly last
    rows = [row("a", 65, 60, 70), row("b", 60, 55, 65), row("c", 25, 20, 30)]
    assert positions(rows) == {"a": 1, "b": 2, "c": 3}
    assert rank_ranges(rows) == {"a": (1, 2), "b": (1, 2), "c": (3, 3)}


def test_positions_break_ties_by_name():
    assert positions([row("z", 50, 40, 60), row("a", 50, 40, 60)]) == {"a": 1, "z": 2}


def test_compare_against_the_default():
    default = Leaderboard(spec={}, rows=(row("a", 70, 65, 75), row("b", 50, 45, 55), row("c", 30, 25, 35)))
    custom = Leaderboard(spec={}, rows=(row("a", 30, 25, 35), row("b", 50, 45, 55), row("c", 70, 65, 75),
                                        row("new", 10, 5, 15)))
    out = compare(custom, default)
    assert out["kendall_tau"] == -1.0 and out["spearman_rho"] == -1.0
    first, last = out["placements"][0], out["placements"][-1]
    assert first == {"model": "c", "position": 1, "rank_low": 1, "rank_high": 1, "default_position": 3,
                     "default_rank_low": 3, "default_rank_high": 3, "default_win_rate": 30}
    assert last["model"] == "new" and last["default_position"] is None


def test_compare_with_too_few_common_models_has_no_correlation():
    out = compare(Leaderboard(spec={}, rows=(row("a", 1, 0, 2),)), Leaderboard(spec={}, rows=(row("a", 1, 0, 2),)))
    assert out["kendall_tau"] is None and out["spearman_rho"] is None


def test_csv_columns_topics_and_formula_guard():
    lb = Leaderboard(spec={}, rows=(row("=cmd()", 60.0, 55.0, 65.0, topics={"Math": 70.0}, avg_length=120.0),
                                    row("b", 40.0, 35.0, 45.0, n_missing=2)))
    table = list(csv.reader(io.StringIO(to_csv(lb))))
    assert table[0] == ["rank", "model", "win_rate", "ci_low", "ci_high", "lc_win_rate", "default_position",
                        "topic:Math", "avg_length", "n", "n_missing"]
    assert table[1] == ["1", "'=cmd()", "60.00", "55.00", "65.00", "", "", "70.00", "120.0", "10", "0"]
    assert table[2][7] == "" and table[2][-1] == "2"
