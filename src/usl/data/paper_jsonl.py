"""The paper's preference JSONL (Jia et al. 2025), read strictly and written back.

One line is one sample::

    {"idx": 7, "prompt": "...", "model_a": [{"role": "user", "content": "..."},
     {"role": "assistant", "content": "..."}], "model_b": [...],
     "criteria": ["Prefers concise answers"], "preference": "model_a"}

``preference`` is one of ``model_a`` / ``model_b`` / ``tie``. Conversations may hold several
turns; the judged response is the last assistant turn. ``prompt`` may be left out when the first
user message says it. Optional ``source`` and ``group`` are kept; other extra keys go to ``meta``.

The reference code's variant instead carries ``a_criteria`` (criteria under which model_a wins),
``b_criteria`` (under which model_b wins) and ``human_winner``. It is expanded into up to two
samples: ``a_criteria`` with preference ``model_a`` (idx ``"<idx>:a"``) and ``b_criteria`` with
``model_b`` (idx ``"<idx>:b"``), both in group ``<idx>``. A ``tie`` keeps both lists in one
sample labelled ``tie``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterable

from usl.data.io import Fields, iter_jsonl, open_write
from usl.types import ROLES, DataError, Message, PreferenceSample, parse_preference

log = logging.getLogger(__name__)

CORE_KEYS = ("idx", "prompt", "model_a", "model_b", "criteria", "preference", "source", "group")
VARIANT_KEYS = ("a_criteria", "b_criteria", "human_winner")


def read_samples(path: str | Path) -> list[PreferenceSample]:
    """Read a ``.jsonl`` or ``.jsonl.gz`` file. Any bad line raises ``DataError``; nothing partial."""
    samples: list[PreferenceSample] = []
    first_line: dict[str, int] = {}
    for n, obj in iter_jsonl(path):
        for s in _parse_line(obj, str(path), n):
            if s.idx in first_line:
                raise DataError(f"duplicate idx {s.idx!r} (first on line {first_line[s.idx]})",
                                path=str(path), line=n, field="idx")
            first_line[s.idx] = n
            samples.append(s)
    log.debug("read %d samples from %s", len(samples), path)
    return samples


def write_samples(path: str | Path, samples: Iterable[PreferenceSample]) -> int:
    """Write samples in the paper's format (gzipped for ``*.gz``); returns how many were written."""
    n = 0
    with open_write(path) as f:
        for s in samples:
            f.write(json.dumps(sample_to_dict(s), ensure_ascii=False) + "\n")
            n += 1
    return n


def sample_to_dict(s: PreferenceSample) -> dict:
    d: dict = {"idx": s.idx, "prompt": s.prompt,
               "model_a": [{"role": m.role, "content": m.content} for m in s.model_a],
               "model_b": [{"role": m.role, "content": m.content} for m in s.model_b],
               "criteria": list(s.criteria), "preference": s.preference}
    if s.source:
        d["source"] = s.source
    if s.group:
        d["group"] = s.group
    for k, v in s.meta:
        d.setdefault(k, json.loads(v))
    return d


def _parse_line(obj: dict, path: str, line: int) -> list[PreferenceSample]:
    f = Fields(obj, path=path, line=line)
    idx = f.ident("idx")
    model_a = _messages(f, "model_a")
    model_b = _messages(f, "model_b")
    prompt = _prompt(f, model_a)
    source = f.string("source") if f.has("source") else ""
    group = f.ident("group") if f.has("group") else ""
    known = set(CORE_KEYS) | set(VARIANT_KEYS)
    meta = tuple(sorted((k, json.dumps(v, ensure_ascii=False, sort_keys=True))
                        for k, v in obj.items() if k not in known))

    def make(i: str, criteria: tuple[str, ...], pref: str, grp: str) -> PreferenceSample:
        return PreferenceSample(i, prompt, model_a, model_b, criteria, pref, source, grp, meta)  # type: ignore[arg-type]

    is_variant = "criteria" not in obj and any(k in obj for k in VARIANT_KEYS)
    if not is_variant:
        criteria = f.string_list("criteria")
        return [make(idx, criteria, _label(f, "preference"), group)]

    winner = _label(f, "human_winner")
    a = f.string_list("a_criteria", nonempty=False) if f.has("a_criteria") else ()
    b = f.string_list("b_criteria", nonempty=False) if f.has("b_criteria") else ()
    if not a and not b:
        raise f.error("a_criteria", "a_criteria and b_criteria are both empty: no criteria to learn from")
    if winner == "tie":
        return [make(idx, a + b, "tie", group)]
    grp = group or idx
    out = []
    if a:
        out.append(make(f"{idx}:a", a, "model_a", grp))
    if b:
        out.append(make(f"{idx}:b", b, "model_b", grp))
    return out


def _label(f: Fields, field: str) -> str:
    if field not in f.obj:
        raise f.error(field, "missing field")
    return parse_preference(f.obj[field], path=f.path, line=f.line, field=field)


def _messages(f: Fields, field: str) -> tuple[Message, ...]:
    items = f.get(field, list)
    if not items:
        raise f.error(field, "must not be an empty list")
    out = []
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise f.error(f"{field}[{i}]", "expected a message object {role, content}")
        mf = Fields(m, path=f.path, line=f.line, prefix=f"{field}[{i}].")
        role = mf.string("role")
        if role not in ROLES:
            raise mf.error("role", f"unknown role {role!r}; expected one of {list(ROLES)}")
        out.append(Message(role, mf.string("content")))  # type: ignore[arg-type]
    if not any(m.role == "assistant" for m in out):
        raise f.error(field, "no assistant message: nothing to judge")
    return tuple(out)


def _prompt(f: Fields, model_a: tuple[Message, ...]) -> str:
    if f.has("prompt"):
        return f.string("prompt", nonempty=True)
    for m in model_a:
        if m.role == "user" and m.content.strip():
            return m.content
    raise f.error("prompt", "missing field, and model_a has no user message to take it from")
