"""One model's answers from a file, matched to a stored benchmark's queries by instruction text.

Reads AlpacaEval's ``model_outputs.json`` (a JSON list of ``{instruction, output, generator}``) or a
JSONL file of ``{"instruction": ..., "output": ...}`` lines (plain or gzipped). An instruction matches
a query when their texts are equal up to whitespace. What does not match is reported, never guessed:
``unmatched`` instructions the benchmark does not hold (AlpacaEval's training split, say), ``missing``
queries the file does not answer (or answers with an empty output), ``repeated`` instructions after
their first answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from usl.data.io import Fields, iter_jsonl, read_json
from usl.types import Benchmark, DataError, Response


@dataclass(frozen=True)
class ModelAnswers:
    """What a file says: the model's name (``generator``, else the file's name) and its answers."""

    name: str
    items: tuple[tuple[str, str | None], ...]      # (instruction, output or None)
    path: str


@dataclass(frozen=True)
class Matched:
    """``responses`` for the benchmark's queries; the rest as counts and the first few examples."""

    model: str
    responses: tuple[Response, ...]
    missing: tuple[str, ...]          # query ids without an answer
    unmatched: tuple[str, ...]        # instructions that are no query of the benchmark
    repeated: int                     # answers to an instruction already answered (first kept)

    def report(self, n_queries: int) -> list[str]:
        """Human-readable lines: matched, missing, unmatched (with an example), repeated."""
        lines = [f"{self.model}: {len(self.responses)} of {n_queries} queries answered"]
        if self.missing:
            lines.append(f"  missing: {len(self.missing)} queries without an answer (counted as missing, never as "
                         f"losses), e.g. query {self.missing[0]}")
        if self.unmatched:
            lines.append(f"  unmatched: {len(self.unmatched)} instructions are no query of this benchmark "
                         f"(skipped), e.g. {_short(self.unmatched[0])!r}")
        if self.repeated:
            lines.append(f"  repeated: {self.repeated} instructions answered twice (first answer kept)")
        return lines


def read_model_answers(path: str | Path) -> ModelAnswers:
    """``model_outputs.json`` (a JSON list) or JSONL; the format is told by the first character."""
    p = Path(path)
    if p.is_dir():
        raise DataError("a folder, not a file: name the model's outputs file", path=str(p))
    jsonl = p.name.endswith((".jsonl", ".jsonl.gz"))
    objects = ([(n, o) for n, o in iter_jsonl(p)] if jsonl else _json_list(p))
    items, generator = [], None
    for n, obj in objects:
        f = Fields(obj, path=str(p), line=n if jsonl else None, prefix="" if jsonl else f"[{n}].")
        instruction = f.string("instruction", nonempty=True)
        output = f.get("output", (str, type(None)))
        if generator is None and f.has("generator") and isinstance(obj["generator"], str):
            generator = obj["generator"].strip() or None
        items.append((instruction, output))
    if not items:
        raise DataError("no answers in the file", path=str(p))
    return ModelAnswers(generator or _stem(p), tuple(items), str(p))


def _json_list(p: Path) -> list[tuple[int, dict]]:
    data = read_json(p)
    if not isinstance(data, list):
        raise DataError("expected a JSON list of {instruction, output} (or a .jsonl file)", path=str(p))
    for i, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise DataError("expected an object", path=str(p), field=f"[{i}]")
    return list(enumerate(data))


def _stem(p: Path) -> str:
    name = p.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return p.parent.name if name == "model_outputs" and p.parent.name else name


def _norm(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, n: int = 60) -> str:
    text = _norm(text)
    return text if len(text) <= n else text[:n - 3] + "..."


def match_answers(benchmark: Benchmark, answers: ModelAnswers, model: str | None = None) -> Matched:
    """Match ``answers`` to ``benchmark``'s queries; raises when none matches (a file for other queries)."""
    name = (model or answers.name).strip()
    if not name:
        raise DataError("the model's name must not be empty", field="name")
    by_text = {_norm(q.text): q.id for q in benchmark.queries}
    seen: set[str] = set()
    responses, unmatched, repeated = [], [], 0
    for instruction, output in answers.items:
        qid = by_text.get(_norm(instruction))
        if qid is None:
            unmatched.append(instruction)
        elif qid in seen:
            repeated += 1
        else:
            seen.add(qid)
            if output is not None and output.strip():
                responses.append(Response(qid, name, output))
    if not responses:
        raise DataError(f"none of its {len(answers.items)} instructions answers a query of benchmark "
                        f"{benchmark.name!r} (a file for other instructions?); nothing was added", path=answers.path)
    have = {r.query_id for r in responses}
    missing = tuple(q.id for q in benchmark.queries if q.id not in have)
    return Matched(name, tuple(responses), missing, tuple(unmatched), repeated)
