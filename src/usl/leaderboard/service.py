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
    svc.contradictions(criteria, judge) -> list[str]   # human-readable warnings, as the judge reads them

A service instance keeps each benchmark (queries, answers, fingerprints) and each loaded judge
in memory, and the last few score matrices, so repeated leaderboards skip the store entirely. It assembles
boards from parts that live apart: which queries a board ranks on (``selection.QuerySelection``), its score
matrices and per-criterion breakdown (``scoring.BoardScores``), and the reference judged query by query for
a refined board (``refine.judge_in_order``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

import usl
from usl import paths
from usl.data import minilm_onnx
from usl.judges import calibration as cal
from usl.judges.base import (HasQualityTerm, Judge, Prepares, ReadsCriteria, ReadsPairsAhead, cacheable,
                             read_criteria)
from usl.judges.registry import load_judge
from usl.leaderboard import stats
from usl.leaderboard import calibrations
from usl.leaderboard.answers import Answers
from usl.leaderboard.contradictions import find_contradictions
from usl.leaderboard.jobs import JobConfig, ScoringJob
from usl.leaderboard.judgments import JudgmentCache
from usl.leaderboard.length_control import length_controlled
from usl.leaderboard.limits import LIMITS, check_text
from usl.leaderboard.ratings import elo_ratings
from usl.leaderboard.refine import MIN_JUDGED, judge_in_order
from usl.leaderboard.refine import refine as refine_board
from usl.leaderboard.scoring import BoardScores
from usl.leaderboard.selection import QuerySelection, Selection
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


class LeaderboardService:
    def __init__(self, store: Store, home: str | Path | None = None, job_config: JobConfig = JobConfig(),
                 memo_size: int = 32, auto_topics: bool = True):
        """``auto_topics``: build a benchmark's topics on first use (one-off, needs the sentence
        embedder) so that every row carries per-topic win rates; False = only use stored topics."""
        self.store, self.home, self.auto_topics = store, home, auto_topics
        self.cache = JudgmentCache(store)
        self.job_config = job_config
        self.scores = BoardScores(self.cache, job_config, memo_size)
        self._answers: dict[str, Answers] = {}
        self._judges: dict[str, Judge] = {}
        # The server calls one instance from several threads: guard the shared dictionaries (the
        # store gives each thread its own connection; scoring itself runs outside the lock).
        self._lock = threading.RLock()
        self.selection = QuerySelection(store, auto_topics, self._lock)
        self._prepared_keys: set[tuple] = set()
        self._no_unread: set[tuple] = set()
        self._prepare_lock = threading.Lock()
        self._refine_locks = [threading.Lock() for _ in range(64)]   # striped by board: bounded
        self._layout = cal.Layout()         # answers' length and list layout, read once (calibrations)

    # ---- data -------------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return list_benchmarks(self.store)

    def topics(self, benchmark: str):
        return self.selection.topics(benchmark)

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
        s = self.scores.score(data, judge, spec.criteria, baseline, models, sel.query_ids, progress)
        summ = stats.summarize(s, spec.n_bootstrap, spec.seed)
        topic_wr = stats.topic_win_rates(s, sel.topic_columns)
        reading = read_criteria(judge, spec.criteria)
        wish = reading.length_wish
        qids = list(sel.query_ids)
        lc = None if wish else length_controlled(s, data.lengths(models, qids), data.lengths([baseline], qids)[0])
        warnings = list(find_contradictions(spec.criteria, reading.length))
        rows = self._rows(data, models, sel, s, summ, topic_wr, lc, elo_ratings(s), warnings)
        breakdown, contribution = ({}, {}) if not spec.per_criterion else self.scores.per_criterion(
            spec.criteria, data, judge, baseline, models, sel.query_ids, s, progress)
        meta = self._spec_json(spec, data, judge, baseline, sel, wish)
        return Leaderboard(spec=meta, rows=tuple(rows), criteria_breakdown=breakdown,
                           warnings=tuple(warnings), criteria_contribution=contribution, criteria_reading=reading.notes)

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
        f = self.scores.score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        job = ScoringJob(spec.criteria.canonical(), baseline, tuple(models), sel.query_ids)
        lock = self._refine_locks[hash((ref.identity, spec.criteria.key(), data.name, baseline))
                                  % len(self._refine_locks)]
        with lock:      # two refinements of the same board judge each query once
            g, judged = judge_in_order(data, ref, job, f, self.cache, self.job_config, queries, seconds, progress)
        fast = stats.summarize(f, spec.n_bootstrap, spec.seed)
        est = refine_board(f, g, fast.ci)
        topic_wr = {t: refine_board(f[:, cols], g[:, cols], slope=est.slope).summary.win_rate
                    for t, cols in sel.topic_columns.items()}
        reading = read_criteria(judge, spec.criteria)
        warnings = list(find_contradictions(spec.criteria, reading.length))
        rows = self._rows(data, models, sel, f, est.summary, topic_wr, None, None, warnings)
        if judged < len(sel.query_ids):
            warnings.append(f"refined board: {judged} of {len(sel.query_ids)} queries judged by {ref.identity}; "
                            "the rest are estimated from the fast judge")
        few = [m for m, k in zip(models, est.judged) if 0 < k < MIN_JUDGED]
        if few:
            warnings.append(f"{len(few)} model(s) with fewer than {MIN_JUDGED} judged answers keep the fast "
                            f"estimate: {', '.join(few)}")
        meta = self._spec_json(spec, data, judge, baseline, sel, reading.length_wish)
        meta["refinement"] = {"reference": reference, "reference_identity": ref.identity, "queries_judged": judged,
                              "queries": len(sel.query_ids), "complete": judged == len(sel.query_ids),
                              "slope": round(est.slope, 3),
                              "estimator": "two-phase regression: reference mean over judged queries + slope x "
                                           "(fast mean over all - fast mean over judged); Student-t 95% CI"}
        meta["length_control"] = "off: not estimated for a refined board"
        return Leaderboard(spec=meta, rows=tuple(rows), warnings=tuple(warnings))

    def _rows(self, data: Answers, models: list[str], sel: Selection, s: np.ndarray, summ: stats.Summary,
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
            if summ.n[i] == 1:   # every resample that holds its query gives the same win rate: no spread
                warnings.append(f"{m}: one answered query in the selection; its win rate and interval rest on it "
                                "alone")
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
        s = self.scores.score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
        out = stats.agreement({m: _r(w) for m, w in zip(models, stats.win_rates(s)[0])}, reference)
        if spec.n_bootstrap > 0:        # (win rates rounded as the rows show them)
            ci = stats.correlation_ci(s, models, reference, spec.n_bootstrap, spec.seed)
            out |= {"spearman_rho_ci": list(ci["spearman_rho"]), "kendall_tau_ci": list(ci["kendall_tau"])}
        return out

    def compare(self, a: LeaderboardSpec, b: LeaderboardSpec) -> Comparison:
        la, lb = self.rank(a), self.rank(b)
        wa = {r.model: r.win_rate for r in la.rows}
        wb = {r.model: r.win_rate for r in lb.rows}
        warnings = [f"A: {w}" for w in self.contradictions(a.criteria, a.judge)]
        warnings += [f"B: {w}" for w in self.contradictions(b.criteria, b.judge)]
        return Comparison(la, lb, stats.kendall_tau(wa, wb), stats.spearman_rho(wa, wb), tuple(warnings))

    def examples(self, spec: LeaderboardSpec, model: str, limit: int = 5) -> list[Example]:
        """The clearest wins and losses of ``model`` against the baseline, alternating."""
        data, judge, baseline, models, sel = self._board_context(spec, None)
        if model == baseline:
            raise ValueError(f"{model!r} is the baseline: every other model is compared with it; pick one of those")
        if model not in models:
            raise ValueError(f"unknown model {model!r} in benchmark {spec.benchmark!r}")
        s = self.scores.score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
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
        s = self.scores.score(data, judge, spec.criteria, baseline, models, sel.query_ids, None)
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
        before_wr = stats.win_rates(self.scores.score(data, base, spec.criteria, baseline, models, sel.query_ids, None))[0]
        after_wr = stats.win_rates(self.scores.score(data, after, spec.criteria, baseline, models, sel.query_ids, None))[0]
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
            s = self.scores.score(data, judge, crit, baseline, models, qids, None)
            out[label] = [float(s[models.index(m), qids.index(q)]) for q, m in pairs]
        return out

    def contradictions(self, criteria: Criteria, judge: str = "default", embeddings: bool = True) -> list[str]:
        """Warnings for criteria that pull against each other, as ``judge`` reads them (its length wishes); with
        ``embeddings`` and a judge that reads criteria, a like and a dislike that mean the same are found by
        the packaged MiniLM's sentence vectors on ONNX Runtime (the process's one encoder, which that judge's
        criteria reading loads too: no torch on a request). A judge that does not read criteria gets the word
        checks alone, and loads no model for them."""
        j = self.judge(judge)
        embedder = None
        if embeddings and criteria.likes and criteria.avoid and isinstance(j, ReadsCriteria):
            embedder = minilm_onnx.frozen(paths.cache_dir(self.home))
        return find_contradictions(criteria, read_criteria(j, criteria).length, embedder)

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
        return data, judge, baseline, models, self.selection.select(spec, data)

    @staticmethod
    def _baseline(spec: LeaderboardSpec, data: Answers) -> str:
        baseline = spec.baseline or data.benchmark.baseline
        if baseline not in data.benchmark.models:
            raise ValueError(f"baseline {baseline!r} is not a model of benchmark {data.name!r}; "
                             f"models: {', '.join(data.benchmark.models)}")
        return baseline

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
