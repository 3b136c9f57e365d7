"""Rewards over HTTP for training loops: ``POST /api/reward`` and OpenRLHF's ``POST /get_reward``.

Both score responses under a user's criteria with one of the server's judges, reduced to one reward
per response as ``usl.judges.reward`` documents (log-odds against a reference answer, else the mean
log-odds against the other responses to the same prompt).

- ``/api/reward``: ``{"criteria": {"likes": [...], "avoid": [...]}, "items": [{"prompt", "responses",
  "reference"?}], "pairwise": false}`` -> ``{"rewards": [[...] per item], "pairwise"?, "vs_reference"?}``.
- ``/get_reward``: the remote reward model protocol OpenRLHF calls (``--remote_rm_url``): ``{"query":
  [prompt + response, ...], "prompts": [prompt, ...], "labels": [reference, ...]}`` -> ``{"rewards":
  [...], "scores": [...]}``. Each query is split into its prompt (the given prefix) and the response;
  queries of one prompt form a group. The criteria come as URL parameters (``?likes=..&avoid=..``),
  as OpenRLHF sends only the body it builds. ``labels`` that are empty strings are no reference.

Work a request starts is bounded and owned by it (``RewardLimits``): at most ``max_pairs`` pairs (both
orders counted once; more is a 422 that says to split the batch), judged ``chunk_pairs`` at a time on
a fair queue of its own (``usl.server.scheduler.FairQueue``: one worker, since a judge holds caches
that are not shared between threads; turns taken client by client; ``max_pending`` slices may wait,
beyond that the answer is 503 with Retry-After). A client that leaves stops its request after the
slice running: the rest is never judged. Not the boards' queue: a reward slice of new text can take
seconds (the default judge reads each new pair with a transformer), and a board must not wait on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any, Optional

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from usl.judges.reward import RewardItem, pair_requests, rewards_of
from usl.server.boards import served_judge
from usl.server.scheduler import FairQueue
from usl.server.schemas import LIMITS, Criterion, JudgeName
from usl.types import Criteria
from usl.leaderboard.types import LeaderboardSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardLimits:
    max_items: int = 256            # prompts per request
    max_responses: int = 16         # responses per prompt (pairs grow as n^2)
    max_pairs: int = 256            # judged pairs per request, both orders counted once
    max_text_chars: int = 32_000    # prompt, response or reference
    chunk_pairs: int = 8            # pairs judged between two checks that the client is still there
    max_pending: int = 8            # slices waiting (of any requests) beside the one being judged
    max_pending_per_client: int = 4


REWARD_LIMITS = RewardLimits()
Text = Annotated[str, StringConstraints(max_length=REWARD_LIMITS.max_text_chars)]


class CriteriaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    likes: list[Criterion] = Field(default_factory=list, max_length=LIMITS.max_criteria)
    avoid: list[Criterion] = Field(default_factory=list, max_length=LIMITS.max_criteria)


class RewardItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: Text
    responses: list[Text] = Field(min_length=1, max_length=REWARD_LIMITS.max_responses)
    reference: Optional[Text] = Field(None, description="An answer to score each response against.")


class RewardIn(BaseModel):
    """Empty criteria mean the default (general) criteria."""

    model_config = ConfigDict(extra="forbid")
    criteria: CriteriaIn = Field(default_factory=CriteriaIn)
    items: list[RewardItemIn] = Field(min_length=1, max_length=REWARD_LIMITS.max_items)
    pairwise: bool = Field(False, description="Also return P(response i beats response j) per item.")
    judge: Optional[JudgeName] = Field(None, description="Judge spec; one the server allows (default: its first).")


class RewardOut(BaseModel):
    judge: str = Field(description="The judge's identity (name@version).")
    rewards: list[list[float]] = Field(description="Per item, one reward per response.")
    pairwise: Optional[list[list[list[float]]]] = Field(None, description="Per item, P(i beats j).")
    vs_reference: Optional[list[list[float]]] = Field(None, description="Per item with a reference, "
                                                                        "P(response beats the reference).")


class OpenRLHFIn(BaseModel):
    """OpenRLHF's remote reward model body; fields it may add (``metadata``...) are ignored."""

    model_config = ConfigDict(extra="ignore")
    query: list[Text] = Field(min_length=1, max_length=REWARD_LIMITS.max_items * REWARD_LIMITS.max_responses)
    prompts: Optional[list[Text]] = None
    labels: Optional[list[Optional[Text]]] = None


class OpenRLHFOut(BaseModel):
    rewards: list[float]
    scores: list[float] = Field(description="The same numbers (newer OpenRLHF reads 'scores').")


def reward_queue(limits: RewardLimits = REWARD_LIMITS) -> FairQueue:
    """The queue reward slices take turns on (the app shuts it down with the others)."""
    return FairQueue(1, limits.max_pending, limits.max_pending_per_client, "usl-reward")


def router(service: Any, judges: tuple[str, ...], queue: FairQueue, limits: RewardLimits = REWARD_LIMITS) -> APIRouter:
    """The reward routes over ``service.judge(spec)``; ``judges``: the specs a request may name;
    ``queue``: where their slices run (``reward_queue``)."""
    api = APIRouter(tags=["reward"])

    async def score(spec: str | None, criteria: Criteria, items: list[RewardItem], pairwise: bool):
        pairs = sum(_pair_count(it, pairwise) for it in items)
        if pairs > limits.max_pairs:
            raise HTTPException(422, f"items: {pairs} pairs to judge, more than {limits.max_pairs} a request; "
                                     "split the batch")
        name = served_judge(spec, judges)
        judge = await queue.run(service.judge, name)          # loading a judge takes a turn too
        requests, verdicts = pair_requests(criteria, items, pairwise), []
        step = 2 * limits.chunk_pairs                        # both orders of chunk_pairs pairs
        for start in range(0, len(requests), step):          # a client that left is cancelled at an await
            verdicts += await queue.run(judge.judge, requests[start:start + step])
        return judge, rewards_of(items, verdicts, pairwise)

    @api.post("/api/reward", response_model=RewardOut, summary="Rewards for responses under your criteria",
              description="One reward per response: log-odds of beating the reference when given, else the mean "
                          "log-odds of beating the other responses to the same prompt (docs/reward.md).")
    async def reward(body: RewardIn) -> dict:
        items = [RewardItem(it.prompt, tuple(it.responses), it.reference) for it in body.items]
        judge, results = await score(body.judge, _criteria(body.criteria.likes, body.criteria.avoid), items,
                                     body.pairwise)
        out: dict = {"judge": judge.identity, "rewards": [list(r.rewards) for r in results]}
        if body.pairwise:
            out["pairwise"] = [[list(row) for row in r.pairwise] for r in results]
        if any(r.vs_reference is not None for r in results):
            out["vs_reference"] = [list(r.vs_reference or ()) for r in results]
        return out

    @api.post("/get_reward", response_model=OpenRLHFOut, summary="OpenRLHF's remote reward model protocol",
              description="Body {query: [prompt + response], prompts: [prompt], labels: [reference]}; criteria "
                          "as URL parameters likes=..&avoid=.. (docs/reward.md).")
    async def get_reward(body: OpenRLHFIn, likes: list[Criterion] = Query([], max_length=LIMITS.max_criteria),
                         avoid: list[Criterion] = Query([], max_length=LIMITS.max_criteria),
                         judge: Optional[str] = Query(None, max_length=LIMITS.max_judge_chars)) -> dict:
        items, where = _openrlhf_items(body)
        _, results = await score(judge, _criteria(likes, avoid), items, False)
        rewards = [0.0] * len(body.query)
        for positions, r in zip(where, results):
            for i, v in zip(positions, r.rewards):
                rewards[i] = v
        return {"rewards": rewards, "scores": rewards}

    return api


def _criteria(likes: list[str], avoid: list[str]) -> Criteria:
    likes, avoid = [c.strip() for c in likes], [c.strip() for c in avoid]   # none blank: the schema refuses them
    return Criteria(tuple(likes), tuple(avoid)) if likes or avoid else LeaderboardSpec().criteria


def _pair_count(it: RewardItem, pairwise: bool) -> int:
    n = len(it.responses)
    return (n if it.reference is not None else 0) + (n * (n - 1) // 2 if it.reference is None or pairwise else 0)


def _openrlhf_items(body: OpenRLHFIn) -> tuple[list[RewardItem], list[list[int]]]:
    """Group the queries by (prompt, reference); each query's response is what follows its prompt."""
    n = len(body.query)
    if body.prompts is None:
        raise HTTPException(422, "prompts: needed to split each query into its prompt and response (OpenRLHF "
                                 "sends them)")
    for field in ("prompts", "labels"):
        given = getattr(body, field)
        if given is not None and len(given) != n:
            raise HTTPException(422, f"{field}: {len(given)} given for {n} queries; give one per query")
    groups: dict[tuple[str, str | None], list[int]] = {}
    responses: list[str] = []
    for i, q in enumerate(body.query):
        prompt = body.prompts[i]
        if not q.startswith(prompt):
            raise HTTPException(422, f"query[{i}]: does not start with prompts[{i}]; OpenRLHF sends the prompt "
                                     "followed by the response")
        responses.append(q[len(prompt):])
        label = body.labels[i] if body.labels is not None else None
        groups.setdefault((prompt, label or None), []).append(i)
    if any(len(v) > REWARD_LIMITS.max_responses for (_, ref), v in groups.items() if ref is None):
        raise HTTPException(422, f"query: more than {REWARD_LIMITS.max_responses} responses to one prompt without "
                                 "a reference; split the batch or give labels")
    items = [RewardItem(prompt, tuple(responses[i] for i in idx), ref) for (prompt, ref), idx in groups.items()]
    return items, list(groups.values())
