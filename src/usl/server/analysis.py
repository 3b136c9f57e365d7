"""How far boards agree: two criteria sets' boards (``usl compare``) and a board against a published one
(``usl rank --reference``). The CLI and the Python API ask a running server for these
(``usl.leaderboard.remote``) so that they answer without loading the judge; the figures are the
engine's, as ``LeaderboardService.compare`` and ``reference_agreement`` give them in-process.

- ``POST /api/compare``: ``{"a": spec, "b": spec}`` (each as ``POST /api/leaderboard`` takes it) ->
  both boards, Kendall's tau and Spearman's rho over the models on both, and each set's contradiction
  warnings prefixed ``A:`` / ``B:``.
- ``POST /api/reference?name=alpaca_eval_2``: a spec -> ``{name, n_models, spearman_rho, kendall_tau,
  models}`` with percentile intervals over the board's query resamples (``spearman_rho_ci``...).
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from usl.judges.redact import public_judge
from usl.leaderboard import stats
from usl.leaderboard.names import check_reference
from usl.leaderboard.reference import load_reference
from usl.leaderboard.types import Leaderboard
from usl.server.boards import USER_ERRORS, finite, message
from usl.server.schemas import LeaderboardOut, SpecIn


class CompareIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: SpecIn
    b: SpecIn


class CompareOut(BaseModel):
    a: LeaderboardOut
    b: LeaderboardOut
    kendall_tau: Optional[float] = Field(description="Kendall's tau-b of the two boards' win rates.")
    spearman_rho: Optional[float]
    warnings: list[str] = Field(description="Contradictions within each set, prefixed 'A: ' or 'B: '.")


class ReferenceOut(BaseModel):
    name: str
    n_models: int = Field(description="Models on both boards.")
    spearman_rho: Optional[float]
    kendall_tau: Optional[float]
    models: list[str]
    spearman_rho_ci: Optional[list[float]] = Field(None, description="95% interval over the query resamples.")
    kendall_tau_ci: Optional[list[float]] = None


def router(boards: Any) -> APIRouter:
    api = APIRouter(tags=["leaderboard"])

    @api.post("/api/compare", response_model=CompareOut, summary="Two criteria sets' boards and their agreement")
    async def compare(body: CompareIn) -> dict:
        sa, sb = await boards.resolve(body.a), await boards.resolve(body.b)
        la, lb, wa, wb = await asyncio.gather(boards.ranked(sa), boards.ranked(sb),
                                              boards.contradictions(sa.criteria, sa.judge),
                                              boards.contradictions(sb.criteria, sb.judge))
        a, b = ({r.model: r.win_rate for r in board.rows} for board in (la, lb))
        try:
            tau, rho = stats.kendall_tau(a, b), stats.spearman_rho(a, b)
        except ValueError as e:
            raise HTTPException(422, str(e)) from e
        return finite({"a": board_json(la), "b": board_json(lb), "kendall_tau": tau, "spearman_rho": rho,
                       "warnings": [f"A: {w}" for w in wa] + [f"B: {w}" for w in wb]})

    @api.post("/api/reference", response_model=ReferenceOut, response_model_exclude_none=True,
              summary="Rank correlation of a board with a published one (AlpacaEval)")
    async def reference(body: SpecIn, name: str = Query(..., max_length=100,
                                                         description="alpaca_eval_2, alpaca_eval_2_raw or "
                                                                     "alpaca_eval_1.")) -> dict:
        try:
            check_reference(name)
        except ValueError as e:
            raise HTTPException(422, str(e)) from e
        spec = await boards.resolve(body)
        await boards.ranked(spec)                  # the judgments the agreement's intervals resample
        try:
            ref = await asyncio.to_thread(load_reference, name)
            found = await boards.queue.run(boards.service.reference_agreement, spec, ref)
        except USER_ERRORS as e:
            raise HTTPException(422, message(e)) from e
        return finite({"name": name, **found})

    return api


def board_json(board: Leaderboard) -> dict:
    """A board as the API shows it: the judge spec public (no key or host a spec may hold)."""
    out = board.to_json()
    out["spec"] = {**out["spec"], "judge": public_judge(str(out["spec"].get("judge", "")))}
    return out
