"""Vectors stored once on disk: the store's bulk vector read, :class:`memcore.plugin.VectorReader`,
and the ``exact`` index saving ids and row numbers only, searching the store's file (also
after a crash)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from memcore import Collection, CorruptError, Query
from memcore.plugin import VectorReader, WriteBatch
from memcore._plugins._host import get_registry
from memcore import Record
from memcore.embedders._embedder import Space
from memcore.stores import _sqlite as sqlite_module
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore

DIM = 8


def _records(n: int, seed: int = 0) -> list[Record]:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return [Record.create(f"text {i}", id=f"r{i}", vectors={"v": x[i]}) for i in range(n)]


@pytest.mark.parametrize("scan", [False, True], ids=["lookups", "scan"])
def test_sqlite_vectors_in_order_with_missing_and_repeated_ids(tmp_path, monkeypatch, scan):
    monkeypatch.setattr(sqlite_module, "_SCAN_FROM", 1 if scan else 10**9)
    store = SQLiteStore(tmp_path)
    records = _records(20)
    store.apply(WriteBatch(upserts=records, add_membership={"i": [r.id for r in records]}))
    ids = ["r5", "nope", "r0", "r5", "r19"]
    matrix, present = store.vectors(ids, "v")
    assert present.tolist() == [True, False, True, True, True]
    for i, rid in enumerate(ids):
        expected = records[int(rid[1:])].vectors["v"] if present[i] else np.zeros(DIM, dtype=np.float32)
        assert np.array_equal(matrix[i], expected)
    assert store.vectors(["nope"], "v")[1].tolist() == [False]
    assert store.vectors(["r1"], "other")[1].tolist() == [False]
    store.close()


@pytest.mark.parametrize("damage", ["past_the_file", "nan"])
def test_sqlite_vectors_damaged_row_is_corrupt_naming_the_record(tmp_path, damage):
    store = SQLiteStore(tmp_path)
    records = _records(3)
    store.apply(WriteBatch(upserts=records))
    store.close()
    if damage == "nan":  # the values in the space's file
        with open(tmp_path / "vectors" / "0.f32", "r+b") as fh:
            fh.seek(1 * DIM * 4)
            fh.write(np.full(DIM, np.nan, dtype=np.float32).tobytes())
    else:  # the row number in the database
        with sqlite3.connect(tmp_path / "store.sqlite3") as db:
            db.execute("UPDATE vectors_0 SET row=999 WHERE rid=(SELECT rowid FROM records WHERE id='r1')")
    store = SQLiteStore(tmp_path)
    with pytest.raises(CorruptError, match="r1"):
        store.vectors(["r0", "r1", "r2"], "v")
    with pytest.raises(CorruptError, match="r1"):
        store.get(["r1"])
    store.close()


def test_vector_reader_excuses_deleted_records_and_refuses_members_without_vectors():
    store = MemoryStore()
    records = _records(4)
    store.apply(WriteBatch(upserts=records, add_membership={"idx": [r.id for r in records]}))
    store.apply(WriteBatch(deletes=["r1"]))
    reader = VectorReader(store, "idx")
    matrix, present = reader.read(["r0", "r1", "r2"], "v", DIM)
    assert present.tolist() == [True, False, True] and not matrix[1].any()
    assert reader.read([], "v", DIM)[0].shape == (0, DIM)
    with pytest.raises(CorruptError, match="dimension|expects"):
        reader.read(["r0"], "v", DIM + 1)
    bare = Record.create("no vector", id="bare")
    store.apply(WriteBatch(upserts=[bare], add_membership={"idx": ["bare"]}))
    with pytest.raises(CorruptError, match="bare"):
        reader.read(["r0", "bare"], "v", DIM)


@pytest.mark.parametrize("kind", ["memory", "sqlite-lookups", "sqlite-scan"])
def test_read_into_writes_the_rows_into_the_given_matrix(tmp_path, monkeypatch, kind):
    """VectorReader.read_into = read, written into a caller's matrix (an index's own storage):
    the same rows, absent ids zeroed (even over earlier contents), the same errors."""
    monkeypatch.setattr(sqlite_module, "_SCAN_FROM", 1 if kind == "sqlite-scan" else 10**9)
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path)
    records = _records(20)
    store.apply(WriteBatch(upserts=records, add_membership={"idx": [r.id for r in records]}))
    store.apply(WriteBatch(deletes=["r3"]))
    reader = VectorReader(store, "idx")
    ids = ["r5", "r3", "r0", "r5", "r19", "nope"]
    out = np.full((len(ids), DIM), 7.0, dtype=np.float32)
    present = reader.read_into(ids, "v", out)
    matrix, expected = reader.read(ids, "v", DIM)
    assert present.tolist() == expected.tolist() == [True, False, True, True, True, False]
    assert np.array_equal(out, matrix) and not out[1].any() and not out[5].any()
    assert reader.read_into([], "v", np.zeros((0, DIM), dtype=np.float32)).shape == (0,)
    with pytest.raises(CorruptError, match="idx"):  # the store keeps 8-d vectors
        reader.read_into(["r0"], "v", np.zeros((1, DIM + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="float32"):
        reader.read_into(["r0"], "v", np.zeros((1, DIM), dtype=np.float64))
    with pytest.raises(CorruptError, match="other"):  # a member without a vector in that space
        reader.read_into(["r0"], "other", np.ones((1, DIM), dtype=np.float32))
    assert not store.vectors_into(["r0"], "other", np.ones((1, DIM), dtype=np.float32)).any()
    bare = Record.create("no vector", id="bare")
    store.apply(WriteBatch(upserts=[bare], add_membership={"idx": ["bare"]}))
    with pytest.raises(CorruptError, match="bare"):
        reader.read_into(["r0", "bare"], "v", np.zeros((2, DIM), dtype=np.float32))
    store.close()


def _open(path) -> Collection:
    return Collection(SQLiteStore(path), {"v": Space("v", DIM)}, get_registry(), path)


def _top(c: Collection, vector: np.ndarray) -> list[tuple[str, float]]:
    return [(h.id, round(float(h.score), 5)) for h in c.search_index("e", Query(vectors={"v": vector}, k=5), 5)]


def test_exact_index_saves_row_numbers_only_and_recovers_a_crash_from_the_store(tmp_path):
    records = _records(50)
    c = _open(tmp_path)
    c.create_index("e", "exact", space="v")
    c.insert([{"id": r.id, "text": r.text, "vectors": {"v": r.vectors["v"]}} for r in records])
    c.close()
    folder = tmp_path / "indexes" / "e"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ids.json",
        "ids.txt",
        "index.json",
        "rows.npy",
        "scale.npy",
    ]  # no vectors: the store's file is searched
    assert json.loads((folder / "ids.json").read_text())["vectors"] == "rows"

    c = _open(tmp_path)
    assert c._indexes["e"].loaded_from_disk
    fresh = np.random.default_rng(9).standard_normal(DIM).astype(np.float32)
    c.delete(["r3"])
    c.upsert([{"id": "r4", "text": "rewritten", "vectors": {"v": fresh}}])
    probes = [records[3].vectors["v"], fresh, records[10].vectors["v"]]
    live = [_top(c, p) for p in probes]
    c.store.close()  # killed: the index files are still those of the previous save

    c = _open(tmp_path)
    assert c._indexes["e"].loaded_from_disk and len(c._indexes["e"].index) == 49
    assert [_top(c, p) for p in probes] == live
    assert _top(c, fresh)[0] == ("r4", 1.0)
    c.close()


def test_exact_index_saved_with_its_own_copy_still_loads(tmp_path):
    """Files written before vectors were stored once (``vectors.npy`` + ids) keep loading."""
    from memcore.plugin import IndexContext, SpaceInfo
    from memcore.indexes._exact import ExactIndex, ExactIndexConfig

    records = _records(10)
    context = IndexContext("e", {"v": SpaceInfo("v", DIM, "x")})
    own = ExactIndex(ExactIndexConfig(space="v"), context)
    own.add(records)
    # format 1 with its own copy: the unit rows in vectors.npy, ids.json without a layout
    np.save(tmp_path / "vectors.npy", own._matrix[: len(own)])
    (tmp_path / "ids.json").write_text(json.dumps({"dim": DIM, "ids": [r.id for r in records]}))
    store = MemoryStore()
    reader = VectorReader(store, "e")
    loaded = ExactIndex(ExactIndexConfig(space="v"), IndexContext("e", {"v": SpaceInfo("v", DIM, "x")}, vectors=reader))
    loaded.load(tmp_path)
    query = Query(vectors={"v": records[2].vectors["v"]})
    assert [h.id for h in loaded.search(query, 3)] == [h.id for h in own.search(query, 3)]
    loaded.save(tmp_path)  # saved again over a store without a mapped file: its own matrix.npy (format 3)
    assert not (tmp_path / "vectors.npy").exists() and (tmp_path / "matrix.npy").is_file()
    (tmp_path / "ids.json").write_text(json.dumps({"dim": DIM, "ids": ["r0"], "vectors": "store", "space": "v"}))  # format 1, ids only
    bare = ExactIndex(ExactIndexConfig(space="v"), context)
    with pytest.raises(CorruptError, match="no store"):
        bare.load(tmp_path)
