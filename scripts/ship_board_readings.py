"""Write the readings of the default board that ship with the package, so that a first start reads
none of its 21k answers' features nor embeds its queries:

* ``weights/fast-crm/features-board-<layout>.npz``: each answer's style features and register scores
  (``usl.fast.answer_bank``; the layout names the features and the register scorer they are for);
* ``data/embeddings-board.npz``: MiniLM vectors of the board's queries and of the curated topics'
  descriptions and examples (``usl.data.embed``), which topics are built from.

    USL_SHARED_DATA=../shared/data python scripts/ship_board_readings.py

Run it again after changing the fast CRM's features or register scorer, the encoder, or the curated
topics; until then, what no longer matches is computed at start-up as before (slower, never wrong).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from usl import paths
from usl.data.alpaca_eval import load_alpaca_eval
from usl.data.embed import SHIPPED, write_shipped
from usl.data.topics import load_curated
from usl.judges.registry import load_judge
from usl.leaderboard.service import LeaderboardService
from usl.store import Store
from usl.store.benchmarks import DEFAULT_BENCHMARK, save_benchmark


def main() -> None:
    shared = paths.shared_data()
    if shared is None or not (shared / "alpaca_eval").is_dir():
        raise SystemExit("error: no shared data with alpaca_eval/ (set USL_SHARED_DATA)")
    with tempfile.TemporaryDirectory(prefix="usl-ship-") as home:
        store = Store(Path(home) / "usl.sqlite")
        imp = load_alpaca_eval(shared / "alpaca_eval", split="board")
        save_benchmark(store, imp.benchmark, imp.responses, imp.source)
        _, answers = LeaderboardService(store, home=home).answers(DEFAULT_BENCHMARK).all_answers()
        started = time.perf_counter()
        judge = load_judge("default", home=home)
        path = judge.bank.save_shipped(answers, judge.weights)
        print(f"{path}: features of {len(set(answers))} answers ({path.stat().st_size / 1e6:.1f} MB) "
              f"in {time.perf_counter() - started:.0f} s")
        texts = [q.text for q in imp.benchmark.queries]
        texts += [t for c in load_curated() for t in (c.description, *c.examples)]
        n = write_shipped(texts)
        print(f"{SHIPPED}: {n} vectors ({SHIPPED.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
