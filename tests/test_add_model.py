"""`usl data add-model` / `remove-model` on a real store: one model in or out, nothing else touched,
and the default judge reads the new answers alone (its answer cache is keyed per answer)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from server_real import tiny_alpaca_layout
from usl.cli import app
from usl.data.own_model import match_answers, read_model_answers
from usl.store import Store
from usl.store.benchmarks import load_benchmark
from usl.types import DataError

runner = CliRunner()
# What a model's board row keeps whatever other models are on the board (the rank counts the others,
# the length control's scale and the Bradley-Terry rating are fitted over all of them).
OWN = ("win_rate", "ci", "n", "n_missing", "topics", "avg_length")


def usl(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def instructions(src: Path) -> list[str]:
    return [it["instruction"] for it in json.loads((src / "alpaca_eval" / "outputs" / "base.json").read_text())]


def own_outputs(path: Path, src: Path, words: int = 15, skip: int = 2) -> Path:
    """The new model's model_outputs.json: every instruction but the first ``skip`` board queries, and
    one instruction no benchmark holds."""
    items = [{"instruction": q, "output": " ".join(["own"] * (words + i % 3)), "generator": "m_own"}
             for i, q in enumerate(instructions(src)) if i >= skip]
    items.append({"instruction": "A question nobody asked", "output": "an answer", "generator": "m_own"})
    path.write_bytes(gzip.compress(json.dumps(items).encode()))
    return path


@pytest.fixture
def home(tmp_path):
    src = tiny_alpaca_layout(tmp_path / "shared")
    h = tmp_path / "home"
    r = usl(h, "data", "import", "alpaca-eval", "--source", str(src / "alpaca_eval"))
    assert r.exit_code == 0, r.output
    from usl.data.topics import Topic, save_topics

    store = Store(h / "usl.sqlite")
    qids = [q.id for q in load_benchmark(store, "alpaca_eval").queries]
    save_topics(store, "alpaca_eval", [Topic("a", "First half", ("x",), tuple(qids[:9])),
                                       Topic("b", "Second half", ("y",), tuple(qids[9:]))])
    store.close()
    return h, src


def board(h, *extra) -> dict:
    r = usl(h, "rank", "--judge", "length", "--format", "json", "--no-per-criterion", *extra)
    assert r.exit_code == 0, r.output
    return {row["model"]: row for row in json.loads(r.stdout)["rows"]}


def test_add_model_leaves_the_other_models_and_topics_as_they_were(home, tmp_path):
    h, src = home
    stats_before = json.loads(usl(h, "data", "stats", "--json").stdout)
    topics_before = usl(h, "topics", "list", "--json").stdout
    rows_before = board(h)

    r = usl(h, "data", "add-model", str(own_outputs(tmp_path / "model_outputs.json.gz", src)), "--judge", "none")
    assert r.exit_code == 0, r.output
    assert "m_own: 16 of 18 queries answered" in r.output
    assert "missing: 2 queries without an answer" in r.output
    assert "unmatched: 7 instructions are no query of this benchmark" in r.output   # 6 training ones + 1

    stats = json.loads(usl(h, "data", "stats", "--json").stdout)
    assert [m for m in stats["models"] if m["name"] != "m_own"] == stats_before["models"]
    assert {"name": "m_own", "answers": 16, "missing": 2} in stats["models"]
    same = {k for k in stats_before if k not in ("version", "models", "n_models", "answers", "missing")}
    assert {k: stats[k] for k in same} == {k: stats_before[k] for k in same}
    assert stats["version"] != stats_before["version"] and stats["n_models"] == stats_before["n_models"] + 1
    assert usl(h, "topics", "list", "--json").stdout == topics_before

    rows = board(h)
    assert set(rows) == set(rows_before) | {"m_own"}
    for m, row in rows_before.items():
        assert {k: rows[m][k] for k in OWN} == {k: row[k] for k in OWN}, m
    assert rows["m_own"]["n"] == 16 and rows["m_own"]["win_rate"] == 100.0   # 15-17 words beat the baseline's 10-11

    # removing it gives back the store as it was, content version included: caches keyed on it hit again
    r = usl(h, "data", "remove-model", "m_own")
    assert r.exit_code == 0, r.output
    assert json.loads(usl(h, "data", "stats", "--json").stdout) == stats_before
    assert usl(h, "topics", "list", "--json").stdout == topics_before


def test_a_second_add_needs_replace_and_bad_input_changes_nothing(home, tmp_path):
    h, src = home
    first = own_outputs(tmp_path / "first.json.gz", src, words=15)
    assert usl(h, "data", "add-model", str(first), "--judge", "none").exit_code == 0
    stats = usl(h, "data", "stats", "--json").stdout

    again = usl(h, "data", "add-model", str(first), "--judge", "none")
    assert again.exit_code == 2
    assert "model 'm_own' is already in benchmark 'alpaca_eval'; pass --replace" in again.output
    baseline = usl(h, "data", "add-model", str(first), "--name", "base", "--judge", "none")
    assert baseline.exit_code == 2 and "'base' is the baseline" in baseline.output
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"instruction": "Something else", "output": "x"}) + "\n")
    none = usl(h, "data", "add-model", str(other), "--judge", "none")
    assert none.exit_code == 2 and "none of its 1 instructions answers a query" in none.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"instruction": instructions(src)[0], "output": 3}) + "\n")
    bad = usl(h, "data", "add-model", str(broken), "--judge", "none")
    assert bad.exit_code == 2 and "broken.jsonl:line 1: field 'output': expected a string or null" in bad.output
    assert usl(h, "data", "remove-model", "nobody").exit_code == 2
    assert usl(h, "data", "stats", "--json").stdout == stats

    shorter = own_outputs(tmp_path / "second.json.gz", src, words=3, skip=0)
    r = usl(h, "data", "add-model", str(shorter), "--replace", "--judge", "none")
    assert r.exit_code == 0 and "replaced 'm_own'" in r.output, r.output
    assert board(h)["m_own"]["win_rate"] == 0.0 and board(h)["m_own"]["n"] == 18


def test_a_running_service_ranks_a_model_added_or_removed_by_another_process(home, tmp_path):
    """``usl serve`` keeps the benchmark in memory; ``usl data add-model`` in another process changes
    the store: the next board has the new model, and loses it once it is removed."""
    from usl.leaderboard.service import LeaderboardService
    from usl.leaderboard.types import LeaderboardSpec

    h, src = home
    svc = LeaderboardService(Store(h / "usl.sqlite"), home=str(h), auto_topics=False)
    spec = LeaderboardSpec(benchmark="alpaca_eval", judge="length")
    before = {r.model for r in svc.rank(spec).rows}
    assert "m_own" not in before

    assert usl(h, "data", "add-model", str(own_outputs(tmp_path / "own.json.gz", src)), "--judge", "none").exit_code == 0
    assert {r.model for r in svc.rank(spec).rows} == before | {"m_own"}
    assert usl(h, "data", "remove-model", "m_own").exit_code == 0
    assert {r.model for r in svc.rank(spec).rows} == before


def test_jsonl_answers_match_by_instruction_text_up_to_whitespace(home, tmp_path):
    h, src = home
    store = Store(h / "usl.sqlite")
    bench = load_benchmark(store, "alpaca_eval")
    f = tmp_path / "mine.jsonl"
    lines = [{"instruction": "  " + bench.queries[0].text.replace(" ", "\n  ") + " ", "output": "first"},
             {"instruction": bench.queries[0].text, "output": "again"},
             {"instruction": bench.queries[1].text, "output": "   "}]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = match_answers(bench, read_model_answers(f))
    assert got.model == "mine" and [(r.query_id, r.text) for r in got.responses] == [(bench.queries[0].id, "first")]
    assert got.repeated == 1 and len(got.missing) == len(bench.queries) - 1 and got.unmatched == ()
    with pytest.raises(DataError, match="field 'name': the model's name must not be empty"):
        match_answers(bench, read_model_answers(f), model=" ")


def test_the_default_judge_reads_only_the_new_answers(home, tmp_path):
    """The answer cache is keyed per answer: adding a model computes its answers alone, and a new
    process finds every answer of the grown board in the cache."""
    from usl.leaderboard.service import LeaderboardService

    h, src = home
    svc = LeaderboardService(Store(h / "usl.sqlite"), home=str(h), auto_topics=False)
    svc.prepare("alpaca_eval", "default")
    n_before = len(svc.judge("default").bank)
    segments = sorted(h.glob("cache/answers/bank_*/seg_*.npz"))
    assert len(segments) == 1

    r = usl(h, "data", "add-model", str(own_outputs(tmp_path / "own.json.gz", src)))
    assert r.exit_code == 0, r.output
    assert "judge default: answers read" in r.output
    new = sorted(set(h.glob("cache/answers/bank_*/seg_*.npz")) - set(segments))
    assert len(new) == 1
    with np.load(new[0]) as z:
        assert len(z["key"]) == 16                                   # m_own's answers, nothing else
    with np.load(segments[0]) as z:
        assert len(z["key"]) == n_before

    fresh = LeaderboardService(Store(h / "usl.sqlite"), home=str(h), auto_topics=False)
    judge = fresh.judge("default")
    judge.bank._add = None        # a cache miss would call it and fail
    fresh.prepare("alpaca_eval", "default")
    assert len(judge.bank) == n_before + 16


def test_answer_cache_segments_merge_and_keep_every_answer(tmp_path):
    """Each preload of new answers writes a segment; past MAX_SEGMENTS they are merged into one, and a
    new bank finds every answer again, rows unchanged (the arrays are set here, not embedded)."""
    from usl.fast.answer_bank import MAX_SEGMENTS, AnswerBank

    def bank():
        return AnswerBank(static=None, cache_dir=tmp_path)

    writer, rng = bank(), np.random.default_rng(0)
    folder = writer._cache_folder()
    keys = [(f"q{i}", f"answer {i}") for i in range(3 * (MAX_SEGMENTS + 2))]
    for start in range(0, len(keys), 3):                       # one segment per 3 answers
        part = keys[start:start + 3]
        writer._append(part, rng.normal(size=(3, 384)).astype(np.float32),
                       rng.normal(size=(3, len(writer.feature_names))).astype(np.float32),
                       rng.normal(size=3).astype(np.float32))
        writer._save_segment(folder, part)
    assert 1 < len(writer._segments(folder)) <= MAX_SEGMENTS
    reader = bank()
    reader._load_cached(folder, keys[::-1])
    assert len(reader) == len(keys)
    for k in keys:
        assert np.array_equal(reader.r[reader._index[k]], writer.r[writer._index[k]])
        assert reader.cos_q[reader._index[k]] == writer.cos_q[writer._index[k]]


def test_data_queries_lists_the_queries_with_topic_ids_as_a_template_add_model_takes(tmp_path):
    from server_real import make_tiny

    make_tiny(tmp_path)
    everything = usl(tmp_path, "data", "queries", "--benchmark", "tiny")
    assert everything.exit_code == 0, everything.output
    lines = [json.loads(x) for x in everything.stdout.splitlines()]
    assert len(lines) == 16 and lines[0] == {"instruction": "Write a Python function number 0", "output": "",
                                             "query_id": "q0", "topics": ["coding"]}
    writing = usl(tmp_path, "data", "queries", "--benchmark", "tiny", "--topics", "Creative")   # a name's start
    template = [json.loads(x) for x in writing.stdout.splitlines()]
    assert [x["query_id"] for x in template] == [f"q{i}" for i in range(8, 16)]
    assert {t for x in template for t in x["topics"]} == {"writing"}

    filled = tmp_path / "m_new.jsonl"
    filled.write_text("".join(json.dumps(x | {"output": "" if i == 0 else "a poem " * 9}) + "\n"
                              for i, x in enumerate(template)))
    added = usl(tmp_path, "data", "add-model", str(filled), "--benchmark", "tiny", "--judge", "none")
    assert added.exit_code == 0, added.output
    assert "m_new: 7 of 16 queries answered" in added.stdout and "missing: 9 queries" in added.stdout

    table = usl(tmp_path, "data", "queries", "--benchmark", "tiny", "--topics", "coding", "--format", "table")
    assert table.stdout.splitlines()[0].split() == ["q0", "coding", "Write", "a", "Python", "function", "number", "0"]
    bad = usl(tmp_path, "data", "queries", "--benchmark", "tiny", "--topics", "astro")
    assert bad.exit_code == 2 and "unknown topic 'astro'; topics (id and name): coding (Coding)" in bad.output


def test_topics_list_shows_the_ids_topics_options_take(tmp_path):
    from server_real import make_tiny

    make_tiny(tmp_path)
    out = usl(tmp_path, "topics", "list", "--name", "tiny")
    assert out.exit_code == 0, out.output
    assert [line.split()[:2] for line in out.stdout.splitlines()] == [["id", "name"], ["coding", "Coding"],
                                                                        ["writing", "Creative"]]
