"""Schema version 3 -> 4 of the SQLite store (issue 25: an insert's version kept in its
record's row, ``records.hseq``, instead of a ``history`` row): a collection written by memcore
before the change opens with the same records, history (every version of every id, and
``history_ids``) and search results, and what is written after the migration keeps history
the same way as before.

The fixture ``tests/fixtures/store_v3/collection`` was written at schema version 3 by
``tests/fixtures/store_v3/make_v3.py`` (which also wrote ``expected.json``)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores import _sqlite_schema
from memcore.errors import CorruptError
from memcore.stores._sqlite import SCHEMA_VERSION, SQLiteStore, SQLiteStoreConfig

FIXTURE = Path(__file__).parent / "fixtures" / "store_v3"
SPACES = {"dense": Space("dense", 8)}


@pytest.fixture
def v3(old_store: Callable[[str], Path]) -> Path:
    return old_store("store_v3")


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((FIXTURE / "expected.json").read_text())


def _history(store: SQLiteStore) -> dict:
    return {rid: [{**asdict(v), "scope": None if v.scope is None else v.scope.as_dict()} for v in store.history(rid)] for rid in store.history_ids()}


def _count(directory: Path, sql: str) -> int:
    with sqlite3.connect(directory / "store.sqlite3") as db:
        return int(db.execute(sql).fetchone()[0])


def test_the_fixture_is_version_3(v3, schema_version: Callable[[Path], str]):
    assert schema_version(v3) == "3"
    assert _count(v3, "SELECT count(*) FROM history WHERE op = 'insert'") == 11  # every insert a row


def test_a_version_3_collection_opens_migrated_with_the_same_records_history_and_hits(v3, expected, schema_version: Callable[[Path], str]):
    col = Collection(SQLiteStore(v3), SPACES, get_registry(), v3)
    try:
        assert schema_version(v3) == str(SCHEMA_VERSION) == "4"
        store = col.store
        assert store.last_seq() == expected["last_seq"] and store.ids() == expected["ids"]
        assert [r.to_dict(with_vectors=True) for r in store.get(store.ids())] == expected["records"]
        assert store.history_ids() == expected["history_ids"]
        assert json.loads(json.dumps(_history(store))) == expected["history"]
        query = np.asarray(expected["query"], dtype=np.float32)
        hits = [[h.id, round(h.score, 5)] for h in col.search_index("vec", Query(vectors={"dense": query}, k=20), 20)]
        assert hits == expected["hits"]
        # written after the migration: an insert keeps its version in its row, a change writes it out
        col.insert([{"id": "new", "text": "after the migration", "metadata": {"n": 1}, "vectors": {"dense": np.ones(8, dtype=np.float32)}}])
        seq = store.last_seq()
        assert _count(v3, "SELECT count(*) FROM history WHERE record_id = 'new'") == 0
        col.update("r0", metadata={"n": 100})  # a version 3 record: its insert row stays, the update is added
        col.update("new", metadata={"n": 2})
        assert [(v.seq, v.op, v.text, v.metadata) for v in store.history("new")] == [
            (seq, "insert", "after the migration", {"n": 1}),
            (seq + 2, "update", "after the migration", {"n": 2}),
        ]
        assert [(v.op, v.metadata) for v in store.history("r0")] == [("insert", {"n": 0, "tag": "t0"}), ("update", {"n": 100})]
        assert store.history_ids() == [*expected["history_ids"], "new"]
    finally:
        col.close()


def test_a_migration_cut_short_leaves_the_version_3_file_and_runs_again(v3, expected, monkeypatch, schema_version: Callable[[Path], str]):
    real = _sqlite_schema._migrate_3_to_4

    def cut_short(cur):
        real(cur)
        raise OSError(28, "No space left on device")  # the transaction never commits

    monkeypatch.setattr(_sqlite_schema, "_migrate_3_to_4", cut_short)
    with pytest.raises(Exception, match="No space left"):
        SQLiteStore(v3)
    assert schema_version(v3) == "3"
    monkeypatch.undo()
    store = SQLiteStore(v3)
    try:
        assert schema_version(v3) == "4"
        assert json.loads(json.dumps(_history(store))) == expected["history"]
    finally:
        store.close()


def test_a_reader_does_not_migrate_a_version_3_file(v3, schema_version: Callable[[Path], str]):
    with pytest.raises(CorruptError, match="schema version 3: open it once for writing"):
        SQLiteStore(v3, SQLiteStoreConfig(read_only=True))
    assert schema_version(v3) == "3"


def test_inserts_write_no_history_rows_and_history_reads_the_same(tmp_path):
    """The history of a fresh store: inserts kept in rows, written out on the first change or
    delete (text kept, or erased), ordered as before; a forgotten scope's versions go."""
    col = Collection(SQLiteStore(tmp_path / "c"), SPACES, get_registry(), tmp_path / "c")
    try:
        vec = np.ones(8, dtype=np.float32)
        col.insert([{"id": f"a{i}", "text": f"text {i}", "metadata": {"i": i}, "vectors": {"dense": vec}} for i in range(4)])
        first = col.store.last_seq()
        col.insert([{"id": "s", "text": "scoped", "vectors": {"dense": vec}, "scope": {"user_id": "bob"}}])
        assert _count(tmp_path / "c", "SELECT count(*) FROM history") == 0
        col.delete("a3")
        col.update("a0", text="changed", vectors={"dense": vec})
        col.upsert([{"id": "a1", "text": "text 1", "metadata": {"i": 1}, "vectors": {"dense": 2 * vec}}])  # vectors only: no version
        store = col.store
        assert [(v.seq, v.op, v.text) for v in store.history("a0")] == [(first, "insert", "text 0"), (first + 3, "update", "changed")]
        assert [(v.seq, v.op, v.text, v.metadata) for v in store.history("a1")] == [(first, "insert", "text 1", {"i": 1})]
        assert [(v.op, v.text) for v in store.history("a3")] == [("insert", None), ("delete", None)]
        assert store.history("a1")[0].at == store.get(["a1"])[0].created_at
        assert store.history_ids() == ["a0", "a1", "a2", "a3", "s"]
        assert _count(tmp_path / "c", "SELECT count(*) FROM history") == 4  # a0 (insert, update), a3 (insert, delete)
        col.forget({"user_id": "bob"})
        assert store.history("s") == [] and "s" not in store.history_ids()
    finally:
        col.close()
