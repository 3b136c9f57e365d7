"""Arena-Hard / MT-Bench style folders: ``question.jsonl`` plus ``model_answer/<model>.jsonl``.

Questions carry ``question_id`` (or ``uid``) and either ``turns`` (strings or ``{content}``) or a
``prompt``. Answers carry the same id and either ``choices[0].turns`` (strings or ``{content}``;
MT-Bench, arena-hard v0.1) or ``messages`` (arena-hard v2; an assistant ``content`` may be an
object with ``answer``). The judged text is the last assistant turn; a multi-turn question's text
is its user turns joined by blank lines. Files may be gzipped (``*.jsonl.gz``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from usl.data.imported import Imported, count_missing
from usl.data.io import Fields, iter_jsonl
from usl.types import Benchmark, DataError, Query, Response

log = logging.getLogger(__name__)
# Conventional baselines of the public Arena-Hard releases; the first one present is used.
KNOWN_BASELINES = ("gpt-4-0314", "o3-mini-2025-01-31", "gpt4_1106_preview")


def _one(folder: Path, stem: str) -> Path:
    for suffix in (".jsonl", ".jsonl.gz"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    raise DataError(f"missing {stem}.jsonl (or .jsonl.gz)", path=str(folder))


def _turn_text(value: object, f: Fields, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "answer"):
            if isinstance(value.get(key), str):
                return value[key]
            if isinstance(value.get(key), dict):
                return _turn_text(value[key], f, field)
    raise f.error(field, "expected a string or an object with 'content'")


def read_questions(path: Path) -> list[Query]:
    out, seen = [], {}
    for n, obj in iter_jsonl(path):
        f = Fields(obj, path=str(path), line=n)
        qid = f.ident("question_id" if "question_id" in obj else "uid")
        if qid in seen:
            raise DataError(f"duplicate question id {qid!r} (first on line {seen[qid]})",
                            path=str(path), line=n, field="question_id")
        seen[qid] = n
        if "turns" in obj:
            turns = f.get("turns", list)
            if not turns:
                raise f.error("turns", "must not be an empty list")
            text = "\n\n".join(_turn_text(t, f, f"turns[{i}]") for i, t in enumerate(turns))
        else:
            text = f.string("prompt", nonempty=True)
        source = next((obj[k] for k in ("subcategory", "cluster", "category") if isinstance(obj.get(k), str)), "")
        out.append(Query(qid, text, source))
    if not out:
        raise DataError("no questions", path=str(path))
    return out


def read_answers(path: Path) -> tuple[str, dict[str, str]]:
    """(model name, {question_id: last assistant text}); empty answers are left out."""
    model = path.name.split(".jsonl")[0]
    answers: dict[str, str] = {}
    for n, obj in iter_jsonl(path):
        f = Fields(obj, path=str(path), line=n)
        qid = f.ident("question_id" if "question_id" in obj else "uid")
        if "choices" in obj:
            choices = f.get("choices", list)
            if not choices or not isinstance(choices[0], dict):
                raise f.error("choices", "expected a non-empty list of {turns}")
            turns = Fields(choices[0], path=str(path), line=n, prefix="choices[0].").get("turns", list)
            texts = [_turn_text(t, f, f"choices[0].turns[{i}]") for i, t in enumerate(turns)]
        else:
            msgs = f.get("messages", list)
            texts = [_turn_text(m.get("content"), f, f"messages[{i}].content")
                     for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "assistant"]
        if texts and texts[-1].strip() and qid not in answers:
            answers[qid] = texts[-1]
    return model, answers


def load_arena(source: str | Path, *, baseline: str | None = None, name: str | None = None) -> Imported:
    root = Path(source)
    if not root.is_dir():
        raise DataError("no such folder", path=str(root))
    queries = read_questions(_one(root, "question"))
    files = sorted(p for p in (root / "model_answer").glob("*.jsonl*") if p.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        raise DataError("no model_answer/*.jsonl files", path=str(root))
    known = {q.id for q in queries}
    responses, notes, models = [], [], []
    for p in files:
        model, answers = read_answers(p)
        if model in models:
            raise DataError(f"two answer files for model {model!r}", path=str(p))
        models.append(model)
        stray = sorted(set(answers) - known)
        if stray:
            notes.append(f"{model}: {len(stray)} answer(s) to unknown questions skipped")
        responses += [Response(q.id, model, answers[q.id]) for q in queries if q.id in answers]
    if baseline is None:
        counts = {m: sum(r.model == m for r in responses) for m in models}
        baseline = next((b for b in KNOWN_BASELINES if b in models), None) or \
            min(models, key=lambda m: (-counts[m], m))  # else the most complete model
    if baseline not in models:
        raise DataError(f"baseline {baseline!r} has no answer file (models: {', '.join(models)})", path=str(root))
    bench = Benchmark(name or root.name, tuple(queries), tuple(sorted(models, key=str.casefold)), baseline)
    resp = tuple(responses)
    return Imported(bench, resp, f"arena:{root}", count_missing(bench, resp), tuple(notes))
