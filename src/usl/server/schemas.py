"""What goes over the wire: the request spec with its limits, and the documented response shapes.

These pydantic models are the OpenAPI schema (``/openapi.json``). The request limits are
``usl.leaderboard.limits.LIMITS``, the ones the CLI and the Python API check too, so the page, the
validation, the docs and the other doors cannot disagree.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, StringConstraints,
                      model_validator)
from pydantic_core import PydanticCustomError

from usl.leaderboard.limits import BLANK_CRITERION, LIMITS, InputError, Limits, check_text, few_resamples
from usl.leaderboard.types import RECORDED, recorded_criteria

__all__ = ["LIMITS", "Limits", "Criterion", "Name", "JudgeName", "SpecIn"]


def _utf8(text: str) -> str:
    """Text UTF-8 can encode: JSON's "\\ud800" escapes decode to lone surrogates, which would fail
    later, deep inside a judge or a cache key."""
    try:
        check_text(text, "text", len(text))
    except InputError as e:
        raise ValueError(e.problem) from None
    return text


def _words(text: str) -> str:
    """A criterion with words: a blank one is refused here as by the CLI and the Python API."""
    if not text.strip():
        raise PydanticCustomError("blank_criterion", BLANK_CRITERION)
    return text


def _resamples(n: int) -> int:
    """0 or enough resamples for an interval, as the CLI and the Python API take."""
    if 0 < n < LIMITS.min_bootstrap:
        raise PydanticCustomError("few_resamples", few_resamples(n))
    return n


Criterion = Annotated[str, StringConstraints(max_length=LIMITS.max_criterion_chars), AfterValidator(_utf8),
                      AfterValidator(_words)]
Name = Annotated[str, StringConstraints(max_length=LIMITS.max_name_chars), AfterValidator(_utf8)]
JudgeName = Annotated[str, StringConstraints(max_length=LIMITS.max_judge_chars), AfterValidator(_utf8)]


class SpecIn(BaseModel):
    """A leaderboard request. Empty ``likes`` and ``avoid`` mean the default (general) criteria;
    empty ``topics`` and ``use_case`` mean all queries; ``judge``/``benchmark``/``baseline`` left
    out mean the server's defaults. The spec a board records (``leaderboard.spec``: ``criteria`` as
    ``{"likes": [...], "avoid": [...]}``, with the versions that made the board) is taken as it is; the
    response then warns where the board made now differs in judge, data or queries."""

    model_config = ConfigDict(extra="forbid")
    _recorded: dict = PrivateAttr(default_factory=dict)

    likes: list[Criterion] = Field(default_factory=list, max_length=LIMITS.max_criteria,
                                   description="What the user likes, one criterion each.")
    avoid: list[Criterion] = Field(default_factory=list, max_length=LIMITS.max_criteria,
                                   description="What the user wants avoided, one criterion each.")
    topics: list[Name] = Field(default_factory=list, max_length=LIMITS.max_topics,
                              description="Topic ids (or names) to restrict the queries to.")
    use_case: Annotated[str, StringConstraints(max_length=LIMITS.max_use_case_chars), AfterValidator(_utf8)] = Field(
        "", description='Free text: "what do you use LLMs for"; selects matching queries.')
    judge: Optional[JudgeName] = Field(None, description="Judge spec; one the server allows.")
    baseline: Optional[Name] = Field(None, description="Model every other is compared with.")
    benchmark: Optional[Name] = Field(None, description="Benchmark name (GET /api/benchmarks).")
    per_criterion: bool = Field(True, description="Also judge each criterion alone (the breakdown): one more "
                                                  "board per criterion; false returns the board sooner.")
    n_bootstrap: Annotated[StrictInt, AfterValidator(_resamples)] = Field(
        1000, ge=0, le=LIMITS.max_bootstrap,
        description=f"Bootstrap resamples of the queries for the intervals: 0 (none) or {LIMITS.min_bootstrap} "
                    f"to {LIMITS.max_bootstrap:,}.")
    seed: StrictInt = Field(0, ge=0, le=LIMITS.max_seed, description="Seed of the bootstrap.")
    calibration: Optional[Name] = Field(None, description="Rank under this stored calibration of the judge "
                                                          "(POST /api/check/calibrate); the criteria must be the "
                                                          "ones it was fitted under.")

    @model_validator(mode="wrap")
    @classmethod
    def _board_spec(cls, data: Any, handler):
        """A board's recorded spec: its criteria as likes and avoid, its versions kept for ``recorded``."""
        if not (isinstance(data, dict) and "criteria" in data):
            return handler(data)
        if "likes" in data or "avoid" in data:
            raise PydanticCustomError("criteria", "criteria: give criteria or likes and avoid, not both")
        try:
            likes, avoid = recorded_criteria(data["criteria"])
        except ValueError as e:
            raise PydanticCustomError("criteria", str(e)) from None
        flat = {k: v for k, v in data.items() if k not in RECORDED and k != "criteria"}
        model = handler(flat | {"likes": likes, "avoid": avoid})
        model._recorded = {k: data[k] for k in RECORDED if k in data}
        return model

    @property
    def recorded(self) -> dict:
        """The versions a posted board spec recorded (empty for a plain request)."""
        return self._recorded


class RowOut(BaseModel):
    model: str
    rank: int = Field(description="1 + number of models significantly better (CI-aware).")
    win_rate: float = Field(description="Percent vs the baseline, ties half.")
    ci: Optional[list[float]] = Field(description="Bootstrap 95% CI of the win rate, percent [low, high]; null when "
                                                  "the board drew no resample (n_bootstrap 0).")
    n: int
    n_missing: int = 0
    topics: dict[str, float] = Field(default_factory=dict, description="Topic name -> win rate.")
    avg_length: float = Field(0.0, description="Average answer length, words.")
    lc_win_rate: Optional[float] = None
    rating: Optional[float] = None


class CriterionReadingOut(BaseModel):
    """How the judge reads one criterion (``usl.fast.criterion_kinds``)."""

    text: str
    kind: str = Field(description="length, style, domain, quality or correctness.")
    confidence: float = Field(description="The judge's probability of that kind.")
    accuracy: Optional[float] = Field(description="The judge's accuracy on held-out eval pairs of that kind.")
    n: int = Field(description="How many eval pairs that accuracy is measured on.")
    quality_share: float = Field(0.0, description="The criterion's share of the quality reading.")
    note: str = ""


class LeaderboardOut(BaseModel):
    spec: dict
    rows: list[RowOut]
    criteria_breakdown: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Criterion -> model -> win rate.")
    criteria_contribution: dict[str, float] = Field(
        default_factory=dict, description="Criterion -> share of the combined board it explains (sums to 1).")
    warnings: list[str] = Field(default_factory=list)
    criteria_reading: list[CriterionReadingOut] = Field(
        default_factory=list, description="How the judge reads each criterion, and how reliably it reads that kind.")


class Placement(BaseModel):
    """Where a model stands: ``position`` orders by win rate (1 = best); ``rank_low``..``rank_high``
    is the range of positions its win-rate CI allows."""

    model: str
    position: int
    rank_low: int
    rank_high: int
    default_position: Optional[int] = None
    default_rank_low: Optional[int] = None
    default_rank_high: Optional[int] = None
    default_win_rate: Optional[float] = None


class ComparisonOut(BaseModel):
    kendall_tau: Optional[float] = Field(description="Rank agreement with the default leaderboard.")
    spearman_rho: Optional[float] = None
    placements: list[Placement]


class LeaderboardResponse(BaseModel):
    leaderboard: LeaderboardOut
    comparison: ComparisonOut
    is_default: bool = Field(description="True when the request is the default leaderboard.")
    warnings: list[str] = Field(default_factory=list,
                                description="Contradicting criteria and other notes for the user.")
    query: str = Field(description="The spec as URL query parameters, for sharing and export.")


class TopicOut(BaseModel):
    id: str
    name: str
    n_queries: Optional[int] = None
    keywords: list[str] = Field(default_factory=list)


class ExampleOut(BaseModel):
    query_id: str
    query: str
    topic: str = ""
    model: str
    model_answer: str
    baseline: str
    baseline_answer: str
    p_model_wins: float = Field(description="Judge's probability that the model's answer is better.")
    verdict: Literal["model", "baseline", "tie"]


class ExamplesResponse(BaseModel):
    model: str
    criteria: list[str]
    examples: list[ExampleOut]


class ConfigOut(BaseModel):
    benchmark: str
    benchmarks: list[str]
    judge: str
    judges: list[str]
    reference: str = Field("", description="Judge that refines boards (/api/leaderboard/refine); '' = off.")
    default_criteria: list[str]
    limits: dict[str, int]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    benchmarks: int
