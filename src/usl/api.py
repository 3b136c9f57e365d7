"""The Python API for notebooks: ``usl.load()`` a benchmark, ``rank`` it by criteria, ``compare`` two boards.

A small surface over ``LeaderboardService`` (what the CLI and the server call), or over a running
``usl serve`` of the same data directory (``usl.leaderboard.remote``), kept stable: keyword
arguments as the CLI's options, boards as ``usl.leaderboard.types.Leaderboard`` whose rows are frozen
records, ``board.records()`` as plain dicts, ``board.to_pandas()`` as a DataFrame (pandas optional).
Examples, run by the test suite: docs/python_api.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from usl.leaderboard.types import CalibrationReport, Comparison, Leaderboard, LeaderboardSpec
from usl.types import Criteria

Progress = Callable[[int, int], None]


@dataclass
class Bench:
    """One stored benchmark and the engine that ranks it; made by ``usl.load``. Boards come from a
    ``usl serve`` running on the same data directory when there is one and ``server`` is true (the same
    boards, without loading the judge in this process), else from an engine loaded on the first board."""

    name: str
    home: str | None
    _store: object = field(repr=False)
    server: bool = True
    _engine: object = field(default=None, repr=False)

    @property
    def models(self) -> tuple[str, ...]:
        """Every model, the baseline included."""
        return self._benchmark().models

    @property
    def baseline(self) -> str:
        return self._benchmark().baseline

    @property
    def n_queries(self) -> int:
        return len(self._benchmark().queries)

    def topics(self) -> list[str]:
        """Topic names (built on first use for a benchmark without stored topics)."""
        from usl.data.topics import ensure_topics

        return [t.name for t in ensure_topics(self._store, self.name)]

    def rank(self, likes: Sequence[str] = (), avoid: Sequence[str] = (), *, topics: Sequence[str] = (),
             use_case: str = "", judge: str = "default", baseline: str | None = None, n_bootstrap: int = 1000,
             seed: int = 0, per_criterion: bool = True, calibration: str = "",
             progress: Progress | None = None) -> Leaderboard:
        """The board for these criteria (no likes and no avoid: the general default criteria, or the
        calibration's). ``calibration``: rank under that stored calibration of the judge (``calibrate``).
        ``progress`` reports judging done here; a server's board comes without it."""
        spec = self.spec(likes, avoid, topics=topics, use_case=use_case, judge=judge, baseline=baseline,
                         n_bootstrap=n_bootstrap, seed=seed, per_criterion=per_criterion, calibration=calibration)
        if calibration:
            from usl.leaderboard.calibrations import under

            spec = under(self._store, spec, bool(likes or avoid))
        remote = self._remote()
        board = remote.rank(spec) if remote is not None else None
        return board if board is not None else self._service().rank(self._checked(spec), progress)

    def vote_pairs(self, likes: Sequence[str] = (), avoid: Sequence[str] = (), *, n: int = 10,
                   topics: Sequence[str] = (), judge: str = "default", seed: int | None = None) -> list:
        """``n`` pairs to vote on (a model's answer beside the baseline's, one per query: ``query``,
        ``model_answer``, ``baseline_answer``...), the ones whose votes would tell a calibration the most
        given the votes stored so far, as the page's "Check the judge" card offers them; in this process."""
        spec = self._checked(self.spec(likes, avoid, topics=topics, judge=judge))
        return self._service().vote_pairs(spec, n, seed)

    def vote(self, likes: Sequence[str], pairs: Sequence, choices: Sequence[str], avoid: Sequence[str] = (), *,
             judge: str = "default") -> int:
        """Store your votes on ``pairs`` (from ``vote_pairs``) under these criteria, as the page does:
        ``choices[i]`` is "model", "baseline" or "tie". Returns how many were stored."""
        from usl.store.votes import Vote, save_votes

        if len(pairs) != len(choices):
            raise ValueError(f"{len(pairs)} pairs but {len(choices)} choices")
        spec = self._checked(self.spec(likes, avoid, judge=judge))
        identity = self._service().judge(spec.judge).identity
        return save_votes(self._store, [Vote(self.name, p.query_id, p.query, p.model, p.model_answer, p.baseline,
                                             p.baseline_answer, spec.criteria, c, True, identity, p.p_model_wins)
                                        for p, c in zip(pairs, choices)])

    def calibrate(self, name: str, likes: Sequence[str] = (), avoid: Sequence[str] = (), *,
                  judge: str = "default") -> CalibrationReport:
        """Fit (or refit) calibration ``name`` of ``judge`` on the stored votes of this benchmark under these
        criteria (cast on the page's "Check the judge" card, or with ``vote``), in this process; ``report.calibration`` holds its weights and its agreement with the votes before
        and after (leave-one-out), ``report.moved`` the models it moved."""
        spec = self._checked(self.spec(likes, avoid, judge=judge))
        return self._service().calibrate(name, spec)

    def compare(self, a: Sequence[str] | Criteria, b: Sequence[str] | Criteria, **options) -> Comparison:
        """Boards for two criteria sets (lists of likes, or ``Criteria`` with avoids) and their rank agreement;
        ``options`` as for ``rank``."""
        options.setdefault("per_criterion", False)
        sa, sb = (self.spec(c.likes, c.avoid, **options) if isinstance(c, Criteria) else self.spec(c, **options)
                  for c in (a, b))
        remote = self._remote()
        found = remote.compare(sa, sb) if remote is not None else None
        return found if found is not None else self._service().compare(self._checked(sa), self._checked(sb))

    def spec(self, likes: Sequence[str] = (), avoid: Sequence[str] = (), **options) -> LeaderboardSpec:
        """The ``LeaderboardSpec`` that ``rank`` would use (what a board records in ``board.spec``)."""
        if isinstance(likes, str) or isinstance(avoid, str):
            raise TypeError("likes and avoid are lists of criteria, not one string")
        kw = {"criteria": Criteria(tuple(likes), tuple(avoid))} if likes or avoid else {}
        topics = tuple(options.pop("topics", ()))
        return LeaderboardSpec(benchmark=self.name, topics=topics, **kw, **options)

    def _benchmark(self):
        from usl.store.benchmarks import load_benchmark

        return load_benchmark(self._store, self.name)

    def _remote(self):
        from usl import paths
        from usl.leaderboard.remote import connect

        return connect(paths.home(self.home)) if self.server else None

    def _checked(self, spec: LeaderboardSpec) -> LeaderboardSpec:
        from usl.leaderboard.names import check_names

        return check_names(self._store, spec)

    def _service(self):
        if self._engine is None:
            from usl.leaderboard.service import LeaderboardService

            self._engine = LeaderboardService(self._store, home=self.home)
        return self._engine


def load(benchmark: str | None = None, home: str | Path | None = None, server: bool = True) -> Bench:
    """A stored benchmark (default: ``alpaca_eval``, or the only one) of the data directory ``home``
    (default: ``$USL_HOME``, else ``~/.local/share/usl``); import one first with ``usl data import``.
    ``server=False``: rank in this process even when a ``usl serve`` runs on the data directory."""
    from usl import paths
    from usl.store import Store
    from usl.store.benchmarks import load_benchmark, resolve_name

    home = None if home is None else str(home)
    store = Store(paths.db_path(home))
    name = resolve_name(store, benchmark)
    load_benchmark(store, name)          # an unknown name fails here, naming the known ones
    return Bench(name, home, store, server)
