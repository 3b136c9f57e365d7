"""Named topics over a benchmark's queries, and picking the queries that fit a described use case.

Clustering is anchored k-means on sentence embeddings (all-MiniLM-L6-v2, normalised, so a dot
product is a cosine). Free k-means on AlpacaEval's mixed instructions gives clusters that no short
name fits, and without an LLM to name them they would end up called "cluster 7". So each curated
topic in ``topic_names.yaml`` (a name, a description, example requests, keywords) becomes an
anchor: its centroid starts at the embedding of its description and examples, and keeps that
anchor as a prior weight while it moves towards its members. A query joins the topic with the
highest cosine plus a small bonus per matched keyword. While more topics than ``k`` remain, the
smallest is dropped and its queries rejoin the others. Everything is deterministic: no random
start, ties broken by the curated order.

Worked example of the assignment score for one query ``x`` and topic ``j``::

    score[x, j] = cos(x, centroid_j) + keyword_weight * min(#keywords of j found in x, 2)
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from usl.store.db import Store
from usl.types import DataError

log = logging.getLogger(__name__)
K_RANGE = (8, 16)


@dataclass(frozen=True)
class Topic:
    id: str
    name: str
    keywords: tuple[str, ...]
    query_ids: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.query_ids)


@dataclass(frozen=True)
class CuratedTopic:
    name: str
    description: str
    examples: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


@dataclass(frozen=True)
class TopicConfig:
    k: int = field(default=12, metadata={"help": "Number of topics, 8 to 16 (the paper's board had 12)."})
    keyword_weight: float = field(default=0.05, metadata={"help": "Score bonus per matched curated keyword (at most 2)."})
    anchor_weight: float = field(default=5.0, metadata={"help": "How many queries' worth of pull a topic's curated anchor keeps."})
    max_iter: int = field(default=30, metadata={"help": "k-means iterations per round."})
    n_keywords: int = field(default=6, metadata={"help": "Top distinctive words shown per topic."})
    names_file: str = field(default="", metadata={"help": "YAML of curated topics; default: the packaged topic_names.yaml."})

    def __post_init__(self):
        if not K_RANGE[0] <= self.k <= K_RANGE[1]:
            raise ValueError(f"k must be between {K_RANGE[0]} and {K_RANGE[1]}, got {self.k}")


def load_curated(path: str | Path | None = None) -> list[CuratedTopic]:
    import yaml

    if path:
        text, where = Path(path).read_text(), str(path)
    else:
        res = resources.files("usl.data").joinpath("topic_names.yaml")
        text, where = res.read_text(), "topic_names.yaml"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:    # PyYAML's own message spans lines and names "<unicode string>"
        mark = getattr(e, "problem_mark", None)
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise DataError(f"invalid YAML: {problem}", path=where,
                        line=mark.line + 1 if mark is not None else None) from e
    items = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise DataError("expected a non-empty 'topics' list", path=where)
    out = []
    for i, t in enumerate(items):
        def strings(key: str) -> tuple[str, ...]:
            v = t.get(key, [])
            if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
                raise DataError("expected a list of strings (quote entries that contain ': ')",
                                path=where, field=f"topics[{i}].{key}")
            return tuple(v)
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not isinstance(t.get("description"), str):
            raise DataError("each topic needs a string 'name' and 'description'", path=where, field=f"topics[{i}]")
        out.append(CuratedTopic(t["name"], t["description"], strings("examples"), strings("keywords")))
    if len({t.name for t in out}) != len(out):
        raise DataError("topic names must be unique", path=where)
    return out


def keyword_hits(texts: Sequence[str], curated: Sequence[CuratedTopic], cap: int = 2) -> np.ndarray:
    """(n_texts, n_topics) counts of curated keywords found at word starts ("cook" hits "cooking")."""
    pats = [re.compile(r"\b(?:" + "|".join(re.escape(k.lower()) for k in t.keywords) + ")") if t.keywords
            else None for t in curated]
    hits = np.zeros((len(texts), len(curated)), np.float32)
    for i, text in enumerate(texts):
        low = text.lower()
        for j, p in enumerate(pats):
            if p is not None:
                hits[i, j] = min(len(set(p.findall(low))), cap)
    return hits


def anchored_kmeans(x: np.ndarray, anchors: np.ndarray, hits: np.ndarray, cfg: TopicConfig) -> np.ndarray:
    """Label each row of ``x`` (n, d; unit rows) with an anchor index; at most ``cfg.k`` labels used.

    ``anchors``: (m, d) unit rows, one per curated topic; ``hits``: (n, m) keyword counts.
    """
    m = len(anchors)
    active = list(range(m))
    centroids = anchors.copy()
    while True:
        labels = _assign(x, centroids, hits, active, cfg)
        for _ in range(cfg.max_iter):
            new = centroids.copy()
            for j in active:
                v = x[labels == j].sum(0) + cfg.anchor_weight * anchors[j]
                new[j] = v / np.linalg.norm(v)
            centroids = new
            relabel = _assign(x, centroids, hits, active, cfg)
            if np.array_equal(relabel, labels):
                break
            labels = relabel
        if len(active) <= cfg.k:
            return labels
        sizes = np.bincount(labels, minlength=m)
        drop = min(active, key=lambda j: (sizes[j], -j))  # smallest; on ties the later curated entry
        log.debug("dropping topic %d (%d queries)", drop, sizes[drop])
        active.remove(drop)


def _assign(x, centroids, hits, active, cfg) -> np.ndarray:
    score = x @ centroids[active].T + cfg.keyword_weight * hits[:, active]
    return np.asarray(active)[score.argmax(1)]


_STOP = set("""a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further get give given
had has have having he her here hers herself him himself his how i if in into is it its itself just like make
me more most my myself no nor not now of off on once only or other our ours out over own please same she should
so some such than that the their theirs them themselves then there these they this those through to too under
until up very want was way we were what when where which while who whom why will with would write you your yours
yourself one two use using know need tell help things thing something some many much following based
i'll i'm i've let's it's don't can't what's that's really true people believe information within contains com
www http https reader enjoy basic different good best new time able sure provide explain list describe""".split())


def top_keywords(docs: Sequence[Sequence[str]], n: int = 6) -> list[tuple[str, ...]]:
    """Distinctive words per group of texts: (#texts in the group using the word) * idf over groups."""
    counts = []
    for texts in docs:
        c: Counter[str] = Counter()
        for t in texts:
            c.update({w for w in re.findall(r"[a-z][a-z'+#-]*[a-z+#]", t.lower()) if len(w) > 2 and w not in _STOP})
        counts.append(c)
    df = Counter(w for c in counts for w in c)
    out = []
    for c in counts:
        scored = sorted(((n_docs * math.log(len(docs) / df[w]), w) for w, n_docs in c.items() if n_docs >= 2 and df[w] < len(docs)),
                        key=lambda p: (-p[0], p[1]))
        out.append(tuple(w for _, w in scored[:n]))
    return out


def default_embedder(store: Store):
    """The offline sentence embedder with its cache beside the store (``<home>/cache/embeddings``)."""
    from usl.data.embed import shared_embedder

    return shared_embedder(store.path.parent / "cache" / "embeddings")


def build_topics(store: Store, benchmark: str, embedder=None, config: TopicConfig | None = None,
                 progress: bool = False) -> list[Topic]:
    """Cluster the benchmark's queries, name the clusters, and store them (replacing old topics)."""
    from usl.store.benchmarks import load_benchmark

    cfg = config or TopicConfig()
    embedder = embedder or default_embedder(store)
    bench = load_benchmark(store, benchmark)
    curated = load_curated(cfg.names_file or None)
    if len(curated) < cfg.k:
        raise DataError(f"only {len(curated)} curated topic names for k={cfg.k}")
    texts = [q.text for q in bench.queries]
    x = embedder.encode(texts, show_progress=progress)
    anchors = np.stack([_unit(embedder.encode([t.description, *t.examples]).mean(0)) for t in curated])
    labels = anchored_kmeans(x, anchors, keyword_hits(texts, curated), cfg)
    used = sorted(set(labels.tolist()), key=lambda j: (-(labels == j).sum(), curated[j].name))
    words = top_keywords([[texts[i] for i in np.flatnonzero(labels == j)] for j in used], cfg.n_keywords)
    topics = [Topic(curated[j].slug, curated[j].name, kw,
                    tuple(bench.queries[i].id for i in np.flatnonzero(labels == j)))
              for j, kw in zip(used, words)]
    save_topics(store, benchmark, topics)
    log.info("built %d topics over %d queries of %r", len(topics), len(texts), benchmark)
    return topics


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def save_topics(store: Store, benchmark: str, topics: Sequence[Topic]) -> None:
    """Replace the benchmark's topics in one transaction."""
    with store.transaction() as con:
        con.execute("DELETE FROM query_topics WHERE benchmark=?", (benchmark,))
        con.execute("DELETE FROM topics WHERE benchmark=?", (benchmark,))
        con.executemany("INSERT INTO topics(benchmark, id, name, keywords) VALUES (?,?,?,?)",
                        [(benchmark, t.id, t.name, ",".join(t.keywords)) for t in topics])
        con.executemany("INSERT INTO query_topics(benchmark, query_id, topic_id) VALUES (?,?,?)",
                        [(benchmark, q, t.id) for t in topics for q in t.query_ids])


_save = save_topics  # older name, still used by tests elsewhere


def load_topics(store: Store, benchmark: str) -> list[Topic]:
    """Stored topics, largest first (then by name); empty when none were built."""
    members: dict[str, list[str]] = {}
    for qid, tid in store.con.execute(
            "SELECT qt.query_id, qt.topic_id FROM query_topics qt JOIN queries q "
            "ON q.benchmark = qt.benchmark AND q.id = qt.query_id WHERE qt.benchmark=? ORDER BY q.position",
            (benchmark,)):
        members.setdefault(tid, []).append(qid)
    topics = [Topic(tid, name, tuple(k for k in kw.split(",") if k), tuple(members.get(tid, ())))
              for tid, name, kw in store.con.execute(
                  "SELECT id, name, keywords FROM topics WHERE benchmark=?", (benchmark,))]
    return sorted(topics, key=lambda t: (-t.size, t.name))


def match_topics(requested: Sequence[str], topics: Sequence) -> list:
    """The topics ``requested`` names, in request order without repeats: the one rule the CLI, the HTTP
    API and the Python API share. A request is a topic's id or name (any case), or the start of exactly
    one topic's id or name ("coding" for ``coding-technology``). ``topics``: anything with ``id`` and
    ``name`` (``Topic``, the server's ``TopicOut``). An unknown or ambiguous request raises ``ValueError``
    listing the ids and names there are; blank requests are skipped.

    >>> [t.id for t in match_topics(["CODING", "poem"], [Topic("coding-technology", "Coding", (), ()),
    ...                                                   Topic("poetry", "Poems", (), ())])]
    ['coding-technology', 'poetry']
    """
    keys = [(k, t) for t in topics for k in {str(t.id).casefold(), str(t.name).casefold()}]
    chosen, unknown = {}, []
    for r in (x.strip() for x in requested):
        if not r:
            continue
        key = r.casefold()
        exact = {id(t): t for k, t in keys if k == key}
        found = exact or {id(t): t for k, t in keys if k.startswith(key)}
        if len(found) == 1:
            t = next(iter(found.values()))
            chosen.setdefault(str(t.id), t)
        else:
            unknown.append(repr(r) + (" (fits several)" if found else ""))
    if unknown:
        known = ", ".join(f"{t.id} ({t.name})" for t in topics) or "none built"
        raise ValueError(f"unknown topic {', '.join(unknown)}; topics (id and name): {known}")
    return list(chosen.values())


def ensure_topics(store: Store, benchmark: str, embedder=None) -> list[Topic]:
    """The stored topics, building them first (default config) when there are none."""
    return load_topics(store, benchmark) or build_topics(store, benchmark, embedder)


def select_by_use_case(store: Store, benchmark: str, text: str, embedder=None, min_queries: int = 20,
                       max_fraction: float = 0.25) -> list[str]:
    """Query ids that fit a free-text use case, most relevant first.

    A query's relevance is its own cosine with the description plus half the cosine of its topic's
    name (so "recipes and meal plans" also lifts cooking questions that never say "recipe").
    Kept: queries scoring at least two standard deviations above the mean, but no fewer than
    ``min_queries`` and no more than ``max_fraction`` of the benchmark (or ``min_queries``).
    """
    from usl.store.benchmarks import load_benchmark

    if not text.strip():
        raise ValueError("describe the use case in a few words")
    embedder = embedder or default_embedder(store)
    bench = load_benchmark(store, benchmark)
    topics = ensure_topics(store, benchmark, embedder)
    x = embedder.encode([q.text for q in bench.queries])
    u = embedder.encode([text])[0]
    topic_of = {qid: t for t in topics for qid in t.query_ids}
    names = sorted({t.name for t in topics})
    name_sim = dict(zip(names, (embedder.encode(names) @ u).tolist())) if names else {}
    score = x @ u + 0.5 * np.array([name_sim.get(topic_of[q.id].name, 0.0) if q.id in topic_of else 0.0
                                    for q in bench.queries])
    order = np.argsort(-score, kind="stable")
    n_max = max(min_queries, int(max_fraction * len(order)))
    n_keep = int((score >= score.mean() + 2 * score.std()).sum())
    n_keep = min(max(n_keep, min_queries), n_max, len(order))
    return [bench.queries[i].id for i in order[:n_keep]]
