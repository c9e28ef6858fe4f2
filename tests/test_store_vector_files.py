"""Issue 25: the SQLite store keeps each space's vectors once, in a fixed-width float32 file
(``vectors/<slot>.f32``) that the ``exact`` index memory-maps instead of keeping a copy.

What the store guarantees is unchanged and checked here on the file itself: a batch is all
in or all out (rows written by a failed batch are unreferenced, cut off or zeroed), rows a
crash left past the committed length are cut at the next open, a deleted or re-embedded
record's row is zeroed (also when a crash came between the commit and the zeroing) and
reused, a reader sees the writer's committed rows, and the exact index's payload holds
row numbers, not vectors, with the same results as an index keeping its own copy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query, Record
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.errors import CorruptError, DimensionError, NotFoundError, StorageFullError
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore.plugin import IndexContext, SpaceInfo, WriteBatch
from memcore.stores import _sqlite_writes
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

DIM = 8


def vec(i: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(i).standard_normal(DIM) * scale).astype(np.float32)


def records(start: int, stop: int, **kw: object) -> list[Record]:
    return [Record(f"r{i}", f"text {i}", vectors={"v": vec(i)}, **kw) for i in range(start, stop)]  # type: ignore[arg-type]


def space_file(path: Path) -> Path:
    return path / "vectors" / "0.f32"


def file_rows(path: Path) -> np.ndarray:
    return np.fromfile(space_file(path), dtype=np.float32).reshape(-1, DIM)


def committed(store: SQLiteStore) -> int:
    return int(store.db.execute("SELECT rows FROM vector_spaces WHERE name='v'").fetchone()[0])


def test_vectors_are_in_the_space_file_once_and_read_back(tmp_path):
    store = SQLiteStore(tmp_path)
    batch = records(0, 50)
    store.apply(WriteBatch(upserts=batch))
    assert committed(store) == 50
    store.close()
    rows = file_rows(tmp_path)
    assert rows.shape == (50, DIM) and np.array_equal(rows, np.stack([r.vectors["v"] for r in batch]))
    database = (tmp_path / "store.sqlite3").read_bytes()
    assert not any(r.vectors["v"].tobytes() in database for r in batch)  # the database holds row numbers, not the vectors
    store = SQLiteStore(tmp_path, SQLiteStoreConfig(read_only=True))
    got = store.get(["r3", "nope", "r49"])
    assert got[1] is None and np.array_equal(got[0].vectors["v"], vec(3)) and np.array_equal(got[2].vectors["v"], vec(49))
    matrix, present = store.vectors(["r49", "nope", "r0"], "v")
    assert present.tolist() == [True, False, True] and np.array_equal(matrix[0], vec(49)) and not matrix[1].any()
    store.close()


def test_a_torn_tail_is_cut_at_open(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 10)))
    store.close()
    with open(space_file(tmp_path), "ab") as fh:  # rows a batch wrote before a crash kept it from committing
        fh.write(np.ones((3, DIM), dtype=np.float32).tobytes() + b"\x01\x02")
    store = SQLiteStore(tmp_path)
    assert space_file(tmp_path).stat().st_size == 10 * DIM * 4
    store.apply(WriteBatch(upserts=records(10, 12)))
    assert np.array_equal(store.vectors(["r10", "r11", "r9"], "v")[0], np.stack([vec(10), vec(11), vec(9)]))
    store.close()


def test_a_truncated_space_file_is_corrupt(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 10)))
    store.close()
    with open(space_file(tmp_path), "r+b") as fh:
        fh.truncate(5 * DIM * 4)
    with pytest.raises(CorruptError, match="truncated"):
        SQLiteStore(tmp_path)


def test_a_failed_batch_leaves_no_rows_and_no_references(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 4)))
    store.apply(WriteBatch(deletes=["r1"]))  # row 1 free
    real = _sqlite_writes.SQLiteWrites._finish

    def failing(self, cur, batch, seq, logged):  # after the vectors were written, before the commit
        real(self, cur, batch, seq, logged)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_sqlite_writes.SQLiteWrites, "_finish", failing)
    with pytest.raises(StorageFullError):
        store.apply(WriteBatch(upserts=records(10, 13)))  # reuses row 1, appends rows 4 and 5
    monkeypatch.setattr(_sqlite_writes.SQLiteWrites, "_finish", real)
    assert committed(store) == 4 and space_file(tmp_path).stat().st_size == 4 * DIM * 4
    assert not file_rows(tmp_path)[1].any()  # the free row it wrote is zeros again
    assert store.get(["r10"]) == [None]
    store.apply(WriteBatch(upserts=records(10, 13)))
    assert np.array_equal(store.vectors(["r10", "r11", "r12", "r0"], "v")[0], np.stack([vec(10), vec(11), vec(12), vec(0)]))
    store.close()


def test_a_deleted_vector_is_zeroed_and_its_row_reused(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 6)))
    store.apply(WriteBatch(deletes=["r2", "r4"]))
    rows = file_rows(tmp_path)
    assert not rows[2].any() and not rows[4].any() and np.array_equal(rows[3], vec(3))
    assert vec(2).tobytes() not in space_file(tmp_path).read_bytes()
    store.apply(WriteBatch(upserts=records(10, 13)))  # two free rows, then one appended
    assert committed(store) == 7
    rows = file_rows(tmp_path)
    assert {tuple(rows[2]), tuple(rows[4]), tuple(rows[6])} == {tuple(vec(10)), tuple(vec(11)), tuple(vec(12))}
    store.close()


def test_a_new_vector_gets_a_new_row_and_a_rolled_back_update_keeps_the_old_one(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 3)))
    with pytest.raises(NotFoundError):  # rolled back: a link to a record that does not exist
        store.apply(WriteBatch(upserts=[Record("r1", "new", vectors={"v": vec(100)}, links=())], add_membership={"i": ["ghost"]}))
    assert np.array_equal(store.get(["r1"])[0].vectors["v"], vec(1))
    store.apply(WriteBatch(upserts=[Record("r1", "new", vectors={"v": vec(100)})]))
    assert np.array_equal(store.get(["r1"])[0].vectors["v"], vec(100))
    assert vec(1).tobytes() not in space_file(tmp_path).read_bytes()
    store.close()


def test_rows_freed_before_a_crash_are_zeroed_at_the_next_open(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 5)))
    monkeypatch.setattr(_sqlite_writes.SQLiteWrites, "_zero_freed", lambda self, pending: None)  # a crash right after the commit
    store.apply(WriteBatch(deletes=["r3"]))
    store.close()
    assert file_rows(tmp_path)[3].any()
    monkeypatch.undo()
    SQLiteStore(tmp_path).close()
    assert not file_rows(tmp_path)[3].any() and vec(3).tobytes() not in space_file(tmp_path).read_bytes()


def test_one_dimension_per_space(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=records(0, 2)))
    with pytest.raises(DimensionError):
        store.apply(WriteBatch(upserts=[Record("x", "x", vectors={"v": np.ones(DIM + 1, dtype=np.float32)})]))
    assert store.get(["x"]) == [None] and committed(store) == 2
    store.close()


def test_a_reader_sees_the_writers_committed_rows(tmp_path):
    writer = SQLiteStore(tmp_path)
    writer.apply(WriteBatch(upserts=records(0, 3)))
    reader = SQLiteStore(tmp_path, SQLiteStoreConfig(read_only=True))
    assert np.array_equal(reader.vectors(["r2"], "v")[0][0], vec(2))
    writer.apply(WriteBatch(upserts=records(3, 200)))
    writer.apply(WriteBatch(upserts=[Record("w", "w", vectors={"w": np.ones(3, dtype=np.float32)})]))  # a second space
    assert np.array_equal(reader.vectors(["r199", "r0"], "v")[0], np.stack([vec(199), vec(0)]))
    assert reader.get(["w"])[0].vectors["w"].tolist() == [1.0, 1.0, 1.0]
    mapped = reader.mapped_vectors("v")
    assert mapped is not None and mapped.rows(["r199", "nope"]).tolist() == [199, -1] and mapped.matrix().shape == (200, DIM)
    reader.close()
    writer.close()


# -- the exact index over the store's file --------------------------------------------------


def _collection(path: Path) -> Collection:
    return Collection(SQLiteStore(path), {"v": Space("v", DIM)}, get_registry(), path)


def _own_copy(metric: str, recs: list[Record]) -> ExactIndex:
    index = ExactIndex(ExactIndexConfig(space="v", metric=metric), IndexContext("own", {"v": SpaceInfo("v", DIM, "none")}))
    index.add(recs)
    return index


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_the_exact_index_searches_the_store_rows_with_the_results_of_its_own_copy(tmp_path, metric):
    col = _collection(tmp_path)
    col.create_index("e", "exact", space="v", metric=metric)
    items = [{"id": f"r{i}", "text": f"t{i}", "vectors": {"v": vec(i, scale=1 + i % 7)}, "metadata": {"g": i % 3}} for i in range(120)]
    col.insert(items)
    col.delete([f"r{i}" for i in range(0, 120, 9)])
    col.upsert([{**items[5], "vectors": {"v": vec(500)}}])
    col.insert([{"id": f"n{i}", "text": "n", "vectors": {"v": vec(600 + i)}, "metadata": {"g": 1}} for i in range(5)])  # freed rows reused
    live = [r for r in col.store.get(col.ids()) if r is not None]
    own = _own_copy(metric, live)
    queries = [Query(vectors={"v": vec(900 + j)}, k=10) for j in range(5)]

    def same(collection: Collection) -> None:
        index = collection._handle("e").index
        assert index._mapped is not None
        for q in queries:
            got = [(h.id, round(h.score, 4)) for h in collection.search_index("e", q, 10)]
            assert got == [(h.id, round(h.score, 4)) for h in own.search(q, 10)]
            allowed = set(collection.ids(where={"g": 1}))
            got = [(h.id, round(h.score, 4)) for h in index.search(q, 10, allowed)]
            assert got == [(h.id, round(h.score, 4)) for h in own.search(q, 10, allowed)]
        batch = index.search_batch(queries, 10)
        assert [[h.id for h in hits] for hits in batch] == [[h.id for h in own.search(q, 10)] for q in queries]

    same(col)
    col.close()
    folder = tmp_path / "indexes" / "e"
    assert {p.name for p in folder.iterdir() if p.is_file()} == {
        "ids.json",
        "ids.txt",
        "index.json",
        "rows.npy",
        *(["scale.npy"] if metric == "cosine" else []),
    }
    assert json.loads((folder / "index.json").read_text())["format_version"] == 3
    col = _collection(tmp_path)
    assert col._handle("e").loaded_from_disk
    same(col)
    col.close()


def test_the_exact_index_keeps_its_own_copy_of_vectors_the_store_does_not_hold(tmp_path):
    col = _collection(tmp_path)
    col.create_index("e", "exact", space="v")
    col.insert([{"id": f"r{i}", "text": "t", "vectors": {"v": vec(i)}} for i in range(10)])
    index = col._handle("e").index
    assert index._mapped is not None
    other = Record("r3", "t", vectors={"v": vec(77)})  # not what the store keeps for r3
    index.add([other])
    assert index._mapped is None and index.search(Query(vectors={"v": vec(77)}, k=1), 1)[0].id == "r3"
    assert [h.id for h in index.search(Query(vectors={"v": vec(4)}, k=1), 1)] == ["r4"]
    col.close()


def test_saved_ids_are_read_lazily_and_an_id_with_a_line_break_is_saved_as_json(tmp_path):
    col = _collection(tmp_path)
    col.create_index("e", "exact", space="v")
    col.insert([{"id": f"r{i}", "text": "t", "vectors": {"v": vec(i)}} for i in range(20)])
    col.close()
    assert (tmp_path / "indexes" / "e" / "ids.txt").read_text().split("\n") == [f"r{i}" for i in range(20)]
    col = _collection(tmp_path)
    index = col._handle("e").index
    assert index._rows_map is None  # a search needs no id -> position map
    assert col.search_index("e", Query(vectors={"v": vec(7)}, k=1), 1)[0].id == "r7" and index._rows_map is None
    col.delete(["r3"])
    col.insert([{"id": "a\nb", "text": "t", "vectors": {"v": vec(100)}}])
    assert col.search_index("e", Query(vectors={"v": vec(100)}, k=1), 1)[0].id == "a\nb"
    col.close()
    meta = json.loads((tmp_path / "indexes" / "e" / "ids.json").read_text())
    assert "a\nb" in meta["ids"] and not (tmp_path / "indexes" / "e" / "ids.txt").exists()
    col = _collection(tmp_path)
    assert col._handle("e").loaded_from_disk and len(col._handle("e").index) == 20
    assert col.search_index("e", Query(vectors={"v": vec(100)}, k=1), 1)[0].id == "a\nb"
    col.close()
