"""usl: a user-centric subjective leaderboard for LLMs, judged by customizable reward models.

The Python API (docs/python_api.md)::

    import usl
    bench = usl.load()                                   # the default benchmark of the data directory
    board = bench.rank(["Get to the point"], avoid=["Jargon"], topics=["coding"])
    board.rows[0].model, board.to_pandas()

Names are imported on first use, so ``import usl`` stays cheap.
"""

__version__ = "0.1.0"
__all__ = ["load", "Bench", "Comparison", "Criteria", "Leaderboard", "LeaderboardSpec", "Row"]

_WHERE = {"load": "usl.api", "Bench": "usl.api", "Comparison": "usl.api", "Criteria": "usl.types",
          "Leaderboard": "usl.leaderboard.types", "LeaderboardSpec": "usl.leaderboard.types",
          "Row": "usl.leaderboard.types"}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'usl' has no attribute {name!r}")
