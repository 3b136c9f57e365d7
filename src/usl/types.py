"""Small typed records that stages exchange. No raw dicts cross module borders.

Everything here is a frozen dataclass: cheap to hash, safe to share between threads, and
impossible to mutate behind another stage's back.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal, get_args

Preference = Literal["model_a", "model_b", "tie"]
PREFERENCES: tuple[str, ...] = get_args(Preference)
Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = get_args(Role)


class DataError(ValueError):
    """Bad input data. The message names the file, line (1-based, when known) and field."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        loc = ":".join(str(x) for x in (path, f"line {line}" if line is not None else None) if x)
        parts = [p for p in (loc, f"field '{field}'" if field else "") if p]
        super().__init__(": ".join(parts + [message]))
        self.path, self.line, self.field = path, line, field


def parse_preference(value: object, *, path: str | None = None, line: int | None = None,
                     field: str = "preference") -> Preference:
    """Map a label onto the closed set. Unknown labels raise; they are never a silent tie."""
    if value in PREFERENCES:
        return value  # type: ignore[return-value]
    raise DataError(f"unknown preference {value!r}; expected one of {list(PREFERENCES)}",
                    path=path, line=line, field=field)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    source: str = ""
    topic_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Response:
    query_id: str
    model: str
    text: str


@dataclass(frozen=True)
class Benchmark:
    """A query set, the models that answered it, and the baseline every model is compared with."""

    name: str
    queries: tuple[Query, ...]
    models: tuple[str, ...]
    baseline: str
    version: str = ""  # content hash of queries + responses, recorded in every result


@dataclass(frozen=True)
class Criteria:
    """What one user likes and what they want avoided, in plain words."""

    likes: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()

    def deduplicated(self) -> "Criteria":
        """Whitespace-normalised, each criterion once whatever its case (its first spelling kept), in the
        user's order: "Be concise" and "be concise" are one wish, weighed once."""
        def once(xs: tuple[str, ...]) -> tuple[str, ...]:
            kept: dict[str, str] = {}
            for x in xs:
                text = " ".join(x.split())
                kept.setdefault(text.casefold(), text)
            return tuple(kept.values())
        return Criteria(once(self.likes), once(self.avoid))

    def canonical(self) -> "Criteria":
        """Whitespace-normalised, de-duplicated, order-free form: the cache key's basis."""
        norm = lambda xs: tuple(sorted({" ".join(x.split()) for x in xs if x.strip()}))
        return Criteria(norm(self.likes), norm(self.avoid))

    def key(self) -> str:
        c = self.canonical()
        blob = json.dumps({"likes": c.likes, "avoid": c.avoid}, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def as_list(self) -> list[str]:
        """Flatten to the paper's criteria list: dislikes become "Avoid: ..." lines."""
        return list(self.likes) + [f"Avoid: {a}" for a in self.avoid]


@dataclass(frozen=True)
class CriterionReading:
    """How a judge reads one criterion: its kind (length, style, domain, quality, correctness), how sure the
    judge is of that kind, the judge's measured accuracy on eval pairs of the kind (``n`` of them; None when
    unmeasured), the criterion's share of the quality reading, and a plain note where the kind is beyond it."""

    text: str
    kind: str
    confidence: float
    accuracy: float | None
    n: int
    quality_share: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class LengthWish:
    """A criterion read as a wish about answer length: ``criterion`` as the judge reads it (a dislike as
    "Avoid: ..."), the ``side`` it asks for, and ``p``, how sure the reading is that it is a length wish."""

    criterion: str
    side: Literal["shorter", "longer"]
    p: float


@dataclass(frozen=True)
class CriteriaReading:
    """How a judge reads a set of criteria: the one answer the engine takes for length control, the
    contradiction check, the per-criterion note beside a board and the vote check
    (``usl.judges.base.ReadsCriteria``). ``length`` holds, for each criterion in ``Criteria.as_list``
    order, the length wish the judge reads in it or None; ``notes`` the page's reading of each criterion.

    A judge that does not read criteria (``llm:``, ``length``) gives the default, ``CriteriaReading()``: no
    length wish, so length control stays on and no two criteria contradict on length; no notes; and no
    model is loaded to read them."""

    length: tuple[LengthWish | None, ...] = ()
    notes: tuple[CriterionReading, ...] = ()

    @property
    def length_wish(self) -> LengthWish | None:
        """The first length wish, or None: what turns length control off."""
        return next((w for w in self.length if w is not None), None)


@dataclass(frozen=True)
class PreferenceSample:
    """One item of the paper's JSONL: a prompt, two conversations, criteria and the preferred side.

    ``source`` names the file or family the sample came from (for per-file breakdowns);
    ``group`` ties together samples that are the same pair under different criteria.
    """

    idx: str
    prompt: str
    model_a: tuple[Message, ...]
    model_b: tuple[Message, ...]
    criteria: tuple[str, ...]
    preference: Preference
    source: str = ""
    group: str = ""
    meta: tuple[tuple[str, str], ...] = field(default=())

    @property
    def response_a(self) -> str:
        return _last_assistant(self.model_a)

    def meta_value(self, key: str, default=None):
        """An extra JSONL field, decoded (``meta`` keeps each value as JSON text)."""
        raw = dict(self.meta).get(key)
        return default if raw is None else json.loads(raw)

    @property
    def response_b(self) -> str:
        return _last_assistant(self.model_b)

    def swapped(self) -> "PreferenceSample":
        flip = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}
        return PreferenceSample(self.idx, self.prompt, self.model_b, self.model_a, self.criteria,
                                flip[self.preference], self.source, self.group, self.meta)  # type: ignore[arg-type]


def _last_assistant(messages: tuple[Message, ...]) -> str:
    for m in reversed(messages):
        if m.role == "assistant":
            return m.content
    return messages[-1].content if messages else ""
