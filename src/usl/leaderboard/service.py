"""The leaderboard engine's front door: what the CLI and the HTTP server call.

CONTRACT (owned by the leaderboard engine; the server codes against these signatures):

    svc = LeaderboardService(store, home=None)
    svc.benchmarks() -> list[str]
    svc.prepare(benchmark, judge, progress=None) -> Judge   # precompute a judge's reading of the answers
    svc.topics(benchmark) -> list[usl.data.topics.Topic]
    svc.rank(spec: LeaderboardSpec, progress: Callable[[int, int], None] | None = None) -> Leaderboard
    svc.refine(spec, reference="crm", queries=0, seconds=None, progress=None) -> Leaderboard
    svc.compare(a: LeaderboardSpec, b: LeaderboardSpec) -> Comparison
    svc.examples(spec, model, limit=5) -> list[Example]
    svc.contradictions(criteria) -> list[str]      # human-readable warnings

A service instance keeps each benchmark (queries, answers, fingerprints) and each loaded judge
in memory, and the last few score matrices, so repeated leaderboards skip the store entirely.

Choices the paper leaves open:

- Win rates average the judges' probabilities (soft scores), not thresholded decisions; a judge
  that only gives hard verdicts (LLM, length) produces the classic counted win rate.
- Per-criterion contribution: the combined board's win rates are fitted as a non-negative
  combination of the single-criterion boards (NNLS); a criterion's contribution is its share of
  the weights (shares sum to 1).
- Row ``topics`` holds every stored topic that has a selected query; topics are only computed
  (``ensure_topics``) when the spec selects by topic.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import subprocess
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
from scipy.optimize import nnls

import usl
from usl import paths
from usl.data import topics as topics_mod
from usl.data.embed import shared_embedder
from usl.fast.length_intent import length_wish
from usl.judges import calibration as cal
from usl.judges.base import HasQualityTerm, Judge, Prepares, ReadsCriteria, ReadsPairsAhead, cacheable
from usl.judges.registry import load_judge
from usl.leaderboard import stats
from usl.leaderboard import calibrations
from usl.leaderboard.answers import Answers
from usl.leaderboard.contradictions import find_contradictions
from usl.leaderboard.jobs import JobConfig, ScoringJob, cached_scores, score, score_distributed
from usl.leaderboard.judgments import JudgmentCache
from usl.leaderboard.length_control import length_controlled
from usl.leaderboard.limits import LIMITS, check_text
from usl.leaderboard.ratings import elo_ratings
from usl.leaderboard.refine import MIN_JUDGED, refinement_order
from usl.leaderboard.refine import refine as refine_board
from usl.leaderboard.types import CalibrationReport, Comparison, Leaderboard, LeaderboardSpec, Row
from usl.store.benchmarks import list_benchmarks, load_benchmark, load_responses, stored_version
from usl.store.db import Store
from usl.store.votes import save_calibration
from usl.types import Criteria, DataError

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Example:
    query_id: str
    query: str
    model: str
    model_answer: str
    baseline: str
    baseline_answer: str
    p_model_wins: float          # averaged over both orders
    topic: str = ""


@dataclass(frozen=True)
class _Selection:
    query_ids: tuple[str, ...]
    topic_columns: dict[str, list[int]]      # topic name -> column indices into query_ids
    topic_map: dict[str, str]                # query id -> first topic name (for examples)


class LeaderboardService:
    def __init__(self, store: Store, home: str | Path | None = None, job_config: JobConfig = JobConfig(),
                 memo_size: int = 32, auto_topics: bool = True):
        """``auto_topics``: build a benchmark's topics on first use (one-off, needs the sentence
        embedder) so that every row carries per-topic win rates; False = only use stored topics."""
        self.store, self.home, self.auto_topics = store, home, auto_topics
        self.cache = JudgmentCache(store)
        self.job_config = job_config
        self._answers: dict[str, Answers] = {}
        self._judges: dict[str, Judge] = {}
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._memo_size = memo_size
        self._embedder = None
        # The server calls one instance from several threads: guard the shared dictionaries (the
        # store gives each thread its own connection; scoring itself runs outside the lock).
        self._lock = threading.RLock()
        self._no_topics: set[str] = set()   # benchmarks whose topics could not be built
        self._prepared_keys: set[tuple] = set()
        self._no_unread: set[tuple] = set()
        self._prepare_lock = threading.Lock()
        self._refine_locks = [threading.Lock() for _ in range(64)]   # striped by board: bounded
        self._layout = cal.Layout()         # answers' length and list layout, read once (calibrations)

    # ---- data -------------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return list_benchmarks(self.store)

    def topics(self, benchmark: str):
        return topics_mod.load_topics(self.store, benchmark)

    def data_version(self, benchmark: str) -> str:
        """The benchmark's stored content version ('' for no such benchmark): a board computed from an
        older one is out of date."""
        try:
            return stored_version(self.store, benchmark)
        except DataError:
            return ""

    def answers(self, benchmark: str) -> Answers:
        """The benchmark's answers, kept in memory while its stored version stays the same: a model
        added or removed by another process (``usl data add-model`` beside a running ``usl serve``)
        is on the next board."""
        version = stored_version(self.store, benchmark)
        with self._lock:
            if benchmark not in self._answers or self._answers[benchmark].benchmark.version != version:
                data = Answers(load_benchmark(self.store, benchmark), load_responses(self.store, benchmark))
                name = hashlib.sha256(benchmark.encode()).hexdigest()[:12]
                saved = self.store.path.parent / "cache" / "leaderboard" / f"answers-{name}-{data.benchmark.version}.npz"
                if not data.restore(saved):
                    data.persist(saved)
                self._answers[benchmark] = data
            return self._answers[benchmark]

    def judge(self, spec: str) -> Judge:
        with self._lock:
            if spec not in self._judges:
                # home: judges keep their caches (embeddings, answer vectors) in the data directory
                self._judges[spec] = load_judge(spec, home=None if self.home is None else str(self.home))
            return self._judges[spec]

    def unread_pairs(self, spec: LeaderboardSpec) -> int:
        """Pairs of ``spec``'s benchmark (every query, against its baseline) that its judge would
        have to read before ranking: a judge of stored per-pair vectors (``crm-factored``) reads
        each with 2 transformer passes; 0 for every other judge. Remembered once all are stored.
        A baseline that is not a model of the benchmark raises ``ValueError`` whatever the judge:
        the server answers 422 before it starts a job."""
        data = self.answers(spec.benchmark)
        baseline = self._baseline(spec, data)
        judge = self.judge(spec.judge)
        if not isinstance(judge, ReadsPairsAhead):
            return 0
        key = ("unread", judge.identity, data.name, data.benchmark.version, baseline)
        with self._lock:
            if key in self._no_unread:
                return 0
        models = tuple(m for m in data.benchmark.models if m != baseline)
        grid = data.grid(baseline, models, tuple(q.id for q in data.benchmark.queries))
        n = judge.missing_pairs(*data.pair_texts(grid, baseline))
        if n == 0:
            with self._lock:
                self._no_unread.add(key)
        return n

    def pair_texts(self, spec: LeaderboardSpec) -> tuple[list[str], list[str], list[str]]:
        """(queries, model answers, baseline answers) of every pair of ``spec``'s board."""
        data = self.answers(spec.benchmark)
        baseline = self._baseline(spec, data)
        models = tuple(m for m in data.benchmark.models if m != baseline)
        grid = data.grid(baseline, models, tuple(q.id for q in data.benchmark.queries))
        return data.pair_texts(grid, baseline)

    def prepare(self, benchmark: str, judge: str, progress: Progress | None = None, quality: bool = True) -> Judge:
        """Let ``judge`` precompute what it reads of ``benchmark``'s answers (``judge.prepare``, when it
        has one), as the first board would: ``usl data add-model`` calls it so that the new model's
        answers are read once, there, with progress, and not by the next board. It goes the way every
        board starts (``_board_context``), so what a judge reads ahead of a board it reads here. A judge
        with a quality reading (``default``) also reads the pairs it has no stored reading of, unless
        ``quality`` is False (the caller reads them itself, with a progress of its own)."""
        spec = LeaderboardSpec(benchmark=benchmark, judge=judge)
        prepared = self._board_context(spec, progress)[1]
        reading = prepared.quality if isinstance(prepared, HasQualityTerm) else None
        if reading is not None and quality:
            reading.readings(*self.pair_texts(spec), progress=progress)
        return prepared

    def _prepared(self, spec: str, data: Answers, progress: Progress | None) -> Judge:
        """The judge, after ``judge.prepare(queries, answers)`` on the whole benchmark when it has one.

        Judges that precompute per-answer representations (the fast CRM) cache them on disk as
        one file per answer set; handing them the whole benchmark, in a fixed order, once per
        process makes that file hit instead of recomputing every answer.
        """
        judge = self.judge(spec)
        key = (spec, data.name, data.benchmark.version)
        if isinstance(judge, Prepares) and key not in self._prepared_keys:
            with self._prepare_lock:     # not self._lock: the first prepare may take a minute
                if key not in self._prepared_keys:
                    qs, ans = data.all_answers()
                    judge.prepare(qs, ans, progress)
                    self._prepared_keys.add(key)
        return judge

    # ---- leaderboards -----------------------------------------------------------------------
    def rank(self, spec: LeaderboardSpec, progress: Progress | None = None) -> Leaderboard:
        data, judge, baseline, models, sel = self._board_context(spec, progress)
        s = self._score(data, judge, spec.criteria, baseline, models, sel.query_ids, progress)
        summ = stats.summarize(s, spec.n_bootstrap, spec.seed)
        topic_wr = stats.topic_win_rates(s, sel.topic_columns)
        wish = length_wish(spec.criteria)
        qids = list(sel.query_ids)
        lc = None if wish else length_controlled(s, data.lengths(models, qids), data.lengths([baseline], qids)[0])
        warnings = list(find_contradictions(spec.criteria))
        rows = self._rows(data, models, sel, s, summ, topic_wr, lc, elo_ratings(s), warnings)
        breakdown, contribution = self._per_criterion(spec, data, judge, baseline, models, sel, s, progress)
        meta = self._spec_json(spec, data, judge, baseline, sel, wish)
        reading = tuple(judge.criteria_reading(spec.criteria)) if isinstance(judge, ReadsCriteria) else ()
        return Leaderboard(spec=meta, rows=tuple(rows), criteria_breakdown=breakdown,
                           warnings=tuple(warnings), criteria_contribution=contribution, criteria_reading=reading)

    def refine(self, spec: LeaderboardSpec, reference: str = "crm", queries: int | None = 0,
               seconds: float | None = None, progress: Progress | None = None) -> Leaderboard:
        """The board the ``reference`` judge would give on the spec's queries, estimated from the
        queries it has judged so far and the fast board (``usl.leaderboard.refine``).

        First judges up to ``queries`` more queries (None: all the rest) in the fixed refinement
        order, stopping once ``seconds`` have passed (checked between queries; one query is
        ``len(models)`` pairs in both orders). Judgments go to the shared cache: a later call, a
        restart or another user with the same criteria resumes where this one stopped.
        ``progress(done, total)`` counts queries. Rows carry no length-controlled win rate and no
        rating, and there is no per-criterion breakdown: those are the fast judge's.
        """
        data, judge, baseline, models, sel = self._board_context(spec, None)
        ref = self._prepared(reference, data, None)
        if not cacheable(ref):
            raise ValueError(f"judge {reference!r} keeps no judgments to refine with; name a reference CRM "
                             "such as 'crm' or 'crm:PATH'")
        f = self._score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        job = ScoringJob(spec.criteria.canonical(), baseline, tuple(models), sel.query_ids)
        lock = self._refine_locks[hash((ref.identity, spec.criteria.key(), data.name, baseline))
                                  % len(self._refine_locks)]
        with lock:      # two refinements of the same board judge each query once
            g = cached_scores(data, ref, job, self.cache)
            todo = _judging_order(f, g, sel.query_ids)[1]
            total = len(todo) if queries is None else min(max(queries, 0), len(todo))
            t0 = time.monotonic()
            if progress:
                progress(0, total)
            for done, qid in enumerate(todo[:total], 1):
                if seconds is not None and time.monotonic() - t0 >= seconds:
                    break
                score(data, ref, dataclasses.replace(job, query_ids=(qid,)), self.cache, self.job_config)
                if progress:
                    progress(done, total)
            g = cached_scores(data, ref, job, self.cache)
        # Only the judged prefix of the order is a random sample of the selection: other cached
        # judgments (another topic refined first, a topic ranked with the reference) are left out.
        sample = _judging_order(f, g, sel.query_ids)[0]
        g[:, ~np.isin(np.asarray(sel.query_ids), sample)] = np.nan
        judged = len(sample)
        fast = stats.summarize(f, spec.n_bootstrap, spec.seed)
        est = refine_board(f, g, fast.ci)
        topic_wr = {t: refine_board(f[:, cols], g[:, cols], slope=est.slope).summary.win_rate
                    for t, cols in sel.topic_columns.items()}
        warnings = list(find_contradictions(spec.criteria))
        rows = self._rows(data, models, sel, f, est.summary, topic_wr, None, None, warnings)
        if judged < len(sel.query_ids):
            warnings.append(f"refined board: {judged} of {len(sel.query_ids)} queries judged by {ref.identity}; "
                            "the rest are estimated from the fast judge")
        few = [m for m, k in zip(models, est.judged) if 0 < k < MIN_JUDGED]
        if few:
            warnings.append(f"{len(few)} model(s) with fewer than {MIN_JUDGED} judged answers keep the fast "
                            f"estimate: {', '.join(few)}")
        meta = self._spec_json(spec, data, judge, baseline, sel, length_wish(spec.criteria))
        meta["refinement"] = {"reference": reference, "reference_identity": ref.identity, "queries_judged": judged,
                              "queries": len(sel.query_ids), "complete": judged == len(sel.query_ids),
                              "slope": round(est.slope, 3),
                              "estimator": "two-phase regression: reference mean over judged queries + slope x "
                                           "(fast mean over all - fast mean over judged); Student-t 95% CI"}
        meta["length_control"] = "off: not estimated for a refined board"
        return Leaderboard(spec=meta, rows=tuple(rows), warnings=tuple(warnings))

    def _rows(self, data: Answers, models: list[str], sel: _Selection, s: np.ndarray, summ: stats.Summary,
              topic_wr: dict[str, np.ndarray], lc: np.ndarray | None, elo: np.ndarray | None,
              warnings: list[str]) -> list[Row]:
        """The board's rows, sorted; a model with no answered query is left out with a warning."""
        qids = list(sel.query_ids)
        lengths = data.lengths(models, qids)
        answered = ~np.isnan(s)
        with np.errstate(invalid="ignore"):
            avg_len = np.where(answered, lengths, 0).sum(1) / answered.sum(1)
        rows = []
        for i, m in enumerate(models):
            if summ.n[i] == 0:
                warnings.append(f"{m}: no answered query in the selection; left out")
                continue
            rows.append(Row(model=m, rank=int(summ.rank[i]), win_rate=_r(summ.win_rate[i]),
                            ci=(_r(summ.ci[i, 0]), _r(summ.ci[i, 1])), n=int(summ.n[i]),
                            n_missing=len(qids) - int(summ.n[i]),
                            topics={t: _r(v[i]) for t, v in topic_wr.items() if np.isfinite(v[i])},
                            avg_length=_r(avg_len[i]), lc_win_rate=None if lc is None else _r(lc[i]),
                            rating=None if elo is None else _r(elo[i])))
        rows.sort(key=lambda r: (r.rank, -r.win_rate, r.model))
        return rows

    def reference_agreement(self, spec: LeaderboardSpec, reference: Mapping[str, float]) -> dict:
        """Spearman's rho and Kendall's tau between this spec's board and a published one (model ->
        score), with percentile intervals over the board's bootstrap resamples of the queries when
        ``spec.n_bootstrap`` > 0. The judgments come from the cache a ``rank`` of the spec filled."""
        data, judge, baseline, models, sel = self._board_context(spec, None)
        s = self._score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        out = stats.agreement({m: _r(w) for m, w in zip(models, stats.win_rates(s)[0])}, reference)
        if spec.n_bootstrap > 0:        # (win rates rounded as the rows show them)
            ci = stats.correlation_ci(s, models, reference, spec.n_bootstrap, spec.seed)
            out |= {"spearman_rho_ci": list(ci["spearman_rho"]), "kendall_tau_ci": list(ci["kendall_tau"])}
        return out

    def compare(self, a: LeaderboardSpec, b: LeaderboardSpec) -> Comparison:
        la, lb = self.rank(a), self.rank(b)
        wa = {r.model: r.win_rate for r in la.rows}
        wb = {r.model: r.win_rate for r in lb.rows}
        warnings = [f"A: {w}" for w in self.contradictions(a.criteria)]
        warnings += [f"B: {w}" for w in self.contradictions(b.criteria)]
        return Comparison(la, lb, stats.kendall_tau(wa, wb), stats.spearman_rho(wa, wb), tuple(warnings))

    def examples(self, spec: LeaderboardSpec, model: str, limit: int = 5) -> list[Example]:
        """The clearest wins and losses of ``model`` against the baseline, alternating."""
        data, judge, baseline, models, sel = self._board_context(spec, None)
        if model == baseline:
            raise ValueError(f"{model!r} is the baseline: every other model is compared with it; pick one of those")
        if model not in models:
            raise ValueError(f"unknown model {model!r} in benchmark {spec.benchmark!r}")
        s = self._score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        row = s[models.index(model)]
        cols = np.flatnonzero(~np.isnan(row))
        wins = [j for j in cols[np.argsort(-row[cols], kind="stable")] if row[j] > 0.5]
        losses = [j for j in cols[np.argsort(row[cols], kind="stable")] if row[j] < 0.5]
        order = [j for pair in zip(wins, losses) for j in pair]
        rest = wins[len(losses):] + losses[len(wins):]
        out = []
        for j in (order + rest)[:limit]:
            qid = sel.query_ids[j]
            out.append(Example(qid, data.query_text[qid], model, data.responses[(qid, model)], baseline,
                               data.responses[(qid, baseline)], float(row[j]), sel.topic_map.get(qid, "")))
        return out

    def vote_pairs(self, spec: LeaderboardSpec, n: int = 10, seed: int | None = None,
                   chosen: bool = True) -> list[Example]:
        """``n`` pairs to vote on from the spec's selection, each a model's answer beside the baseline's on a
        distinct query, ``p_model_wins`` as the board's judge gives it. ``chosen``: the pairs whose votes
        would tell a calibration the most, given the votes already stored under the spec's criteria
        (``usl.leaderboard.calibrations.choose``); else a random model on random queries."""
        data, judge, baseline, models, sel = self._board_context(spec, None)
        s = self._score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        rng = np.random.default_rng(seed)
        if chosen:
            cells = [(i, j) for j in range(len(sel.query_ids)) for i in np.flatnonzero(~np.isnan(s[:, j]))]
            pairs = [(sel.query_ids[j], models[i]) for i, j in cells]
            base = self._prepared(spec.judge, data, None)
            pool = cal.judge_terms(base, spec.criteria, *self._texts(data, baseline, pairs), self._layout)
            votes = [v for _, v in calibrations.stored_votes(self.store, spec)]
            voted = cal.judge_terms(base, spec.criteria, [v.query for v in votes], [v.model_answer for v in votes],
                                    [v.baseline_answer for v in votes], self._layout)
            y = cal.labels([v.choice for v in votes])
            picked = calibrations.choose(pool, [q for q, _ in pairs], voted, y, n, rng, cal.CalibrationConfig())
            order = [cells[k] for k in picked]
        else:
            order = []
            for j in rng.permutation(len(sel.query_ids)).tolist():
                answered = np.flatnonzero(~np.isnan(s[:, j]))
                if len(answered):
                    order.append((int(rng.choice(answered)), j))
            order = order[:n]
        out = []
        for i, j in order:
            qid = sel.query_ids[j]
            out.append(Example(qid, data.query_text[qid], models[i], data.responses[(qid, models[i])], baseline,
                               data.responses[(qid, baseline)], float(s[i, j]), sel.topic_map.get(qid, "")))
        return out

    @staticmethod
    def _texts(data: Answers, baseline: str, pairs: list[tuple[str, str]]) -> tuple[list[str], list[str], list[str]]:
        """(queries, model answers, baseline answers) of (query id, model) pairs."""
        return ([data.query_text[q] for q, _ in pairs], [data.responses[(q, m)] for q, m in pairs],
                [data.responses[(q, baseline)] for q, _ in pairs])

    # ---- calibrations (usl.judges.calibration, usl.leaderboard.calibrations) --------------------------
    def calibrate(self, name: str, spec: LeaderboardSpec,
                  config: cal.CalibrationConfig = cal.CalibrationConfig()) -> CalibrationReport:
        """Fit calibration ``name`` of ``spec``'s judge on every stored vote of its benchmark under its
        criteria, store it with those votes (replacing one of that name), and say which models it moved.
        Refused, with nothing stored or changed, for votes of a model the benchmark no longer has."""
        check_text(name, "calibration", LIMITS.max_name_chars)
        if not name.strip():
            raise DataError("a calibration needs a name", field="calibration")
        spec = dataclasses.replace(spec, calibration="")
        data, base, baseline, models, sel = self._board_context(spec, None)
        votes = calibrations.votes_for(self.store, spec, data.benchmark.models)
        board = cal.judge_terms(base, spec.criteria, *self.pair_texts(spec), self._layout)
        fitted = calibrations.fit_votes(name, base, spec, [v for _, v in votes], board, self._layout, config)
        save_calibration(self.store, name, spec.benchmark, base.identity, fitted.to_json(), [i for i, _ in votes])
        after = self._calibrated(dataclasses.replace(spec, calibration=name), base)
        before_wr = stats.win_rates(self._score(data, base, spec.criteria, baseline, models, sel.query_ids, None))[0]
        after_wr = stats.win_rates(self._score(data, after, spec.criteria, baseline, models, sel.query_ids, None))[0]
        return CalibrationReport(fitted.to_json(), calibrations.moved(models, before_wr, after_wr))

    def calibration(self, name: str) -> cal.Calibration:
        return calibrations.stored(self.store, name)

    def _calibrated(self, spec: LeaderboardSpec, base: Judge) -> Judge:
        """``base`` under ``spec.calibration`` (refused for a board it was not fitted for)."""
        c = calibrations.stored(self.store, spec.calibration)
        calibrations.check_fits(c, spec)
        key = f"{spec.judge}#calibration:{c.name}:{c.version}"
        with self._lock:
            if key not in self._judges:
                self._judges[key] = cal.CalibratedJudge(base, c, self._layout)
            return self._judges[key]

    def pair_probabilities(self, spec: LeaderboardSpec, pairs: list[tuple[str, str]]) -> dict[str, list[float]]:
        """P(model's answer beats the baseline's) for each (query id, model) of ``pairs``: under the spec's
        criteria (key ``""``) and, with two or more, under each criterion alone (keys as the breakdown's)."""
        data, judge, baseline, models, _ = self._board_context(spec, None)
        qids = tuple(dict.fromkeys(q for q, _ in pairs))
        unknown = [(q, m) for q, m in pairs if m not in models or (q, m) not in data.responses
                   or (q, baseline) not in data.responses]
        if unknown and unknown[0][1] not in models:
            raise ValueError(f"no pair of answers for query {unknown[0][0]!r} and model {unknown[0][1]!r}: "
                             f"{unknown[0][1]!r} is not on benchmark {data.name!r} (removed since the pairs "
                             "were shown?)")
        if unknown:
            raise ValueError(f"no pair of answers for query {unknown[0][0]!r} and model {unknown[0][1]!r}")
        parts = [("", spec.criteria)]
        c = spec.criteria.canonical()
        if len(c.likes) + len(c.avoid) >= 2:
            parts += [(x, Criteria((x,))) for x in c.likes] + [(f"Avoid: {x}", Criteria((), (x,))) for x in c.avoid]
        out = {}
        for label, crit in parts:
            s = self._score(data, judge, crit, baseline, models, qids, None)
            out[label] = [float(s[models.index(m), qids.index(q)]) for q, m in pairs]
        return out

    def contradictions(self, criteria: Criteria, embeddings: bool = True) -> list[str]:
        embedder = None
        if embeddings and criteria.likes and criteria.avoid:
            with self._lock:
                if self._embedder is None:
                    self._embedder = shared_embedder(paths.cache_dir(self.home, "embeddings"))
                embedder = self._embedder
        return find_contradictions(criteria, embedder)

    # ---- internals --------------------------------------------------------------------------
    def _board_context(self, spec: LeaderboardSpec, progress: Progress | None):
        """What every board of ``spec`` starts from: (answers, prepared judge, baseline, the
        models ranked against it, the selected queries)."""
        data = self.answers(spec.benchmark)
        judge = self._prepared(spec.judge, data, progress)
        if spec.calibration:
            judge = self._calibrated(spec, judge)
        baseline = self._baseline(spec, data)
        models = [m for m in data.benchmark.models if m != baseline]
        return data, judge, baseline, models, self._select(spec, data)

    @staticmethod
    def _baseline(spec: LeaderboardSpec, data: Answers) -> str:
        baseline = spec.baseline or data.benchmark.baseline
        if baseline not in data.benchmark.models:
            raise ValueError(f"baseline {baseline!r} is not a model of benchmark {data.name!r}; "
                             f"models: {', '.join(data.benchmark.models)}")
        return baseline

    def _score(self, data: Answers, judge: Judge, criteria: Criteria, baseline: str, models: list[str],
               query_ids: tuple[str, ...], progress: Progress | None) -> np.ndarray:
        key = (judge.identity, criteria.key(), data.name, data.benchmark.version, baseline, tuple(models),
               query_ids)
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        job = ScoringJob(criteria.canonical(), baseline, tuple(models), query_ids)
        s = score_distributed(data, judge, job, self.cache, self.job_config, progress)
        s.setflags(write=False)
        with self._lock:
            self._memo[key] = s
            while len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return s

    def _select(self, spec: LeaderboardSpec, data: Answers) -> _Selection:
        if spec.topics and spec.use_case:
            raise ValueError("select queries by topics or by use case, not both")
        all_ids = [q.id for q in data.benchmark.queries]
        topics = self._stored_topics(data.name, compute=bool(spec.topics), required=bool(spec.topics))
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
        return _Selection(query_ids, columns, topic_map)

    def _stored_topics(self, benchmark: str, compute: bool, required: bool) -> list:
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

    def _per_criterion(self, spec, data, judge, baseline, models, sel, combined, progress):
        parts = [(c, Criteria((c,))) for c in spec.criteria.canonical().likes]
        parts += [(f"Avoid: {c}", Criteria((), (c,))) for c in spec.criteria.canonical().avoid]
        if not spec.per_criterion or len(parts) < 2:
            return {}, {}
        breakdown, columns = {}, []
        for label, crit in parts:
            wr, _ = stats.win_rates(self._score(data, judge, crit, baseline, models, sel.query_ids, progress))
            breakdown[label] = {m: _r(v) for m, v in zip(models, wr) if np.isfinite(v)}
            columns.append(wr)
        target, _ = stats.win_rates(combined)
        x = np.stack(columns, axis=1)
        ok = np.isfinite(target) & np.isfinite(x).all(axis=1)
        weights = nnls(x[ok], target[ok])[0] if ok.sum() >= 2 else np.zeros(len(parts))
        total = weights.sum()
        shares = weights / total if total > 0 else np.full(len(parts), 1.0 / len(parts))
        return breakdown, {label: _r(w, 3) for (label, _), w in zip(parts, shares)}

    def _spec_json(self, spec, data, judge, baseline, sel, wish) -> dict:
        meta = spec.to_json()
        meta.update({
            "baseline": baseline,
            "benchmark_version": data.benchmark.version,
            "judge_identity": judge.identity,
            "n_queries": len(sel.query_ids),
            "query_set": hashlib.sha256("\n".join(sel.query_ids).encode()).hexdigest()[:16],
            "topic_names": sorted(sel.topic_columns),
            "length_control": (f"off: the criteria ask for {wish.side} answers ({wish.criterion!r})" if wish
                               else "on"),
            "win_rate": "percent of the baseline's matches won, ties half, probabilities averaged "
                        "over both answer orders; micro average over answered queries",
            "rank": "1 + number of models whose 95% CI lower bound exceeds this model's upper bound",
            "usl_version": usl.__version__,
            "git_commit": git_commit(),
        })
        if isinstance(judge, cal.CalibratedJudge):     # the weights themselves: the board is reproducible from them
            c = judge.calibration
            meta["calibration_version"] = c.version
            meta["calibration_weights"] = dict(zip(c.terms, c.weights))
        return meta


def _judging_order(fast: np.ndarray, reference: np.ndarray, query_ids: tuple[str, ...]):
    """(the longest prefix of the refinement order whose every answered pair the reference has
    judged, the queries still to judge after it in that order); a query with no answered pair
    counts as judged."""
    missing = dict(zip(query_ids, (~np.isnan(fast) & np.isnan(reference)).any(axis=0)))
    order = refinement_order(query_ids)
    cut = next((i for i, q in enumerate(order) if missing[q]), len(order))
    return order[:cut], [q for q in order[cut:] if missing[q]]


def _r(x: float, digits: int = 2) -> float:
    return round(float(x), digits)


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """HEAD of the checkout this package runs from, if it is one."""
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
