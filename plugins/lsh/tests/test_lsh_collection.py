"""The ``lsh`` index driven by a real SQLite-backed collection, declared in settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

import memcore
from memcore import Collection, Query
from memcore.testing import make_texts
from memcore_lsh.hashing import Hyperplanes

SETTINGS = {
    "indexes": {"hash": {"kind": "lsh", "bits": 6, "tables": 8, "multi_probe": 1, "seed": 3, "exact_filter_below": 0}},
    "pipeline": [{"kind": "recall", "index": "hash"}, {"kind": "limit"}],
}


def texts(n: int) -> list[str]:
    return make_texts(n, seed=5)


def ranked(hits) -> list[tuple[str, float]]:
    return [(h.id, round(float(h.score), 6)) for h in hits]


def test_insert_retrieve_close_reopen_identical(tmp_path):
    corpus = texts(300)
    questions = [" ".join(t.split()[1:4]) for t in corpus[::37]]
    memory = memcore.open(SETTINGS, path=tmp_path)
    ids = memory.collection.insert([{"id": f"t{i}", "text": t, "metadata": {"parity": "even" if i % 2 == 0 else "odd"}} for i, t in enumerate(corpus)])
    assert len(ids) == 300 and len(memory.collection.index("hash")) == 300
    assert any(memory.query(q, k=5) for q in questions)
    # the exact words of a stored text find it first (its hashing vector is identical)
    assert memory.query(corpus[10], k=3)[0].id == "t10"
    memory.collection.delete(["t10"])
    assert all(h.id != "t10" for h in memory.query(corpus[10], k=10))
    plain = [ranked(memory.query(q, k=5)) for q in questions]
    filtered = [ranked(memory.query(q, k=5, where={"parity": "even"})) for q in questions]
    assert any(filtered) and all(int(i[1:]) % 2 == 0 for hits in filtered for i, _ in hits)
    memory.close()

    index_dir = tmp_path / "indexes" / "hash"
    assert {"lsh.json", "planes.npy", "codes.npy", "vectors.npy"} <= {p.name for p in index_dir.iterdir()}
    saved_planes = np.load(index_dir / "planes.npy", allow_pickle=False)

    with memcore.open(SETTINGS, path=tmp_path) as reopened:
        index = reopened.collection.index("hash")
        assert len(index) == 299
        assert np.array_equal(index._planes.planes, saved_planes)
        assert [ranked(reopened.query(q, k=5)) for q in questions] == plain
        assert [ranked(reopened.query(q, k=5, where={"parity": "even"})) for q in questions] == filtered
        reopened.collection.insert({"id": "late", "text": "a late record about " + questions[0]})
        assert "late" in {h.id for h in reopened.query("a late record about " + questions[0], k=3)}


def test_reopen_loads_the_index_files_instead_of_rebuilding(tmp_path, monkeypatch):
    memory = memcore.open(SETTINGS, path=tmp_path)
    memory.collection.insert([{"id": f"t{i}", "text": t} for i, t in enumerate(texts(120))])
    queries = [Query(text=t, k=5) for t in texts(120)[::11]]
    before = [ranked(memory.collection.retrieve(q, index="hash")) for q in queries]
    memory.close()
    # a rebuild would draw hyperplanes from the seed: make such a draw different
    monkeypatch.setattr(
        Hyperplanes,
        "random",
        classmethod(
            lambda cls, dim, tables, bits, seed: cls(np.random.default_rng(seed + 1).standard_normal((dim, tables * bits)).astype(np.float32), tables, bits)
        ),
    )
    with memcore.open(SETTINGS, path=tmp_path) as reopened:
        planes = reopened.collection.index("hash")._planes.planes
        assert np.array_equal(planes, np.load(tmp_path / "indexes" / "hash" / "planes.npy", allow_pickle=False))
        assert not np.array_equal(planes, Hyperplanes.random(planes.shape[0], 8, 6, 3).planes)
        assert [ranked(reopened.collection.retrieve(q, index="hash")) for q in queries] == before


def test_damaged_index_files_are_rebuilt_from_the_store(tmp_path):
    memory = memcore.open(SETTINGS, path=tmp_path)
    memory.collection.insert([{"id": f"t{i}", "text": t} for i, t in enumerate(texts(80))])
    expected = ranked(memory.query(texts(80)[4], k=5))
    memory.close()
    (tmp_path / "indexes" / "hash" / "codes.npy").write_bytes(b"not an array")
    with memcore.open(SETTINGS, path=tmp_path) as reopened:
        assert len(reopened.collection.index("hash")) == 80
        assert ranked(reopened.query(texts(80)[4], k=5)) == expected  # same seed, same vectors: same index


def test_caller_given_vectors_scopes_and_extras(tmp_path):
    settings = {
        "spaces": {"dense": {"dim": 24}},
        "indexes": {"hash": {"kind": "lsh", "space": "dense", "bits": 4, "tables": 6, "exact_filter_below": 0}},
    }
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 24)).astype(np.float32)
    with memcore.open(settings, path=tmp_path) as memory:
        collection = memory.collection
        collection.insert(
            [{"id": f"v{i}", "text": f"vector {i}", "vectors": {"dense": vectors[i]}, "scope": {"user_id": "ann" if i < 100 else "bob"}} for i in range(200)]
        )
        q = Query(vectors={"dense": vectors[7]}, k=5)
        assert collection.retrieve(q, index="hash")[0].id == "v7"
        scoped = collection.retrieve(q, index="hash", scope={"user_id": "bob"})
        assert scoped and all(int(h.id[1:]) >= 100 for h in scoped)
        exact = collection.retrieve(Query(vectors={"dense": vectors[7]}, k=5, extras={"lsh": {"exact": True}}), index="hash")
        scores = vectors @ (vectors[7] / np.linalg.norm(vectors[7]))
        scores /= np.linalg.norm(vectors, axis=1)
        assert [h.id for h in exact] == [f"v{i}" for i in np.argsort(-scores)[:5]]
        with pytest.raises(memcore.ValidationError, match="probes"):
            collection.retrieve(Query(vectors={"dense": vectors[7]}, extras={"lsh": {"probes": 0}}), index="hash")
        with pytest.raises(memcore.ValidationError):
            collection.insert({"id": "bad", "text": "x", "vectors": {"dense": np.ones(23)}})
        assert collection.count() == 200
        info = json.dumps(collection.info(), default=str)
        assert "lsh" in info


def test_collection_create_with_create_index(tmp_path):
    collection = Collection.create(tmp_path)
    try:
        collection.create_index("hash", "lsh", bits=6, tables=4)
        with pytest.raises(memcore.ConfigError, match="store_vectors"):
            collection.create_index("bad", "lsh", rerank=True, store_vectors=False)
        collection.insert([{"id": f"t{i}", "text": t} for i, t in enumerate(texts(50))])
        assert collection.retrieve(texts(50)[3], index="hash", k=3)[0].id == "t3"
    finally:
        collection.close()
