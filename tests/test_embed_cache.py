"""The embedding cache with the real MiniLM encoder: its vectors are sentence-transformers' for texts
of up to 256 word pieces, a torn shard is named and rebuilt, the folder stays under its byte bound
(least recently used shards go first), and one embedder serves a folder per process."""

from __future__ import annotations

import logging

import numpy as np

from usl.data.embed import Embedder, shared_embedder


def embedder(tmp_path, **kw) -> Embedder:
    return Embedder(cache_dir=tmp_path, **kw)


def test_vectors_are_sentence_transformers_to_256_word_pieces():
    from sentence_transformers import SentenceTransformer

    from usl.data.encoder import encoder_path

    texts = ["short answers", "Explain it to me as if I were new to the field. " * 12,   # ~130 word pieces
             "A travel plan for three days in Lisbon, with " + "museums, food and walks, " * 60]   # cut at 256
    reference = SentenceTransformer(encoder_path(), device="cpu")
    reference.max_seq_length = 256
    want = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(Embedder(batch_size=2).vectors(texts), want, atol=1e-5)


def test_a_torn_shard_is_named_removed_and_rebuilt(tmp_path, caplog):
    first = embedder(tmp_path).encode(["clear answers", "short answers"])
    (shard,) = tmp_path.glob("*.npy")
    shard.write_bytes(shard.read_bytes()[:100])               # a write cut short
    with caplog.at_level(logging.WARNING, logger="usl.data.embed"):
        again = embedder(tmp_path).encode(["clear answers", "short answers"])
    assert np.allclose(first, again, atol=1e-5)
    assert any(str(shard) in r.getMessage() and "torn" in r.getMessage() for r in caplog.records)
    assert len(list(tmp_path.glob("*.npy"))) == 1 and np.load(shard).shape == (2, 384)     # rebuilt whole


def test_the_cache_folder_stays_under_its_bound(tmp_path):
    e = embedder(tmp_path, max_cache_bytes=8_000)     # room for a few one-criterion shards
    kept = e.encode(["the first criterion, used again and again"])
    for i in range(12):
        e.encode([f"criterion number {i}"])
        fresh = embedder(tmp_path, max_cache_bytes=8_000)
        fresh.encode(["the first criterion, used again and again"])     # a new process reads it: used
    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    assert size <= 8_000 and len(list(tmp_path.glob("*.npy"))) < 13
    reader = embedder(tmp_path)
    reader._load("")
    assert reader.key("the first criterion, used again and again") in reader._mem     # the used one stayed
    assert np.allclose(reader.encode(["the first criterion, used again and again"]), kept, atol=1e-5)


def test_one_embedder_per_folder_and_process(tmp_path):
    assert shared_embedder(tmp_path) is shared_embedder(tmp_path / "." )
    assert shared_embedder(tmp_path) is not shared_embedder(tmp_path / "other")
