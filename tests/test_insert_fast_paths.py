"""The short paths of an insert of new records (session 17): the ``records`` rows bound
with fewer values, one statement for the file rows of a batch appended to a space, the adds
logged without an ``Op`` per record (:class:`AddedOps`). Each must store and log exactly
what the general path does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.errors import ValidationError
from memcore.model._record import Record
from memcore.stores._sqlite import SQLiteStore
from memcore.stores._store import AddedOps, Applied, Op, WriteBatch

DIM = 4


def open_collection(path: Path) -> Collection:
    col = Collection(SQLiteStore(path), {"dense": Space("dense", DIM)}, get_registry(), path)
    if not col.has_index("exact"):
        col.create_index("exact", "exact", space="dense")
    return col


def vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32) + 2.0


def rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path / "store.sqlite3") as db:
        return db.execute("SELECT id, user_id, agent_id, run_id, created_at = updated_at, member_of, hseq IS NOT NULL FROM records ORDER BY rowid").fetchall()


def file_rows(path: Path) -> dict[str, int]:
    with sqlite3.connect(path / "store.sqlite3") as db:
        return dict(db.execute("SELECT record_id, row FROM vectors").fetchall())


def test_added_ops_are_the_ops_the_general_path_builds() -> None:
    applied = AddedOps(7, {"ix": ["a", "b"], "iy": ["c"]})
    assert isinstance(applied, Applied) and applied.seq == 7
    assert applied.ops == (Op(7, "ix", "a", "add"), Op(7, "ix", "b", "add"), Op(7, "iy", "c", "add"))
    assert applied == Applied(7, applied.ops) and hash(applied) == hash(Applied(7, applied.ops))
    assert applied.adds == {"ix": ["a", "b"], "iy": ["c"]}
    assert Applied(7, applied.ops).adds is None


def test_sqlite_store_logs_adds_of_new_records_only(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    try:
        new = [Record.create(f"t{i}", id=f"n{i}", vectors={"dense": vectors(1, i)[0]}) for i in range(3)]
        applied = store.apply(WriteBatch(upserts=new, add_membership={"ix": ["n0", "n1", "n2"]}))
        assert applied.adds == {"ix": ["n0", "n1", "n2"]}
        assert store.ops_since(0, "ix") == list(applied.ops)
        mixed = store.apply(WriteBatch(upserts=[Record.create("t9", id="n9")], deletes=["n0"], add_membership={"ix": ["n9"]}))
        assert mixed.adds is None  # a delete in the batch: the general path, its Op objects
        assert [(op.record_id, op.op) for op in mixed.ops] == [("n0", "remove"), ("n9", "add")]
    finally:
        store.close()


def test_scoped_and_unscoped_rows_as_the_general_path_writes_them(tmp_path: Path) -> None:
    col = open_collection(tmp_path)
    col.insert_columns(["a", "b"], ids=["a", "b"], vectors={"dense": vectors(2, 0)})
    col.insert_columns(["c", "d"], ids=["c", "d"], vectors={"dense": vectors(2, 1)}, scope={"user_id": "u", "run_id": "r"})
    col.insert([{"id": "e", "text": "e", "vectors": {"dense": vectors(1, 2)[0]}}], scope={"agent_id": "g"})
    col.close()
    assert rows(tmp_path) == [
        ("a", None, None, None, 1, "|exact|", 1),
        ("b", None, None, None, 1, "|exact|", 1),
        ("c", "u", None, "r", 1, "|exact|", 1),
        ("d", "u", None, "r", 1, "|exact|", 1),
        ("e", None, "g", None, 1, "|exact|", 1),
    ]


def test_file_rows_appended_and_reused(tmp_path: Path) -> None:
    col = open_collection(tmp_path)
    first = vectors(5, 0)
    col.insert_columns([f"t{i}" for i in range(5)], ids=[f"a{i}" for i in range(5)], vectors={"dense": first})
    assert file_rows(tmp_path) == {f"a{i}": i for i in range(5)}  # one run: one statement
    col.delete(["a1", "a3"])
    second = vectors(4, 1)
    col.insert_columns([f"s{i}" for i in range(4)], ids=[f"b{i}" for i in range(4)], vectors={"dense": second})
    assert file_rows(tmp_path) == {"a0": 0, "a2": 2, "a4": 4, "b0": 1, "b1": 3, "b2": 5, "b3": 6}  # freed rows first
    col.close()
    col = open_collection(tmp_path)  # reopened: every record's vector read back from its row
    try:
        for rid, vector in [("a0", first[0]), ("a4", first[4]), ("b0", second[0]), ("b1", second[1]), ("b3", second[3])]:
            record = col.get(rid)
            assert np.array_equal(record.vectors["dense"], vector)
            hits = col.search_index("exact", Query(vectors={"dense": vector}, k=1), 1)
            assert hits[0].id == rid
    finally:
        col.close()


def test_norms_checked_names_only_a_column_batch_matrix(tmp_path: Path) -> None:
    from memcore.collection._columns import coerce_columns
    from memcore.model._record_rows import RecordRows, norms_checked

    given = vectors(3, 5)
    batch = coerce_columns(["a", "b", "c"], None, None, {"dense": given}, None, {"dense": Space("dense", DIM)})
    assert type(batch) is RecordRows
    assert norms_checked(batch.matrices["dense"])
    assert not norms_checked(given) and not norms_checked(batch.matrices["dense"].copy())
    col = open_collection(tmp_path)  # a NaN: refused by the column checks, no matrix trusted, nothing written
    try:
        bad = vectors(2, 6)
        bad[1, 0] = np.nan
        with pytest.raises(ValidationError):
            col.insert_columns(["a", "b"], vectors={"dense": bad})
        assert col.count() == 0
    finally:
        col.close()
