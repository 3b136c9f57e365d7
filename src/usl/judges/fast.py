"""The fast CRM as a judge: ``fast`` and ``default``.

Answers are embedded once (``AnswerBank``); a criteria set costs one small MiniLM pass, after which
judging every answer of a benchmark against its baseline is a handful of matrix products. The
decision is antisymmetric (A vs B is exactly the mirror of B vs A), so callers that average both
orders get the same number and ``judge_matrix`` skips the second order altogether. Judging imports
neither torch nor transformers: the heads run in numpy (``fast.scorer``, ``fast.numpy_nn``) and
MiniLM on ONNX Runtime (``data.minilm_onnx``): a board with new criteria in a fresh process takes
about 3 s on 2 cores, most of it reading the benchmark's stored answer vectors and readings.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from usl import paths
from usl.data.encoder import encoder_path
from usl.data.minilm_onnx import MiniLM, frozen, load, weights_key
from usl.fast.answer_bank import AnswerBank, Progress
from usl.fast.criteria_reading import READER_DIR, CriteriaReader
from usl.fast.length_intent import LengthReading, read_wishes, shipped_length_reading
from usl.fast.criterion_kinds import KindModel, kind_reading
from usl.fast.scorer import ADAPTER_DIR, AnswerRepr, CriteriaRepr, FastScorer, criteria_features
from usl.data.pairs.general import QUALITY_CRITERIA
from usl.fast.static_embed import STATIC_TABLE, StaticEmbedder
from usl.fast.substance import FOLDER as SUBSTANCE_FOLDER, SubstanceBank, substance_first
from usl.judges.base import (DecisionTerms, JudgeRequest, LoadsReaders, ReadsLocally, Verdict,
                             verdicts_by_matrix)
from usl.judges.quality import pair_reader
from usl.judges.registry import load_judge, register
from usl.quality.gate import QualityGate
from usl.quality.reader import PairReader, QualityReading
from usl.weights import shipped
from usl.types import Criteria, CriteriaReading, CriterionReading

log = logging.getLogger(__name__)
DEFAULT_WEIGHTS = "fast-crm"


def _weights_hash(path: Path) -> str:
    """What the judge's version names: every file of its weights but their documentation (editing the model
    card must not make stored judgments look stale)."""
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.suffix != ".md":
            h.update(str(f.relative_to(path)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _load_reader(spec: str, home: str | None, **options) -> PairReader:
    return pair_reader(load_judge(spec, home=home, **options))


def quality_reading(weights: Path, home: str | None, reader: str = "") -> QualityReading | None:
    """The quality term of the weights' gate (None without ``quality_gate.json``). ``reader``: a judge spec that
    supplies the readings instead of the one the gate was fitted for (a stronger judge: ``llm:...``,
    ``crm:PATH``); its own readings, in a bank of its own."""
    gate = QualityGate.load(weights)
    if gate is None:
        if reader:
            raise ValueError(f"{weights}: no quality_gate.json, so no quality reading to take from {reader!r}")
        return None
    home = None if home is None else str(home)
    if reader and reader != gate.reader:
        gate = replace(gate, reader=reader, reader_identity=load_judge(reader, home=home).identity)
    # a CRM or the substance reader reads on this machine, and banks of its readings may ship beside its
    # weights; cheap to load here, as either loads its model on the first answer it reads
    judge = load_judge(gate.reader, home=home)
    local = isinstance(judge, ReadsLocally)
    shipped_banks = sorted(judge.readings_dir.glob("bank-*.npz")) if local else []
    return QualityReading(gate, home, functools.partial(_load_reader, gate.reader, home), local=local,
                          shipped=shipped_banks)


class FastJudge:
    can_tie = False
    cacheable = False  # recomputing is cheaper than a SQLite round trip

    def __init__(self, weights: str | Path | None = None, home: str | None = None, name: str = "fast",
                 quality: str = ""):
        self.weights = Path(weights) if weights else shipped(DEFAULT_WEIGHTS)
        if not (self.weights / "model.safetensors").exists():
            raise FileNotFoundError(f"no fast CRM weights in {self.weights}")
        self.name = name
        self.version = f"fast-{_weights_hash(self.weights)}"
        self.model = FastScorer.load(self.weights)
        cache = paths.cache_dir(home)
        self.static = StaticEmbedder(cache / "static", idf=self.model.idf, shipped=self.weights / STATIC_TABLE)
        if hasattr(self.model.register, "set_cache_dir"):
            self.model.register.set_cache_dir(cache / "style")
        self.bank = AnswerBank(self.static, cache / "answers", register=self.model.register, shipped=self.weights)
        adapter = self.weights / ADAPTER_DIR
        self.encoder = _criteria_encoder(cache, adapter if adapter.exists() else None)
        for reader in self.model.readers if not adapter.exists() else ():  # the same frozen MiniLM: one copy
            reader.share_encoder(self.encoder)
        for learned in (self.model.keywords, self.model.signs) if not adapter.exists() else ():
            if learned is not None:
                learned.share_encoder(self.encoder)
        # the criteria reader (criteria_reading.py): each criterion's kind, as the page shows it
        self.reader = CriteriaReader.load(self.weights) if (self.weights / READER_DIR).is_dir() else None
        if self.reader is not None and not adapter.exists():
            self.reader.share_encoder(self.encoder)
        # the length prior reads the length reader's and the criteria reader's mean (fast/length_intent.py)
        self.length = (LengthReading(self.model.reader, self.reader, self.model.split)
                       if self.reader is not None and self.model.reader is not None else None)
        self._answer_repr: AnswerRepr | None = None
        self._repr_rows = 0
        # boards and reward slices judge on several threads with this one judge: the memos that grow with the
        # answer bank (answer representations, substance readings by row) change under this lock
        self._memo_lock = threading.Lock()
        self.quality = quality_reading(self.weights, home, quality)
        # substance first (fast/substance.py): weights without a substance reader judge by the criteria alone
        self.substance = (SubstanceBank.shared(self.weights / SUBSTANCE_FOLDER, cache / "substance")
                          if (self.weights / SUBSTANCE_FOLDER).is_dir() else None)
        self._z = np.zeros(0, np.float32)     # the substance reader's z by answer-bank row (NaN: not looked up)
        self.kinds = KindModel.load(self.weights)
        if self.quality is not None and (self.kinds is None or self.kinds.kinds != self.quality.gate.kinds):
            raise ValueError(f"{self.weights}: the quality gate weighs criterion kinds {self.quality.gate.kinds}, "
                             f"but the weights' criterion_kinds.json has {self.kinds and self.kinds.kinds}; "
                             "refit the gate with usl quality fit-gate")
        # one reading of each criterion's kind, for the gate and the page (criterion_kinds.kind_reading)
        self._kind_probs, self.kinds_from = ((None, "") if self.kinds is None and self.reader is None else
                                             kind_reading(self.reader, self.kinds, self.encoder.encode,
                                                          self.model.split))
        if self.quality is not None and self.quality.gate.kinds_from != self.kinds_from:
            raise ValueError(f"{self.weights}: the quality gate was fitted on kinds read by the "
                             f"{self.quality.gate.kinds_from.replace('_', ' ')}, and these weights read them with the "
                             f"{self.kinds_from.replace('_', ' ')}; refit the gate with usl quality fit-gate")
        if quality:   # another reader's readings make another judge
            self.version += "+" + hashlib.sha256(self.quality.gate.reader_identity.encode()).hexdigest()[:8]

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    # -- building blocks ---------------------------------------------------------------------------
    def _answers(self) -> AnswerRepr:
        """Answer representations for every row of the bank: computed once, then for the rows it grew by alone
        (each row's are its own), so a request with a few new answers does not copy the board's 21k twice."""
        with self._memo_lock:
            r, feats, cos_q = self.bank.arrays()
            n, have = len(r), self._repr_rows
            if self._answer_repr is None or have > n:
                self._answer_repr = self.model.answer_repr(r, feats, cos_q)
            elif have < n:
                old = self._answer_repr
                new = self.model.answer_repr(r[have:n], feats[have:n], cos_q[have:n])
                self._answer_repr = AnswerRepr(f=np.concatenate([old.f, new.f]), z=np.concatenate([old.z, new.z]),
                                               quality=np.concatenate([old.quality, new.quality]))
            self._repr_rows = n
            return self._answer_repr

    def _criteria(self, criteria: Sequence[str]) -> tuple[CriteriaRepr, np.ndarray]:
        texts, signs = zip(*self.model.split(criteria)) if criteria else ((), ())
        embedded = self.encoder.encode(list(texts))  # first: the length reader takes its states from this pass
        readings = None if self.length is None else {"length": dict(zip(texts, self.length.probs(list(criteria))))}
        x = np.concatenate([embedded, criteria_features(self.model.readers, self.model.cfg.lexicon,
                                                                      list(texts), readings, self.model.keywords)], -1)
        return self.model.criteria_repr(x), np.array(signs, dtype=np.float32)

    def prepare(self, queries: Sequence[str], answers: Sequence[str], progress: Progress | None = None) -> None:
        """Embed a benchmark's answers ahead of time (cached on disk)."""
        self.bank.preload(queries, answers, progress)
        if self.substance is not None:
            self._substance(self.bank.rows(queries, answers), queries, answers, progress)
        self._answers()
        self.encoder.encode(["warm-up"])  # first real request should not pay for lazy init
        for reader in self.model.readers:
            reader.read(["warm-up"])

    def decision_terms(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                       baseline_answers: Sequence[str], progress: Progress | None = None) -> DecisionTerms:
        """The terms the decision's logit sums, for model vs baseline (``DecisionTerms``): each criterion's
        reading (k, n), each criterion's share of the quality reader's reading (k, n) (zero without a
        quality gate, ``usl.quality.gate``) and the answers' own quality with substance first (n,). Pairs with
        no stored quality reading are read first, ``progress`` called about every second (raising from it
        stops)."""
        crit = criteria.as_list() or list(QUALITY_CRITERIA)
        rows_a, rows_b = self.bank.rows(queries, model_answers), self.bank.rows(queries, baseline_answers)
        A = self._answers()
        C, signs = self._criteria(crit)
        S = self.model.criterion_scores(C, A)  # (k, N)
        per = signs[:, None] * (S[:, rows_a] - S[:, rows_b]) / len(crit)
        qual = self.model.beta * (A.quality[rows_a] - A.quality[rows_b])
        reading = np.zeros_like(per)
        if self.quality is not None:
            q = self.quality.readings(queries, model_answers, baseline_answers, progress, fine=True)  # (n,)
            per, reading, qual = self.quality.gate.terms(*self._kinds_and_signs(crit), per, qual, q)
        if self.substance is not None:   # the verdict moved by substance first: a term of its own
            g = per.sum(0) + reading.sum(0) + qual
            za, zb = self._substance(rows_a, queries, model_answers), self._substance(rows_b, queries, baseline_answers)
            qual = qual + (substance_first(g, za, zb, *self.substance.calibration) - g)
        return DecisionTerms(tuple(crit), per, reading, qual)

    def criterion_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                         baseline_answers: Sequence[str], progress: Progress | None = None
                         ) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Per-criterion logit contributions (k, n) and the answer-quality term (n,) for model vs baseline.
        With a quality gate each criterion's row also holds its share of the quality reader's reading of
        the pair: the rows and the term still sum to the decision's logit."""
        t = self.decision_terms(criteria, queries, model_answers, baseline_answers, progress)
        return list(t.criteria), t.criteria_rows + t.quality_rows, t.answer

    def _substance(self, rows: np.ndarray, queries: Sequence[str], answers: Sequence[str],
                   progress: Progress | None = None) -> np.ndarray:
        """The substance reader's ``z`` of each answer, kept by the answer bank's row: a board's 21k are an
        index after the first request (read outside the lock: a reading takes seconds)."""
        with self._memo_lock:
            n = int(rows.max()) + 1 if len(rows) else 0
            if len(self._z) < n:
                self._z = np.concatenate([self._z, np.full(n - len(self._z), np.nan, np.float32)])
            z = self._z[rows]
        idx = np.flatnonzero(np.isnan(z))
        if len(idx):
            z[idx] = self.substance.read([queries[i] for i in idx], [answers[i] for i in idx], progress)
            with self._memo_lock:
                self._z[rows[idx]] = z[idx]
        return z

    def load_readers(self) -> None:
        """The models that read a new answer, loaded and run once (``LoadsReaders``): the style scorer's MiniLM
        and the substance reader (SmolLM2-135M, which reads the quality term too), or another local quality
        reader. About 0.5 GB and 10-20 s of CPU; a server does it at start."""
        if self.model.register is not None:
            self.model.register.load_network()
        if self.substance is not None:
            self.substance.load_reader()
        if self.quality is not None and self.quality.local and isinstance(self.quality.reader, LoadsReaders):
            self.quality.reader.load_readers()

    def kind_probabilities(self, crit: Sequence[str]) -> np.ndarray:
        """(k, kinds): each criterion's kind probabilities, as the gate weighs them and the page shows them."""
        return self._kind_probs(list(crit))

    def _kinds_and_signs(self, crit: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self.kind_probabilities(crit), np.array([sign for _, sign in self.model.split(crit)], dtype=float)

    def quality_share(self, criteria: Criteria) -> list[float]:
        """Each criterion's share of its decision given to the quality reading (0 without a gate)."""
        crit = criteria.as_list() or list(QUALITY_CRITERIA)
        if self.quality is None:
            return [0.0] * len(crit)
        return [float(x) for x in self.quality.gate.shares(*self._kinds_and_signs(crit))]

    def read_criteria(self, criteria: Criteria) -> CriteriaReading:
        """How this judge reads ``criteria``: each one's length wish, as its length prior reads it (its own
        length and criteria readers, else the shipped ones: ``usl.fast.length_intent``), and the page's notes."""
        return CriteriaReading(tuple(read_wishes(criteria.as_list(), self.length or shipped_length_reading())),
                               tuple(self.criteria_reading(criteria)))

    def criteria_reading(self, criteria: Criteria) -> list[CriterionReading]:
        """How this judge reads each criterion: its kind and the judge's measured accuracy on that kind
        (``criterion_kinds.py``); empty where the weights hold no kind model."""
        if self.kinds is None:
            return []
        crit = criteria.as_list() or list(QUALITY_CRITERIA)
        return self.kinds.read(crit, self.kind_probabilities(crit), self.quality_share(criteria))

    def missing_readings(self, queries: Sequence[str], model_answers: Sequence[str],
                         baseline_answers: Sequence[str]) -> int:
        """Pairs whose quality reading is not stored yet (each costs the reader two passes)."""
        return 0 if self.quality is None else self.quality.missing(queries, model_answers, baseline_answers)

    # -- the Judge protocol ------------------------------------------------------------------------
    def judge_matrix(self, criteria: Criteria, queries: Sequence[str], model_answers: Sequence[str],
                     baseline_answers: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """P(model answer beats baseline answer), shape (n,); both orders agree by construction."""
        logit = self.decision_terms(criteria, queries, model_answers, baseline_answers, progress).logit
        return 1.0 / (1.0 + np.exp(-logit))

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return verdicts_by_matrix(self.judge_matrix, requests)


def _criteria_encoder(cache: Path, adapter: Path | None) -> MiniLM:
    """The criteria tower on ONNX Runtime (``usl.data.minilm_onnx``): the packaged MiniLM, or MiniLM with
    the weights' adapter merged, exported into the cache once (by a child process: this one imports no torch for it)."""
    if adapter is None:
        return frozen(cache)
    return load(cache, weights_key(encoder_path(), adapter), adapter)


def _parse(arg: str | None) -> tuple[str | None, str]:
    """``PATH``, ``quality=SPEC`` or ``PATH,quality=SPEC`` -> (weights, quality reader spec). SPEC is the
    rest of the string, so it may hold commas and colons of its own (``llm:M,base_url=...``)."""
    if not arg:
        return None, ""
    head, sep, spec = arg.partition("quality=")
    if not sep:
        return arg, ""
    if head and not head.endswith(","):
        raise ValueError(f"judge option {arg!r}: expected PATH, quality=SPEC or PATH,quality=SPEC")
    if not spec:
        raise ValueError("quality= needs a judge spec, e.g. default:quality=llm:gpt-4.1")
    return head.rstrip(",") or None, spec


@register("fast")
def _fast(arg: str | None = None, home: str | None = None, **_) -> FastJudge:
    weights, quality = _parse(arg)
    return FastJudge(weights, home=home, name="fast", quality=quality)


@register("default")
def _default(arg: str | None = None, home: str | None = None, **_) -> FastJudge:
    """``default``, ``default:PATH``, or ``default:quality=SPEC``: the shipped weights with another
    judge supplying the quality reading (filled once per benchmark with ``usl quality fill``)."""
    weights, quality = _parse(arg)
    return FastJudge(weights, home=home, name="default", quality=quality)
