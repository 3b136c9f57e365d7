"""Arena-Hard / MT-Bench folders: both answer formats, gz, missing answers, bad lines."""

from __future__ import annotations

import gzip
import json

import pytest

from usl import paths
from usl.data.arena import load_arena
from usl.types import DataError


def jsonl(path, rows, gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


def arena_folder(root):
    jsonl(root / "question.jsonl", [
        {"question_id": "q1", "category": "writing", "turns": ["Write a haiku."]},
        {"question_id": "q2", "cluster": "Math", "turns": [{"content": "2+2?"}, {"content": "And 3+3?"}]},
        {"uid": "q3", "category": "hard_prompt", "subcategory": "coding", "prompt": "Sort a list."},
    ], gz=True)
    jsonl(root / "model_answer" / "gpt-4-0314.jsonl", [  # MT-Bench / v0.1 style
        {"question_id": "q1", "model_id": "gpt-4-0314", "choices": [{"index": 0, "turns": ["Leaves fall."]}]},
        {"question_id": "q2", "choices": [{"turns": [{"content": "4"}, {"content": "6"}]}]},
        {"question_id": "q3", "choices": [{"turns": ["sorted(x)"]}]},
    ])
    jsonl(root / "model_answer" / "small.jsonl", [  # v2 style, one empty answer and one absent
        {"uid": "q1", "messages": [{"role": "user", "content": "Write a haiku."},
                                   {"role": "assistant", "content": {"answer": "Snow."}}]},
        {"uid": "q2", "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": ""}]},
        {"uid": "zz", "messages": [{"role": "assistant", "content": "stray"}]},
    ], gz=True)
    return root


def test_reads_both_formats(tmp_path):
    imp = load_arena(arena_folder(tmp_path / "bench"))
    b = imp.benchmark
    assert b.name == "bench" and b.baseline == "gpt-4-0314" and b.models == ("gpt-4-0314", "small")
    assert [(q.id, q.source) for q in b.queries] == [("q1", "writing"), ("q2", "Math"), ("q3", "coding")]
    assert b.queries[1].text == "2+2?\n\nAnd 3+3?"
    got = {(r.query_id, r.model): r.text for r in imp.responses}
    assert got == {("q1", "gpt-4-0314"): "Leaves fall.", ("q2", "gpt-4-0314"): "6",
                   ("q3", "gpt-4-0314"): "sorted(x)", ("q1", "small"): "Snow."}
    assert imp.missing == (("small", 2),)
    assert any("unknown questions" in n for n in imp.notes)


@pytest.mark.parametrize("edit, pattern", [
    (lambda r: (r / "question.jsonl.gz").unlink(), r"missing question\.jsonl"),
    (lambda r: jsonl(r / "model_answer" / "small.jsonl", [{"uid": "q1", "messages": "hi"}], gz=True),
     r"small\.jsonl\.gz:line 1: field 'messages': expected a list"),
    (lambda r: (r / "model_answer" / "gpt-4-0314.jsonl").write_text('{"question_id": "q1", "choi\n'),
     r"gpt-4-0314\.jsonl:line 1: invalid JSON"),
    (lambda r: jsonl(r / "question.jsonl", [{"question_id": "a", "turns": ["x"]}, {"question_id": "a", "turns": ["y"]}]),
     r"question\.jsonl:line 2: field 'question_id': duplicate question id 'a'"),
    (lambda r: jsonl(r / "question.jsonl", [{"question_id": "a", "turns": [3]}]),
     r"question\.jsonl:line 1: field 'turns\[0\]': expected a string"),
])
def test_bad_input(tmp_path, edit, pattern):
    root = arena_folder(tmp_path / "bench")
    edit(root)
    with pytest.raises(DataError, match=pattern):
        load_arena(root)


def test_baseline_option(tmp_path):
    root = arena_folder(tmp_path / "bench")
    assert load_arena(root, baseline="small").benchmark.baseline == "small"
    with pytest.raises(DataError, match="baseline 'nobody' has no answer file"):
        load_arena(root, baseline="nobody")


SHARED = paths.shared_data()


@pytest.mark.skipif(SHARED is None or not (SHARED / "arena_hard").is_dir(), reason="no ../shared/data")
@pytest.mark.parametrize("folder, n, baseline", [("arena-hard-v0.1", 500, "gpt-4-0314"),
                                                 ("arena-hard-v2.0", 750, "o3-mini-2025-01-31"),
                                                 ("arena-bench-v1", 300, "gpt-4-0314")])
def test_real_releases(folder, n, baseline):
    imp = load_arena(SHARED / "arena_hard" / folder)
    assert len(imp.benchmark.queries) == n and imp.benchmark.baseline == baseline
    assert dict(imp.missing).get(baseline, 0) == 0
