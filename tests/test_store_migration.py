"""Schema version 1 -> 2 of the SQLite store: a file written by the old code opens, migrated
atomically, with the same records, vectors, membership, log and state; its saved indexes
load and catch up from the migrated log.

The fixture ``tests/fixtures/store_v1/collection`` was written by memcore at schema version
1 (``tests/fixtures/store_v1/make_v1.py``, which also wrote ``expected.json``: what the old
store returned for every read).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from memcore import Collection
from memcore.errors import CorruptError, ValidationError
from memcore._plugins._host import get_registry
from memcore import Query, Record
from memcore.embedders._embedder import Space
from memcore.plugin import WriteBatch
from memcore.stores import _sqlite_schema as sqlite_schema
from memcore.stores._sqlite import SCHEMA_VERSION, SQLiteStore, SQLiteStoreConfig

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1"
SPACES = {"dense": Space("dense", 8), "small": Space("small", 4)}


@pytest.fixture
def v1(old_store: Callable[[str], Path]) -> Path:
    return old_store("store_v1")


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((FIXTURE / "expected.json").read_text())


def _tables(directory: Path) -> set[str]:
    with sqlite3.connect(directory / "store.sqlite3") as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _reads(store: SQLiteStore) -> dict:
    return {
        "last_seq": store.last_seq(),
        "log_start": store.log_start(),
        "ids": store.ids(),
        "ids_vec": store.ids(index="vec"),
        "ids_few": store.ids(index="few"),
        "records": [r.to_dict(with_vectors=True) for r in store.get(store.ids())],
        "memberships": {k: sorted(v) for k, v in store.memberships(store.ids()).items()},
        "log": {ix: [[op.seq, op.index, op.record_id, op.op] for op in store.ops_since(0, ix)] for ix in ("vec", "few")},
        "state": store.state_items("svc"),
    }


def test_the_fixture_is_a_version_1_file(v1, schema_version: Callable[[Path], str]):
    assert schema_version(v1) == "1" and {"membership", "oplog", "vectors"} <= _tables(v1)


def test_a_version_1_store_reads_the_same_after_migration(v1, expected, schema_version: Callable[[Path], str]):
    store = SQLiteStore(v1)
    got = _reads(store)
    store.close()
    assert got == {k: expected[k] for k in got}
    assert schema_version(v1) == str(SCHEMA_VERSION) == "4"
    assert "membership" not in _tables(v1)
    again = SQLiteStore(v1)  # a migrated file opens as it is
    assert _reads(again) == got
    assert again.integrity_check() == []
    again.close()


def test_vectors_of_the_migrated_file_through_the_reader_path(v1, expected):
    store = SQLiteStore(v1)
    ids = expected["ids"]
    dense, present = store.vectors(ids, "dense")
    want = {r["id"]: r["vectors"] for r in expected["records"]}
    assert present.all() and np.array_equal(dense, np.array([want[i]["dense"] for i in ids], dtype=np.float32))
    small, present = store.vectors(ids, "small")
    assert present.tolist() == ["small" in want[i] for i in ids]
    store.close()


def test_saved_indexes_load_and_catch_up_from_the_migrated_log(v1, expected):
    assert expected["saved_seq"] == {"vec": 7, "few": 7} and expected["last_seq"] == 11
    col = Collection(SQLiteStore(v1), SPACES, get_registry(), v1)
    try:
        assert all(col._indexes[name].loaded_from_disk for name in ("vec", "few"))
        records = {r["id"]: r for r in expected["records"]}
        for name, space, members in (("vec", "dense", expected["ids_vec"]), ("few", "small", expected["ids_few"])):
            assert sorted(members) == sorted(col.ids(index=name))
            query = np.array(records[members[0]]["vectors"][space], dtype=np.float32)
            hits = col.search_index(name, Query(vectors={space: query}, k=20), 20)
            assert sorted(h.id for h in hits) == sorted(members)  # r7 deleted, r3 out of "few", "late" added
            assert hits[0].id == members[0]
        assert col.get("r5").text == "record five, rewritten"
        col.insert([{"id": "after", "text": "written after the migration", "vectors": {"dense": np.ones(8, dtype=np.float32)}}], indexes=["vec"])
        assert col.search_index("vec", Query(vectors={"dense": np.ones(8, dtype=np.float32)}, k=1), 1)[0].id == "after"
    finally:
        col.close()
    reopened = Collection(SQLiteStore(v1), SPACES, get_registry(), v1)
    assert reopened._indexes["vec"].loaded_from_disk and "after" in reopened.ids(index="vec")
    reopened.close()


def test_a_failed_migration_leaves_the_version_1_file_as_it_was(v1, expected, monkeypatch, schema_version: Callable[[Path], str]):
    before = (v1 / "store.sqlite3").read_bytes()

    def broken(cur, slots):
        raise sqlite3.OperationalError("disk I/O error (injected)")

    monkeypatch.setattr(sqlite_schema, "ensure_vectors_view", broken)  # the last step of the migration
    with pytest.raises(CorruptError):
        SQLiteStore(v1)
    assert schema_version(v1) == "1" and {"membership", "oplog", "vectors"} <= _tables(v1)
    with sqlite3.connect(v1 / "store.sqlite3") as db:
        assert "member_of" not in {row[1] for row in db.execute("PRAGMA table_info(records)")}
    monkeypatch.undo()
    store = SQLiteStore(v1)
    assert _reads(store) == {k: expected[k] for k in _reads(store)}
    store.close()
    assert before  # the old bytes were a readable file to start with


def test_a_reader_does_not_migrate_and_says_how(v1, schema_version: Callable[[Path], str]):
    with pytest.raises(CorruptError, match="open it once for writing"):
        SQLiteStore(v1, SQLiteStoreConfig(read_only=True))
    assert schema_version(v1) == "1"


def test_a_newer_schema_is_refused(tmp_path):
    SQLiteStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "store.sqlite3") as db:
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(CorruptError, match=f"schema version {SCHEMA_VERSION + 1}"):
        SQLiteStore(tmp_path)


def test_index_names_with_the_membership_separator_are_refused_before_writing(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=[Record("a", "a")]))
    for batch in (WriteBatch(add_membership={"x|y": ["a"]}), WriteBatch(remove_membership={"|": ["a"]}), WriteBatch(drop_indexes=[""])):
        with pytest.raises(ValidationError, match="'\\|'"):
            store.apply(batch)
    assert store.last_seq() == 1 and store.memberships(["a"]) == {"a": set()}
    store.close()


def test_the_vectors_view_says_where_each_vector_is(tmp_path):
    store = SQLiteStore(tmp_path)
    store.apply(WriteBatch(upserts=[Record("a", "a", vectors={"v": np.ones(3, dtype=np.float32), "w": np.ones(2, dtype=np.float32)})]))
    store.apply(WriteBatch(upserts=[Record("b", "b", vectors={"v": np.zeros(3, dtype=np.float32)})]))
    rows = store.db.execute("SELECT record_id, space, dim, row FROM vectors ORDER BY space, record_id").fetchall()
    assert rows == [("a", "v", 3, 0), ("b", "v", 3, 1), ("a", "w", 2, 0)]
    with pytest.raises(sqlite3.OperationalError):  # read-only: the values are in vectors/<slot>.f32
        store.db.execute("UPDATE vectors SET row=5 WHERE record_id='a'")
    store.close()
