"""``quality[:PATH]``: the quality reader, a pairwise CRM that reads general answer quality.

It is the transformer CRM of ``usl train`` (``crm.py``) trained on general-preference pairs only
(``usl data build-train``'s ``quality/`` files: human, LLM-judge and rubric labels) under one fixed
wording, :data:`~usl.data.pairs.general.QUALITY_CRITERIA`, and always read under that wording, so
its reading of a pair does not depend on the user's criteria: a board computes it once per
(answer, baseline) pair and keeps it (:mod:`usl.quality.bank`). As a judge it answers "which
answer is better overall", whatever criteria it is given.

Its reading of a pair is the order-averaged logit
``Q(A, B) = (logit p(A first) - logit p(B first)) / 2``, antisymmetric by construction.
Plain ``quality`` is the shipped reader (``weights/quality-minilm``). Any other judge reads the quality term
through :class:`VerdictReader`.

GPU path (no server stack there): every (answer, baseline) pair of a board read into a bank::

    python3 -m usl.judges.quality --judge quality:RUN --board board.json.xz --out bank-board.npz
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from usl.crm.inference import model_dir_of
from usl.data.pairs.alpaca import board_answers, load_outputs
from usl.data.pairs.general import QUALITY_CRITERIA
from usl.judges.base import Judge, JudgeRequest, Verdict
from usl.judges.crm import CRMJudge
from usl.judges.registry import load_judge, register
from usl.quality.bank import QualityBank, fill
from usl.quality.reader import PairReader
from usl.data.io import read_json
from usl.types import Criteria, DataError
from usl.weights import shipped

log = logging.getLogger(__name__)

SHIPPED = "quality-minilm"


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


@dataclass
class QualityJudge(CRMJudge):
    name: str = "quality"

    def readings(self, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
        """``Q(A, B)`` for each pair, shape (n,): both orders read, their logits averaged."""
        crit = list(QUALITY_CRITERIA)
        items = [(crit, q, a, b) for q, a, b in zip(queries, answers_a, answers_b)]
        if self.scorer.meta.get("order_average"):   # the scorer reads both orders and averages their logits
            return _logit(np.asarray(self.scorer.p_a(items), dtype=np.float64)).astype(np.float32)
        items += [(crit, q, b, a) for q, a, b in zip(queries, answers_a, answers_b)]
        p = np.asarray(self.scorer.p_a(items), dtype=np.float64)
        n = len(queries)
        return (0.5 * (_logit(p[:n]) - _logit(p[n:]))).astype(np.float32)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        crit = list(QUALITY_CRITERIA)
        return [Verdict(p) for p in self.scorer.p_a([(crit, r.query, r.response_a, r.response_b) for r in requests])]


@register("quality")
def _quality(arg: str | None = None, *, device: str | None = None, home: str | None = None,
             batch_size: int | None = None, **_) -> QualityJudge:
    arg = arg or str(shipped(SHIPPED))
    model_dir_of(arg)  # fail fast on a wrong path
    return QualityJudge(path=arg, device=device, home=home, batch_size=batch_size)


class VerdictReader:
    """Any judge of the protocol as a quality reader (an ``llm:...`` judge, say): ``Q(A, B)`` from its verdicts
    in both orders under ``QUALITY_CRITERIA``, ``(logit p(A first) - logit p(B first)) / 2``, each probability
    kept within [0.05, 0.95] so that a hard verdict reads as a confident one (logit 2.9), not an infinite one."""

    def __init__(self, judge: Judge):
        self.judge = judge

    @property
    def identity(self) -> str:
        return self.judge.identity

    def readings(self, queries: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str]) -> np.ndarray:
        crit = Criteria(QUALITY_CRITERIA, ())
        reqs = [JudgeRequest(crit, q, a, b) for q, a, b in zip(queries, answers_a, answers_b)]
        reqs += [JudgeRequest(crit, q, b, a) for q, a, b in zip(queries, answers_a, answers_b)]
        p = np.clip(np.array([v.score_a for v in self.judge.judge(reqs)], np.float64), 0.05, 0.95)
        lg = np.log(p) - np.log1p(-p)
        n = len(queries)
        return (0.5 * (lg[:n] - lg[n:])).astype(np.float32)


def pair_reader(judge: Judge) -> PairReader:
    """The judge as the quality term's reader: a judge that reads pairs itself (the quality reader) as it is,
    any other through its verdicts."""
    return judge if isinstance(judge, PairReader) else VerdictReader(judge)


def _read_board(path: str) -> dict:
    """A board's answers: a JSON file (.xz ok) or an AlpacaEval folder of the shared data (its board split)."""
    if Path(path).is_dir():
        return board_answers(load_outputs(path))
    board = read_json(path)
    if not isinstance(board, dict) or not {"queries", "baseline", "answers"} <= set(board):
        raise DataError('expected {"queries", "baseline", "answers": {model: [...]}}', path=path)
    if board["baseline"] not in board.get("answers", {}):
        raise DataError(f"baseline {board['baseline']!r} has no answers", path=path, field="answers")
    return board


def _main() -> None:
    """Read a board's every (answer, baseline) pair on this machine's device (a GPU box)."""
    ap = argparse.ArgumentParser(description=_main.__doc__)
    ap.add_argument("--judge", required=True, help="the reader, e.g. quality:RUN")
    ap.add_argument("--board", required=True, help='{"queries", "baseline", "answers": {model: [...]}} (.xz ok), '
                    "or an AlpacaEval folder of the shared data (its board split)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()
    try:
        board = _read_board(args.board)
    except (ValueError, TypeError) as e:  # DataError names the file
        ap.error(f"--board: {e}")
    base = board["answers"][board["baseline"]]
    trip = [(q, a, b) for m, ans in board["answers"].items() if m != board["baseline"]
            for q, a, b in zip(board["queries"], ans, base) if a and b]
    reader = pair_reader(load_judge(args.judge, batch_size=args.batch_size))
    bank = QualityBank.empty(reader.identity)
    t0 = time.time()
    fill(bank, reader.readings, *zip(*trip), batch=1024,
         progress=lambda d, n: log.info("read %d / %d pairs (%.0f s)", d, n, time.time() - t0))
    bank.save(Path(args.out))
    log.info("%d pairs in %.0f s -> %s", len(bank), time.time() - t0, args.out)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _main()
