"""Topics: the clustering kernel on planted data, keywords, curated names, and the real embedder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from usl import paths
from usl.cli import app
from usl.data.topics import (Topic, TopicConfig, anchored_kmeans, build_topics, keyword_hits, load_curated,
                             load_topics, match_topics, select_by_use_case, top_keywords)
from usl.store import Store
from usl.store.benchmarks import load_benchmark, save_benchmark
from usl.types import Benchmark, DataError, Query, Response


def test_anchored_kmeans_recovers_planted_groups_and_drops_the_smallest():
    rng = np.random.default_rng(0)
    anchors = np.linalg.qr(rng.normal(size=(32, 10)))[0].T  # 10 orthonormal anchors in 32-d
    sizes = [12, 11, 10, 9, 8, 7, 6, 5, 4, 1]
    truth = np.repeat(np.arange(10), sizes)
    x = anchors[truth] + 0.15 * rng.normal(size=(len(truth), 32))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    hits = np.zeros((len(x), 10), np.float32)
    labels = anchored_kmeans(x, anchors, hits, TopicConfig(k=9))
    assert set(labels.tolist()) == set(range(9))  # the one-member topic is gone
    assert (labels[truth < 9] == truth[truth < 9]).all()
    again = anchored_kmeans(x, anchors, hits, TopicConfig(k=9))
    assert (labels == again).all()


def test_keywords_can_tip_a_tie():
    anchors = np.eye(8, 16)
    x = np.zeros((1, 16))
    x[0, :2] = 1 / np.sqrt(2)  # equally close to anchors 0 and 1
    hits = np.zeros((1, 8), np.float32)
    hits[0, 1] = 1
    assert anchored_kmeans(x, anchors, hits, TopicConfig(k=8))[0] == 1


def test_keyword_hits_match_word_starts():
    curated = load_curated()
    cooking = next(i for i, t in enumerate(curated) if t.name == "Cooking & Food")
    h = keyword_hits(["I love cooking soups and baking", "Precook nothing"], curated)
    assert h[0, cooking] == 2 and h[1, cooking] == 0  # capped at 2; 'precook' is not a word start


def test_top_keywords_known_answer():
    docs = [["python code bug", "python function code", "the code"], ["bake bread", "bread recipe bake", "code"]]
    # 'code' is in both groups (idf 0); 'function' and 'bug' occur once (need 2 texts).
    assert top_keywords(docs, n=2) == [("python",), ("bake", "bread")]


def test_curated_names_file():
    curated = load_curated()
    assert len(curated) >= 16 and len({t.slug for t in curated}) == len(curated)
    assert all(t.examples and t.keywords for t in curated)


@pytest.mark.parametrize("text, pattern", [
    ("topics: [{name: A}]", r"needs a string 'name' and 'description'"),
    ("topics: [{name: A, description: d, examples: [x: y]}]", r"topics\[0\]\.examples.*quote entries"),
    ("nope: 1", r"expected a non-empty 'topics' list"),
    ("topics: [{name: A, description: d}, {name: A, description: e}]", r"names must be unique"),
    ("topics: [", r"names\.yaml:line 1: invalid YAML: expected the node content, but found '<stream end>'$"),
    ('topics:\n  - name: "A\n    description: d\n', r"names\.yaml:line 4: invalid YAML: found unexpected end of stream$"),
])
def test_bad_names_file(tmp_path, text, pattern):
    p = tmp_path / "names.yaml"
    p.write_text(text)
    with pytest.raises(DataError, match=pattern):
        load_curated(p)


def test_k_out_of_range():
    with pytest.raises(ValueError, match="k must be between 8 and 16"):
        TopicConfig(k=20)


QUERIES = {
    "cook": ["Give me a recipe for lasagna.", "How long do I boil an egg?", "What spices go well in a curry?",
             "How do I bake sourdough bread at home?", "Suggest a vegetarian dinner for four people."],
    "code": ["Write a Python function to sort a list of dicts by key.", "Why does my JavaScript fetch call fail?",
             "Explain SQL joins with an example.", "How do I fix a segmentation fault in C?"],
    "math": ["Solve 2x + 7 = 19.", "What is the derivative of x^3?", "Compute the probability of two heads in three flips."],
    "poem": ["Write a poem about autumn leaves.", "Write a short story about a lonely robot.", "Compose a haiku about rain."],
    "travel": ["What should I see in Rome in three days?", "Plan a week-long trip to Japan."],
    "health": ["How can I sleep better at night?", "What are the symptoms of dehydration?"],
    "history": ["What caused the fall of the Roman Empire?", "Who was the first president of the United States?"],
    "science": ["Why is the sky blue?", "How do volcanoes form?"],
}


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = Store(paths.db_path(home))
    texts = [t for group in QUERIES.values() for t in group]
    qs = tuple(Query(str(i), t) for i, t in enumerate(texts))
    save_benchmark(store, Benchmark("small", qs, ("base",), "base"),
                   [Response(q.id, "base", "ok") for q in qs], "test")
    return home, store


@pytest.fixture(scope="module")
def embedder(small_store):
    from usl.data.embed import Embedder

    return Embedder(cache_dir=paths.cache_dir(small_store[0], "embeddings"))


def _topic_of(topics, text):
    qid = str([t for g in QUERIES.values() for t in g].index(text))
    return next(t.name for t in topics if qid in t.query_ids)


def test_build_topics_real_embedder(small_store, embedder):
    _, store = small_store
    topics = build_topics(store, "small", embedder, TopicConfig(k=8))
    assert 1 <= len(topics) <= 8
    ids = [q for t in topics for q in t.query_ids]
    assert sorted(ids, key=int) == [str(i) for i in range(sum(map(len, QUERIES.values())))]  # each query once
    for text in QUERIES["cook"][:4]:
        assert _topic_of(topics, text) == "Cooking & Food"
    for text in QUERIES["code"]:
        assert _topic_of(topics, text) == "Coding & Technology"
    assert _topic_of(topics, "Solve 2x + 7 = 19.") == "Math & Calculations"
    assert _topic_of(topics, "Write a poem about autumn leaves.") == "Creative Writing & Literature"
    assert load_topics(store, "small") == topics
    assert build_topics(store, "small", embedder, TopicConfig(k=8)) == topics  # deterministic
    assert load_benchmark(store, "small").queries[0].topic_ids == (topics[0].id,) or \
        any(load_benchmark(store, "small").queries[0].id in t.query_ids for t in topics)


def test_select_by_use_case(small_store, embedder):
    _, store = small_store
    cook_ids = {str(i) for i in range(len(QUERIES["cook"]))}
    picked = select_by_use_case(store, "small", "I mostly ask for recipes and meal plans", embedder, min_queries=5)
    assert len(picked) == 5  # at least min_queries; 25% of 23 is no more
    assert set(picked) == cook_ids
    with pytest.raises(ValueError, match="describe the use case"):
        select_by_use_case(store, "small", "  ", embedder)


def test_cli_topics(small_store):
    home, _ = small_store
    runner = CliRunner()
    r = runner.invoke(app, ["--home", str(home), "topics", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert all(set(row) == {"id", "name", "size", "keywords"} for row in rows)
    assert sum(row["size"] for row in rows) == sum(map(len, QUERIES.values()))
    bad = runner.invoke(app, ["--home", str(home), "topics", "build", "--k", "3"])
    assert bad.exit_code == 2 and "k must be between 8 and 16" in bad.output
    for cmd in (["topics"], ["topics", "build"], ["topics", "list"], ["topics", "match"]):
        assert runner.invoke(app, [*cmd, "--help"]).exit_code == 0


SHARED = paths.shared_data()


@pytest.mark.skipif(SHARED is None or not (SHARED / "alpaca_eval").is_dir(), reason="no ../shared/data")
def test_acceptance_board_topics(tmp_path):
    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    assert runner.invoke(app, [*home, "data", "import", "alpaca-eval"]).exit_code == 0
    r = runner.invoke(app, [*home, "topics", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert 8 <= len(rows) <= 16 and all(row["name"] and row["size"] > 0 for row in rows)
    store = Store(paths.db_path(tmp_path))
    covered = sorted(q for t in load_topics(store, "alpaca_eval") for q in t.query_ids)
    assert covered == sorted(q.id for q in load_benchmark(store, "alpaca_eval").queries)
    assert len(covered) == 483


MATCH_TOPICS = [Topic("coding-technology", "Coding & technology", (), ()), Topic("cooking", "Food and cooking", (), ()),
                Topic("creative-writing", "Creative writing", (), ())]


@pytest.mark.parametrize("requested, ids", [
    (["coding-technology"], ["coding-technology"]),           # an id
    (["FOOD AND COOKING"], ["cooking"]),                       # a name, any case
    (["cod"], ["coding-technology"]),                          # the start of exactly one id or name
    (["creative", " cooking ", "cooking"], ["creative-writing", "cooking"]),   # request order, no repeats
    (["", " "], []),                                            # blanks are no topic
])
def test_match_topics_takes_ids_names_and_unique_prefixes(requested, ids):
    assert [t.id for t in match_topics(requested, MATCH_TOPICS)] == ids


@pytest.mark.parametrize("requested, match", [
    (["astrology"], r"unknown topic 'astrology'; topics \(id and name\): coding-technology \(Coding & technology\), "
                    r"cooking \(Food and cooking\), creative-writing \(Creative writing\)"),
    (["co"], r"unknown topic 'co' \(fits several\)"),          # coding-technology and cooking
    (["cooking", "nope", "x"], r"unknown topic 'nope', 'x';"),
])
def test_match_topics_refuses_unknown_and_ambiguous_names_listing_the_known_ones(requested, match):
    with pytest.raises(ValueError, match=match):
        match_topics(requested, MATCH_TOPICS)
