"""The paper's JSONL: what must parse, what must not, and the reference code's variant."""

from __future__ import annotations

import gzip
import json

import pytest

from usl.data.paper_jsonl import read_samples, write_samples
from usl.types import DataError


def conv(prompt: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]


def good(**over) -> dict:
    d = {"idx": 1, "prompt": "Hi?", "model_a": conv("Hi?", "Hello."), "model_b": conv("Hi?", "Hey there!"),
         "criteria": ["Prefers short answers"], "preference": "model_a"}
    d.update(over)
    return d


def write_lines(path, lines) -> str:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


def test_reads_paper_format_multi_turn_and_gz(tmp_path):
    multi = [{"role": "system", "content": "Be nice."}, *conv("Q1", "A1"), *conv("Q2", "A2 from a")]
    rows = [good(), good(idx="x2", model_a=multi, preference="tie", source="pairs", group="g1",
                         extra={"k": 1})]
    p = tmp_path / "s.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n\n")
    s = read_samples(p)
    assert [x.idx for x in s] == ["1", "x2"]
    assert s[0].response_a == "Hello." and s[0].response_b == "Hey there!"
    assert s[1].response_a == "A2 from a" and s[1].preference == "tie"
    assert (s[1].source, s[1].group) == ("pairs", "g1")
    assert dict(s[1].meta) == {"extra": '{"k": 1}'}


def test_prompt_derived_from_first_user_message(tmp_path):
    row = good()
    del row["prompt"]
    [s] = read_samples(write_lines(tmp_path / "a.jsonl", [row]))
    assert s.prompt == "Hi?"


def test_round_trip(tmp_path):
    src = write_lines(tmp_path / "a.jsonl", [good(), good(idx=2, preference="model_b", source="s", meta1=[1])])
    samples = read_samples(src)
    out = tmp_path / "b.jsonl.gz"
    assert write_samples(out, samples) == 2
    assert read_samples(out) == samples


@pytest.mark.parametrize("row, n, expect", [
    (dict(a_criteria=["concise"], b_criteria=["detailed"], human_winner="model_a"), 2,
     [("7:a", ("concise",), "model_a"), ("7:b", ("detailed",), "model_b")]),
    (dict(a_criteria=[], b_criteria=["detailed"], human_winner="model_b"), 1,
     [("7:b", ("detailed",), "model_b")]),
    (dict(a_criteria=["concise"], b_criteria=["formal"], human_winner="tie"), 1,
     [("7", ("concise", "formal"), "tie")]),
])
def test_reference_variant(tmp_path, row, n, expect):
    base = good(idx=7)
    del base["criteria"], base["preference"]
    base.update(row)
    s = read_samples(write_lines(tmp_path / "v.jsonl", [base]))
    assert len(s) == n
    assert [(x.idx, x.criteria, x.preference) for x in s] == expect
    if n == 2:
        assert s[0].group == s[1].group == "7"


BAD = [
    ('{"idx": 1, "prompt": "Hi', r"line 1: invalid JSON \(truncated"),
    ([1, 2], r"line 1: expected a JSON object"),
    (good(criteria="short"), r"line 1: field 'criteria': expected a list"),
    (good(criteria=[]), r"field 'criteria': must not be an empty list"),
    (good(criteria=["ok", ""]), r"field 'criteria\[1\]': must not be empty"),
    (good(criteria=["ok", 3]), r"field 'criteria\[1\]': expected a non-empty string"),
    (good(preference="A"), r"field 'preference': unknown preference 'A'"),
    (good(preference=1), r"field 'preference': unknown preference 1"),
    ({k: v for k, v in good().items() if k != "preference"}, r"field 'preference': missing field"),
    ({k: v for k, v in good().items() if k != "idx"}, r"field 'idx': missing field"),
    (good(idx=True), r"field 'idx': expected a string or an integer, got a boolean"),
    (good(idx=None), r"field 'idx': expected a string or an integer, got null"),
    (good(model_a="Hello"), r"field 'model_a': expected a list, got a string"),
    (good(model_a=[]), r"field 'model_a': must not be an empty list"),
    (good(model_b=[{"role": "user"}]), r"field 'model_b\[0\].content': missing field"),
    (good(model_b=[{"role": "bot", "content": "x"}]), r"field 'model_b\[0\].role': unknown role 'bot'"),
    (good(model_b=[{"role": "user", "content": "x"}]), r"field 'model_b': no assistant message"),
    (good(model_b=["hi"]), r"field 'model_b\[0\]': expected a message object"),
    (good(prompt=3), r"field 'prompt': expected a string, got an integer"),
    (good(source=3), r"field 'source': expected a string"),
    (dict({k: v for k, v in good().items() if k not in ("criteria", "preference")},
          a_criteria=["x"], human_winner="A wins"), r"field 'human_winner': unknown preference"),
    (dict({k: v for k, v in good().items() if k not in ("criteria", "preference")},
          a_criteria=[], b_criteria=[], human_winner="tie"), r"field 'a_criteria': .*both empty"),
]


@pytest.mark.parametrize("row, pattern", BAD)
def test_bad_lines_name_file_line_field(tmp_path, row, pattern):
    p = write_lines(tmp_path / "bad.jsonl", [row])
    with pytest.raises(DataError, match=r"bad\.jsonl:line 1: " + pattern.removeprefix("line 1: ")):
        read_samples(p)


def test_error_on_a_later_line_names_that_line(tmp_path):
    p = write_lines(tmp_path / "bad.jsonl", [good(idx=1), "", good(idx=2, preference="B")])
    with pytest.raises(DataError, match=r"bad\.jsonl:line 3: field 'preference'"):
        read_samples(p)


def test_duplicate_idx(tmp_path):
    p = write_lines(tmp_path / "dup.jsonl", [good(idx=1), good(idx="1")])
    with pytest.raises(DataError, match=r"dup\.jsonl:line 2: field 'idx': duplicate idx '1' \(first on line 1\)"):
        read_samples(p)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.jsonl: file not found"):
        read_samples(tmp_path / "nope.jsonl")


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(gzip.compress(json.dumps(good()).encode())[:-12])
    with pytest.raises(DataError, match=r"c\.jsonl\.gz: "):
        read_samples(p)


def test_a_lone_surrogate_names_its_line_and_field(tmp_path):
    p = tmp_path / "s.jsonl"
    row = json.dumps(good(model_b=conv("Hi?", "broken \ud800 text")))  # json.dumps escapes it: valid JSON
    p.write_text(json.dumps(good()) + "\n" + row + "\n" + json.dumps(good(idx=3, prompt="Ok \ud83d\ude00")) + "\n")
    with pytest.raises(DataError, match=r"s\.jsonl:line 2: field 'model_b\[1\]\.content': a lone UTF-16 surrogate"):
        read_samples(p)
    p.write_text(json.dumps(good(prompt="Ok \ud83d\ude00 fine")) + "\n")  # a pair of surrogates is one emoji
    assert read_samples(p)[0].prompt == "Ok \U0001F600 fine"
