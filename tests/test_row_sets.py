"""Saved row sets (issue 25): the SQLite writer saves the file rows of the filters it resolved at
its last state, and the next process answers the same filter, scope and space from the file while
the store is at exactly that state. Hits are always those of the SQL path: after a reopen, after
writes since the save (this process's or another's), through deletes, updates, forgets, scopes,
and a damaged file."""

from __future__ import annotations

import numpy as np
import pytest

from memcore import Collection, Query, Scope
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.stores._sqlite_row_sets import ROW_SETS_FILE

DIM = 8
WHERES = [
    {"u": 1},
    {"u": {"$in": [0, 3]}},
    {"n": {"$lt": 60}},
    {"$and": [{"u": 2}, {"n": {"$gte": 100}}]},
    {"tag": "b"},
    {"u": 1.0},
    {"tag": {"$ne": "a"}},
]
SCOPES = [None, Scope(user_id="alice"), Scope(user_id="bob"), Scope(user_id="alice", run_id="r1")]


def _records(rng: np.random.Generator, start: int, count: int) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "text": f"doc {i}",
            "vectors": {"default": rng.standard_normal(DIM)},
            "metadata": {"u": i % 5, "n": i, "tag": "ab"[i % 2]},
            "scope": {"user_id": ("alice", "bob")[i % 3 == 0], "run_id": f"r{i % 2}"},
        }
        for i in range(start, start + count)
    ]


def _open(path, read_only: bool = False) -> Collection:
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space

    store = SQLiteStore(path, SQLiteStoreConfig(read_only=read_only))
    return Collection(store, {"default": Space("default", DIM)}, get_registry(), path)


def _query(seed: int, where, scope, k: int = 8) -> Query:
    return Query(vectors={"default": np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)}, k=k, where=where, scope=scope)


def _plain(col: Collection, query: Query) -> list[tuple[str, float]]:
    """The same search with a plain frozenset of the matching ids (the SQL path, no rows)."""
    plain = frozenset(col.ids(where=query.where, scope=query.scope))
    return [(h.id, round(h.score, 5)) for h in col._indexes["vec"].index.search(query, query.k, plain)]


def _got(col: Collection, query: Query) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 5)) for h in col.search_index("vec", query, query.k)]


def _every(col: Collection, seed: int = 0, k: int = 8) -> None:
    """Every filter under every scope answers as the SQL path does (``k`` above the record
    count: every allowed record, ranked)."""
    for i, where in enumerate(WHERES):
        for j, scope in enumerate(SCOPES):
            query = _query(seed + 10 * i + j, where, scope, k)
            assert _got(col, query) == _plain(col, query), (where, scope)


def _sql_statements(col: Collection) -> list[str]:
    seen: list[str] = []
    col.store.db.set_trace_callback(seen.append)
    return seen


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m"
    c = _open(p)
    c.create_index("vec", "exact", metric="cosine")
    c.insert(_records(np.random.default_rng(0), 0, 300))
    _every(c)  # every filter resolved at the last state: saved at close
    c.close()
    return p


def test_a_reopened_store_answers_its_saved_filters_without_sql(path):
    assert (path / ROW_SETS_FILE).is_file()
    col = _open(path)
    try:
        statements = _sql_statements(col)
        for i, where in enumerate(WHERES):
            for j, scope in enumerate(SCOPES):
                col.search_index("vec", _query(100 + i + j, where, scope), 8)
        assert not [s for s in statements if "group_concat" in s]  # no filter resolved in SQL
        col.store.db.set_trace_callback(None)
        _every(col, seed=200)
        never = _query(1, {"u": 4}, None)  # a filter never resolved before: SQL, as ever
        assert _got(col, never) == _plain(col, never)
    finally:
        col.close()


def test_no_filter_value_or_scope_is_written_in_clear(path):
    data = (path / ROW_SETS_FILE).read_bytes()
    for word in (b"alice", b"bob", b"tag", b'"u"', b"r1"):
        assert word not in data


@pytest.mark.parametrize(
    "write",
    [
        lambda c: c.insert(_records(np.random.default_rng(5), 300, 20)),
        lambda c: c.delete(["r1", "r6", "r11", "r3"]),
        lambda c: (c.delete([f"r{i}" for i in range(0, 40, 3)]), c.insert(_records(np.random.default_rng(8), 400, 10))),  # rows reused
        lambda c: c.update("r2", metadata={"u": 1, "n": 2, "tag": "b"}),
        lambda c: c.update("r4", vectors={"default": np.ones(DIM)}),
        lambda c: c.forget(Scope(user_id="alice")),
    ],
    ids=["insert", "delete", "delete-insert", "update-metadata", "update-vector", "forget"],
)
def test_writes_since_the_save_are_honoured(path, write):
    col = _open(path)
    try:
        _every(col, seed=300, k=1000)  # served from the file
        write(col)
        _every(col, seed=400, k=1000)  # stale: resolved again
    finally:
        col.close()
    col = _open(path)  # what that writer saved at its last state
    try:
        _every(col, seed=500, k=1000)
    finally:
        col.close()


@pytest.mark.parametrize("write", ["forget", "delete", "insert"])
def test_the_writers_first_write_removes_the_file_before_it_commits(path, write):
    """Every saved set is stale from the first write on: the file goes with that write, not
    at close, so a forgotten scope's keys and rows are not left on disk meanwhile."""
    col = _open(path)
    try:
        _every(col, seed=700)  # served from the file
        assert (path / ROW_SETS_FILE).is_file()
        {
            "forget": lambda: col.forget(Scope(user_id="alice")),
            "delete": lambda: col.delete(["r1"]),
            "insert": lambda: col.insert(_records(np.random.default_rng(9), 500, 3)),
        }[write]()
        assert not (path / ROW_SETS_FILE).exists()
        _every(col, seed=800, k=1000)  # resolved again, as before
    finally:
        col.close()


def test_a_write_between_two_processes_makes_the_file_stale(path):
    col = _open(path)
    col.insert(_records(np.random.default_rng(6), 300, 30))  # nothing resolved after it: the stale file goes
    col.delete(["r5", "r10"])
    col.close()
    assert not (path / ROW_SETS_FILE).exists()
    col = _open(path)
    try:
        _every(col, seed=600, k=1000)
    finally:
        col.close()


def test_a_reader_uses_the_file_only_at_the_state_it_was_saved_at(path):
    reader = _open(path, read_only=True)
    try:
        _every(reader, seed=700)
        writer = _open(path)
        try:
            writer.delete(["r1", "r2", "r3", "r8"])
            writer.insert(_records(np.random.default_rng(7), 300, 10))
            reader_sees = _open(path, read_only=True)
            try:
                _every(reader_sees, seed=800, k=1000)
            finally:
                reader_sees.close()
        finally:
            writer.close()
    finally:
        reader.close()


def test_a_scope_is_never_served_another_scopes_rows(path):
    col = _open(path)
    try:
        for where in WHERES:
            for scope in SCOPES[1:]:
                hits = col.search_index("vec", _query(9, where, scope), 50)
                stored = col.get_many([h.id for h in hits])
                assert all(scope.covers(r.scope) for r in stored), (where, scope)
    finally:
        col.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:30],
        lambda b: b[: len(b) - 8],
        lambda b: b"garbage" * 20,
        lambda b: b[:16] + (2**62).to_bytes(8, "little") + b[24:],  # another state
        lambda b: b[: len(b) - 8] + (-5).to_bytes(8, "little", signed=True),  # a negative row
        lambda b: b[: len(b) - 8] + (3).to_bytes(8, "little"),  # another record's row
        lambda b: b[: len(b) - 100] + bytes([b[len(b) - 100] ^ 1]) + b[len(b) - 99 :],  # a flipped bit
        lambda b: b"",
    ],
    ids=["header", "rows", "garbage", "seq", "negative", "another-row", "bit", "empty"],
)
def test_a_damaged_file_is_ignored_and_replaced(path, damage):
    file = path / ROW_SETS_FILE
    file.write_bytes(damage(file.read_bytes()))
    col = _open(path)
    try:
        _every(col, seed=900, k=1000)
    finally:
        col.close()
    col = _open(path)  # the writer saved what it resolved anew
    try:
        statements = _sql_statements(col)
        col.search_index("vec", _query(3, WHERES[0], None), 8)
        assert not [s for s in statements if "group_concat" in s]
    finally:
        col.close()
    assert not [p.name for p in path.iterdir() if p.name.endswith(".tmp")]


def test_a_store_restored_from_a_backup_never_uses_the_later_file(tmp_path):
    # a backup of an earlier state, restored beside the file saved later: the next writes reach the
    # file's sequence number with other records, and must never be answered from it
    import shutil

    path = tmp_path / "m"
    col = _open(path)
    col.create_index("vec", "exact", metric="cosine")
    col.insert(_records(np.random.default_rng(0), 0, 200))
    col.close()
    backup = tmp_path / "backup"
    shutil.copytree(path, backup)
    col = _open(path)
    for i in range(3):
        col.insert(_records(np.random.default_rng(10 + i), 200 + 10 * i, 10))
    _every(col, k=1000)
    col.close()
    assert (path / ROW_SETS_FILE).is_file()
    for item in backup.iterdir():  # everything restored but the saved row sets
        target = path / item.name
        if target.is_dir():
            shutil.rmtree(target)
        shutil.copytree(item, target) if item.is_dir() else shutil.copy2(item, target)
    col = _open(path)
    try:
        for i in range(3):  # the same number of writes, other records at the same rows of the file
            other = _records(np.random.default_rng(20 + i), 500 + 10 * i, 10)
            for r in other:
                r["metadata"] = {"u": 4, "n": 999, "tag": "a"}
                r["scope"] = {"user_id": "bob", "run_id": "r0"}
            col.insert(other)
        _every(col, seed=1000, k=1000)
    finally:
        col.close()
