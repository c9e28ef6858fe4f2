"""The faiss index through real SQLite-backed collections, declared in settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

import memcore
from memcore import Collection, Query
from memcore.embedders._embedder import Space

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=6)) + f" item{i}" for i in range(n)]


def settings(**index):
    return {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}},
        "indexes": {"vec": {"kind": "faiss", **index}},
    }


def _hits(memory, text, **kwargs):
    return [(h.id, round(float(h.score), 6)) for h in memory.query(text, k=5, **kwargs)]


@pytest.mark.parametrize(
    "index",
    [
        {"factory": "Flat"},
        {"factory": "HNSW32", "ef_search": 64, "compact_fraction": 0.5},
        {"factory": "IVF4,Flat", "min_train": 40, "nprobe": 4, "metric": "l2"},
    ],
    ids=["flat", "hnsw", "ivf"],
)
def test_insert_retrieve_close_reopen(tmp_path, index):
    items = texts(120)
    memory = memcore.open(settings(**index), path=tmp_path)
    ids = memory.collection.insert([{"text": t, "metadata": {"n": i, "even": i % 2 == 0}} for i, t in enumerate(items)])
    assert memory.collection.index("vec").stats()["size"] == 120
    if "IVF" in index["factory"]:
        assert memory.collection.index("vec").trained
    first = memory.query(items[7], k=3)
    assert first[0].record.text == items[7]
    memory.collection.delete(ids[:10])
    filtered = memory.query(items[21], k=5, where={"even": False})
    assert filtered[0].record.text == items[21] and all(h.record.metadata["even"] is False for h in filtered)
    probes = [items[3], items[50], "alpha bravo", "zulu unknown words"]
    before = {p: _hits(memory, p) for p in probes}
    before_where = {p: _hits(memory, p, where={"n": {"$gte": 60}}) for p in probes}
    memory.close()
    files = sorted(p.name for p in (tmp_path / "indexes" / "vec").iterdir())
    assert "state.json" in files
    # format 2: every layout saves its vectors in index.faiss (opened without reading the store)
    assert "index.faiss" in files and "tombstones.npy" not in files
    again = memcore.open(settings(**index), path=tmp_path)
    assert again.collection.index("vec").stats()["size"] == 110
    assert {p: _hits(again, p) for p in probes} == before
    assert {p: _hits(again, p, where={"n": {"$gte": 60}}) for p in probes} == before_where
    again.close()


def test_reopen_loads_the_saved_index_instead_of_rebuilding(tmp_path):
    memory = memcore.open(settings(factory="HNSW32"), path=tmp_path)
    memory.collection.insert(texts(30))
    memory.close()
    manifest = json.loads((tmp_path / "indexes" / "vec" / "index.json").read_text())
    assert manifest["kind"] == "faiss" and manifest["count"] == 30
    again = memcore.open(settings(factory="HNSW32"), path=tmp_path)
    handle = again.collection._handle("vec")
    assert handle.loaded_from_disk and handle.applied_seq == manifest["seq"]
    again.close()


def test_corrupt_index_file_is_rebuilt_from_the_store(tmp_path):
    items = texts(40)
    memory = memcore.open(settings(factory="Flat"), path=tmp_path)
    memory.collection.insert(items)
    expected = _hits(memory, items[4])
    memory.close()
    (tmp_path / "indexes" / "vec" / "index.faiss").write_bytes(b"garbage")
    again = memcore.open(settings(factory="Flat"), path=tmp_path)
    assert _hits(again, items[4]) == expected
    again.close()


def test_caller_vectors_and_query_modes_through_a_collection(tmp_path):
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((200, 8)).astype(np.float32)
    collection = Collection.create(tmp_path, spaces={"default": Space("default", 8)})
    collection.create_index("vec", "faiss", factory="HNSW32")
    collection.insert([{"id": f"v{i}", "text": f"vector {i}", "vectors": {"default": v}} for i, v in enumerate(vectors)])
    q = Query(vectors={"default": vectors[17]}, k=3, extras={"faiss": {"ef_search": 100}})
    assert collection.retrieve(q, index="vec")[0].id == "v17"
    with pytest.raises(memcore.ValidationError, match="nprobe applies to IVF"):
        collection.retrieve(Query(vectors={"default": vectors[17]}, extras={"faiss": {"nprobe": 2}}), index="vec")
    with pytest.raises(memcore.DimensionError):
        collection.insert({"id": "bad", "text": "bad", "vectors": {"default": np.ones(9, dtype=np.float32)}})
    assert collection.count() == 200
    collection.close()


@pytest.mark.parametrize("tombstones", [0, 25])
def test_hnsw_storage_reopened_is_bit_identical(tmp_path, tombstones):
    """Reopening an HNSW index (format 2: saved with its vectors, read back in one
    ``faiss.read_index``): every position holds exactly the vector it held before,
    tombstones included, and the graph is not rebuilt."""
    memory = memcore.open(settings(factory="HNSW32", compact_fraction=0.9), path=tmp_path)
    ids = memory.collection.insert(texts(200))
    memory.collection.delete(ids[3 : 3 + tombstones])
    index = memory.collection.index("vec")
    assert index.stats()["tombstones"] == tombstones
    before = index._main.index.storage.reconstruct_n(0, index._main.ntotal)
    labels = dict(index._labels.label_of)
    memory.close()
    assert "tombstones.npy" not in {p.name for p in (tmp_path / "indexes" / "vec").iterdir()}  # format 1's, with vectors kept in the store
    again = memcore.open(settings(factory="HNSW32", compact_fraction=0.9), path=tmp_path)
    assert again.collection._handle("vec").loaded_from_disk
    index = again.collection.index("vec")
    assert index._labels.label_of == labels and index.stats()["tombstones"] == tombstones
    after = index._main.index.storage.reconstruct_n(0, index._main.ntotal)
    assert after.shape == before.shape and np.array_equal(after, before)
    again.close()
