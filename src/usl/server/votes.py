"""Check the judge on your own taste: pairs to vote on, the judge's agreement with the votes, export.

- ``GET /api/check/pairs?likes=..&topics=..&n=10``: pairs from the selected queries, a random model's
  answer beside the baseline's, in a random order (``model_first``); the judge's reading is not sent.
- ``POST /api/check/votes``: ``{"spec": {...as POST /api/leaderboard...}, "votes": [{query_id, model,
  model_first, choice: left|right|tie}]}`` stores the votes (SQLite, ``votes`` table) and answers the
  judge's agreement with them: overall and per criterion (Wilson 95% intervals), the pairs where they
  disagree, and a length criterion the votes show when the criteria do not say one. At most
  ``ServerConfig.votes_per_minute`` votes a minute per client (100; more: 429 with Retry-After).
- ``GET /api/check/export.jsonl``: every stored vote in the paper's JSONL (``usl eval --data FILE``).
- ``POST /api/check/calibrate``: ``{"spec": {...}, "name": "mine"}`` fits the calibration ``name`` on the stored
  votes under the spec's criteria (``usl.judges.calibration``) and answers its weights, the agreement with
  the votes before and after (leave-one-out) and the models it moved; ``spec.calibration = name`` then ranks
  under it. It counts as one vote against the client's rate.
- ``DELETE /api/check/votes?model=..``: deletes the stored votes (a model's, or all) and every calibration
  fitted on one of them.

``GET /api/check/pairs`` offers the pairs whose votes would tell a calibration the most
(``usl.leaderboard.calibrations.choose``); ``chosen=false`` draws them at random.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import asdict
from typing import Any, Callable, Literal, Optional

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from usl.judges.base import read_criteria
from usl.leaderboard.check import agreement, suggest_length
from usl.server.boards import USER_ERRORS, message
from usl.server.rates import WriteRate
from usl.server.schemas import Name, SpecIn
from usl.data.paper_jsonl import sample_to_dict
from usl.store.votes import Vote, delete_votes, save_votes, vote_samples

MAX_PAIRS = 20
MAX_VOTES = 50


class PairOut(BaseModel):
    query_id: str
    query: str
    topic: str = ""
    model: str = Field(description="Whose answer is one of the two (the other is the baseline's).")
    model_first: bool = Field(description="The model's answer is shown on the left.")
    left: str
    right: str


class VoteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query_id: str = Field(max_length=300)
    model: str = Field(max_length=300)
    model_first: bool
    choice: Literal["left", "right", "tie"]


class VotesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: SpecIn = Field(default_factory=SpecIn)
    votes: list[VoteIn] = Field(min_length=1, max_length=MAX_VOTES)


class AgreementOut(BaseModel):
    decided: int
    agree: int
    ties: int
    rate: Optional[float] = Field(None, description="Share of decided votes where the judge preferred the same answer.")
    ci: Optional[list[float]] = Field(None, description="Wilson 95% interval of the rate.")


class DisagreementOut(BaseModel):
    query_id: str
    query: str
    model: str
    you: Literal["model", "baseline"]
    judge_p_model: float = Field(description="The judge's P(the model's answer wins).")


class CheckOut(BaseModel):
    judge: str
    stored: int
    agreement: AgreementOut
    per_criterion: dict[str, AgreementOut] = Field(default_factory=dict)
    disagreements: list[DisagreementOut]
    suggestion: Optional[str] = Field(None, description="A criterion your votes show that you did not write.")


class CalibrateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: SpecIn = Field(default_factory=SpecIn)
    name: Name = Field("mine", min_length=1, description="The calibration's name (refitted if stored).")


class TermOut(BaseModel):
    term: str = Field(description="A term of the judge's decision: a criterion, the quality reading, the "
                                  "answers' own quality, length or lists.")
    shipped: float
    fitted: float


class MovedOut(BaseModel):
    model: str
    before: int = Field(description="Place by win rate under the shipped judge (1: first).")
    after: int = Field(description="Place by win rate under the calibrated judge.")
    win_rate_before: float
    win_rate_after: float


class CalibrationOut(BaseModel):
    name: str
    version: str = Field(description="Hash of judge, benchmark, criteria and weights; boards record it.")
    judge: str
    votes: int
    before: Optional[float] = Field(None, description="The shipped judge's agreement with the decided votes.")
    after: Optional[float] = Field(None, description="The calibrated judge's, by leave-one-out: each vote "
                                                     "predicted by the weights fitted on the others.")
    terms: list[TermOut]
    moved: list[MovedOut]


class DeletedOut(BaseModel):
    votes: int
    calibrations: list[str] = Field(description="The calibrations deleted with the votes.")


def router(boards: Any, spec_query: Callable[..., SpecIn], rate: WriteRate) -> APIRouter:
    """The routes; ``rate`` bounds the votes one client may store a minute (429 beyond it)."""
    api = APIRouter(tags=["check the judge"])
    service = boards.service

    @api.get("/api/check/pairs", response_model=list[PairOut], summary="Pairs of answers to vote on")
    async def pairs(s: SpecIn = Depends(spec_query), n: int = Query(10, ge=1, le=MAX_PAIRS),
                    seed: Optional[int] = Query(None, description="Fixes the draw (default: a new one each time)."),
                    chosen: bool = Query(True, description="Pairs whose votes tell a calibration the most "
                                                           "(false: at random).")):
        spec = await boards.resolve(s)
        seed = random.SystemRandom().randrange(2 ** 32) if seed is None else seed
        found = await _call(service.vote_pairs, spec, n, seed, chosen)
        flips = random.Random(seed)
        out = []
        for x in found:
            first = flips.random() < 0.5
            left, right = (x.model_answer, x.baseline_answer) if first else (x.baseline_answer, x.model_answer)
            out.append(PairOut(query_id=x.query_id, query=x.query, topic=x.topic, model=x.model, model_first=first,
                               left=left, right=right))
        return out

    @api.post("/api/check/votes", response_model=CheckOut, summary="Store votes; the judge's agreement with them")
    async def votes(body: VotesIn) -> dict:
        rate.take(len(body.votes))         # before any work: a refused write costs nothing
        spec = await boards.resolve(body.spec)
        keys = [(v.query_id, v.model) for v in body.votes]
        probs = await _call(service.pair_probabilities, spec, keys)
        data = await _call(service.answers, spec.benchmark)
        judge = await _call(service.judge, spec.judge)
        baseline = spec.baseline or data.benchmark.baseline
        choices = [_choice(v) for v in body.votes]

        stored = [Vote(spec.benchmark, v.query_id, data.query_text[v.query_id], v.model,
                       data.responses[(v.query_id, v.model)], baseline, data.responses[(v.query_id, baseline)],
                       spec.criteria, c, v.model_first, judge.identity, p)
                  for v, c, p in zip(body.votes, choices, probs[""])]
        await asyncio.to_thread(save_votes, service.store, stored)
        wish = (await asyncio.to_thread(read_criteria, judge, spec.criteria)).length_wish  # as the judge reads them
        words = lambda text: len(text.split())
        return {
            "judge": judge.identity, "stored": len(stored),
            "agreement": _out(agreement(choices, probs[""])),
            "per_criterion": {label: _out(agreement(choices, p)) for label, p in probs.items() if label},
            "disagreements": [{"query_id": v.query_id, "query": data.query_text[v.query_id], "model": v.model,
                               "you": c, "judge_p_model": round(p, 3)}
                              for v, c, p in zip(body.votes, choices, probs[""])
                              if c != "tie" and p != 0.5 and (c == "model") != (p > 0.5)],
            "suggestion": suggest_length(choices, [words(v.model_answer) for v in stored],
                                         [words(v.baseline_answer) for v in stored],
                                         mentioned=wish is not None),
        }

    @api.post("/api/check/calibrate", response_model=CalibrationOut,
              summary="Fit your calibration of the judge on your stored votes under these criteria")
    async def calibrate(body: CalibrateIn) -> dict:
        rate.take(1)                       # a stored calibration is a write: it counts as a vote
        spec = await boards.resolve(body.spec.model_copy(update={"calibration": None}))
        report = await _call(service.calibrate, body.name, spec)
        c = report.calibration
        return {"name": c["name"], "version": c["version"], "judge": c["judge"], "votes": c["votes"],
                "before": c["before"], "after": c["after"],
                "terms": [{"term": t, "shipped": w0, "fitted": round(w, 3)}
                          for t, w0, w in zip(c["terms"], c["shipped"], c["weights"])],
                "moved": [asdict(m) for m in report.moved]}

    @api.delete("/api/check/votes", response_model=DeletedOut,
                summary="Delete stored votes and every calibration fitted on one of them")
    async def delete(model: Optional[str] = Query(None, max_length=300, description="Only this model's votes."),
                     benchmark: Optional[str] = Query(None, max_length=300)) -> dict:
        n, gone = await asyncio.to_thread(delete_votes, service.store, benchmark, model)
        return {"votes": n, "calibrations": gone}

    @api.get("/api/check/export.jsonl", summary="Every stored vote in the paper's JSONL (for usl eval)",
             response_class=Response, responses={200: {"content": {"application/x-ndjson": {}}}})
    async def export() -> Response:
        samples = await asyncio.to_thread(vote_samples, service.store)
        body = "".join(json.dumps(sample_to_dict(s), ensure_ascii=False) + "\n" for s in samples)
        return Response(body, media_type="application/x-ndjson",
                        headers={"Content-Disposition": 'attachment; filename="usl_votes.jsonl"'})

    return api


def _choice(v: VoteIn) -> str:
    if v.choice == "tie":
        return "tie"
    return "model" if (v.choice == "left") == v.model_first else "baseline"


def _out(a) -> dict:
    return {"decided": a.decided, "agree": a.agree, "ties": a.ties,
            "rate": None if a.rate is None else round(a.rate, 3),
            "ci": None if a.ci is None else [round(a.ci[0], 3), round(a.ci[1], 3)]}


async def _call(fn, *args):
    try:
        return await asyncio.to_thread(fn, *args)
    except USER_ERRORS as e:
        raise HTTPException(422, message(e)) from e
