"""Filtered searches of the ``exact`` index over the SQLite store take the filter's matches as
rows of the store's vector file (issue 25): the store answers with one array, the index turns it
into its positions with one gather, and no id of the allowed set is read. Answers stay those of
a plain ``frozenset`` of ids, through deletes that free rows and inserts that reuse them, and
a scope never lets another scope's record through."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore import Collection, Query
from memcore.indexes._allowed import AllowedRows

DIM = 8


def _records(rng: np.random.Generator, start: int, count: int) -> list[dict]:
    return [
        {"id": f"r{i}", "text": f"doc {i}", "vectors": {"default": rng.standard_normal(DIM)}, "metadata": {"u": i % 5, "n": i}}
        for i in range(start, start + count)
    ]


def _open(path) -> Collection:
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore

    return Collection(SQLiteStore(path), {"default": Space("default", DIM)}, get_registry(), path)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m"
    c = _open(p)
    c.create_index("vec", "exact", metric="cosine")
    c.insert(_records(np.random.default_rng(0), 0, 400))
    c.close()
    return p


def _plain(col: Collection, query: Query, k: int) -> list[tuple[str, float]]:
    """The same search with a plain frozenset of the matching ids (no rows, no memo)."""
    plain = frozenset(col.ids(where=query.where, scope=query.scope))
    return [(h.id, round(h.score, 5)) for h in col._indexes["vec"].index.search(query, k, plain)]


def _got(col: Collection, query: Query, k: int) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 5)) for h in col.search_index("vec", query, k)]


def test_a_reopened_index_filters_by_rows_without_reading_ids(path, monkeypatch):
    col = _open(path)
    try:
        store, index = col.store, col._indexes["vec"].index
        read_ids = []
        monkeypatch.setattr(store, "allowed_ids", lambda **kw: read_ids.append(kw) or [])
        q = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
        for where in ({"u": 1}, {"n": {"$lt": 40}}, {"u": {"$in": [0, 2, 3]}}):
            hits = col.search_index("vec", Query(vectors={"default": q}, k=10, where=where), 10)
            assert len(hits) == 10
        assert read_ids == []  # the store never listed an id of a filter
        assert index._rows_map is None  # nor did the index build its id -> position map
        monkeypatch.undo()
        for where in ({"u": 1}, {"n": {"$lt": 40}}, {"u": {"$in": [0, 2, 3]}}):
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(col, query, 10) == _plain(col, query, 10)
    finally:
        col.close()


def test_the_allowed_set_is_rows_until_something_reads_its_ids(path):
    col = _open(path)
    try:
        query = Query(vectors={"default": np.ones(DIM, dtype=np.float32)}, k=5, where={"u": 2})
        col.search_index("vec", query, 5)
        allowed = col._allowed(query, rows_at=col.store.last_seq())
        assert isinstance(allowed, AllowedRows) and not allowed.resolved
        assert set(allowed) == set(col.ids(where={"u": 2}))  # read as ids on demand
        assert allowed.resolved
    finally:
        col.close()


def test_the_store_answers_rows_only_at_the_state_asked_for(path):
    col = _open(path)
    try:
        store = col.store
        seq = store.last_seq()
        where = Query(text="x", where={"u": 1}).parsed_where()
        rows = store.allowed_rows("default", seq, where=where)
        assert rows is not None and len(rows) == 80
        assert store.allowed_rows("default", seq - 1, where=where) is None  # another state: no rows
        assert store.allowed_rows("no-such-space", seq, where=where) is None
        assert len(store.allowed_rows("default", seq, where=Query(text="x", where={"u": 99}).parsed_where())) == 0
    finally:
        col.close()


def test_answers_stay_exact_through_deletes_and_reused_rows(path):
    col = _open(path)
    try:
        rng = random.Random(3)
        vecs = np.random.default_rng(3)
        live = {f"r{i}" for i in range(400)}
        nxt = 400
        filters = [{"u": 1}, {"u": {"$ne": 0}}, {"n": {"$gte": 200}}]
        for step in range(30):
            action = rng.choice(["delete", "insert", "update"])
            if action == "delete":  # frees rows the next insert reuses: positions move in the index
                gone = rng.sample(sorted(live), 15)
                col.delete(gone)
                live -= set(gone)
            elif action == "insert":
                col.insert(_records(vecs, nxt, 10))
                live |= {f"r{i}" for i in range(nxt, nxt + 10)}
                nxt += 10
            else:
                rid = rng.choice(sorted(live))
                col.update(rid, metadata={"u": rng.randrange(5), "n": rng.randrange(400)})
            q = vecs.standard_normal(DIM).astype(np.float32)
            for where in filters:
                query = Query(vectors={"default": q}, k=15, where=where)
                assert _got(col, query, 15) == _plain(col, query, 15), (step, action, where)
        col.close()
        col = _open(path)  # reopened: the rows path over moved positions (no identity)
        assert not col._indexes["vec"].index._mapped.ident
        q = vecs.standard_normal(DIM).astype(np.float32)
        for where in filters:
            query = Query(vectors={"default": q}, k=15, where=where)
            assert _got(col, query, 15) == _plain(col, query, 15)
    finally:
        col.close()


def test_a_scope_never_lets_another_scopes_record_through_reused_rows(tmp_path):
    p = tmp_path / "s"
    col = _open(p)
    try:
        col.create_index("vec", "exact")
        rng = np.random.default_rng(4)
        col.insert(_records(rng, 0, 50), scope={"user_id": "a"})
        col.insert(_records(rng, 50, 50), scope={"user_id": "b"})
        q = rng.standard_normal(DIM).astype(np.float32)
        for user in ("a", "b"):
            col.search_index("vec", Query(vectors={"default": q}, k=100, scope={"user_id": user}), 100)
        col.delete([f"r{i}" for i in range(0, 50, 2)])  # a's rows freed ...
        col.insert(_records(rng, 100, 25), scope={"user_id": "b"})  # ... and reused by b's records
        for user in ("a", "b"):
            hits = col.search_index("vec", Query(vectors={"default": q}, k=200, scope={"user_id": user}), 200)
            got = {h.id for h in hits}
            assert got == set(col.ids(scope=memcore_scope(user)))
    finally:
        col.close()


def memcore_scope(user: str):
    from memcore import Scope

    return Scope(user_id=user)


def test_a_field_index_without_the_values_type_is_rebuilt_with_it(path):
    import sqlite3

    from memcore.stores._sqlite_fields import INDEX_PREFIX

    db = sqlite3.connect(path / "store.sqlite3")  # the index as the previous version made it: value and id
    db.execute(f'DROP INDEX IF EXISTS "{INDEX_PREFIX}u"')
    db.execute(f"""CREATE INDEX "{INDEX_PREFIX}u" ON records (json_extract(metadata, '$."u"'), id)""")
    db.commit()
    db.close()
    col = _open(path)
    try:
        query = Query(vectors={"default": np.ones(DIM, dtype=np.float32)}, k=10, where={"u": 1})
        assert _got(col, query, 10) == _plain(col, query, 10)
        (sql,) = col.store.db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (INDEX_PREFIX + "u",)).fetchone()
        assert "json_type(" in sql and sql.endswith(", id)")
        where, params = col.store._where(query.parsed_where(), None, None)
        plan = " ".join(row[3] for row in col.store.db.execute(f"EXPLAIN QUERY PLAN SELECT r.rowid FROM records r WHERE {where}", params))
        assert "(<expr>=? AND <expr>=?)" in plan  # the type and the value both searched in the index
    finally:
        col.close()


@pytest.mark.parametrize("count", [1, 1023, 1024, 1025, 5000])
def test_gathered_dot_scores_blocks_as_one_gathered_product(count):
    from memcore.indexes._exact import GATHER_BLOCK, gathered_dot

    rng = np.random.default_rng(count)
    stored = rng.standard_normal((6000, 16)).astype(np.float32)
    picks = np.sort(rng.choice(6000, count, replace=False))
    q = rng.standard_normal(16).astype(np.float32)
    # the same products up to BLAS' rounding (a block's tail may take another kernel)
    np.testing.assert_allclose(gathered_dot(stored, picks, q), stored[picks].dot(q), rtol=1e-5, atol=1e-5)
    assert GATHER_BLOCK < 5000  # several blocks in the largest case


def test_a_set_above_the_gather_limit_ranks_like_a_gathered_product(tmp_path):
    from memcore.indexes._allowed import GATHER_MAX

    col = _open(tmp_path / "big")
    try:
        col.create_index("vec", "exact", metric="cosine")
        rng = np.random.default_rng(6)
        n = 4 * GATHER_MAX + 400  # a set of GATHER_MAX + 100 rows: under a quarter, above the limit
        col.insert([{"id": f"r{i}", "text": "d", "vectors": {"default": rng.standard_normal(DIM)}, "metadata": {"m": int(i % 4 == 0)}} for i in range(n)])
        q = rng.standard_normal(DIM).astype(np.float32)
        query = Query(vectors={"default": q}, k=20, where={"m": 1})
        assert GATHER_MAX < len(col.ids(where={"m": 1})) < n / 4 + 1
        assert _got(col, query, 20) == _plain(col, query, 20)
        index = col._indexes["vec"].index
        stored = index._mapped.raw()
        rows = np.array(sorted(index._rows[rid] for rid in col.ids(where={"m": 1})))
        unit = stored[index._mapped.file_rows(rows)]
        unit = unit / np.linalg.norm(unit, axis=1, keepdims=True)
        best = rows[np.argsort(-(unit @ (q / np.linalg.norm(q))), kind="stable")[:20]]
        assert [h[0] for h in _got(col, query, 20)] == [index._ids[r] for r in best.tolist()]
    finally:
        col.close()


def test_a_member_written_anew_is_found_at_its_new_row(path):
    col = _open(path)
    try:
        rng = np.random.default_rng(8)
        q = rng.standard_normal(DIM).astype(np.float32)
        query = Query(vectors={"default": q}, k=5, where={"u": 3})
        col.search_index("vec", query, 5)  # the set, as rows
        assert set(col._allowed(query))  # ... and its ids read (the writer carries such a set across its writes)
        col.update("r3", vectors={"default": q * 10})  # still a member, at a new row of the file
        hits = col.search_index("vec", query, 5)
        assert hits[0].id == "r3" and _got(col, query, 5) == _plain(col, query, 5)
        col.update("r8", metadata={"u": 3, "n": 8}, vectors={"default": q})  # enters the set, new row too
        assert _got(col, query, 5) == _plain(col, query, 5)
    finally:
        col.close()


def test_a_sets_first_query_keeps_no_gathered_copy_and_its_second_does(path):
    # a filter queried once never pays a set-sized copy's page faults; the answers are the same either way
    col = _open(path)
    try:
        index = col._indexes["vec"].index
        rng = np.random.default_rng(9)
        query = Query(vectors={"default": rng.standard_normal(DIM).astype(np.float32)}, k=5, where={"u": 4})
        allowed = col._allowed(query, rows_at=col.store.last_seq())
        assert 0 < len(col.ids(where={"u": 4})) <= len(index._ids) // 4  # a sparse set: gathered, not the product over every row
        first = _got(col, query, 5)
        assert first == _plain(col, query, 5)
        assert (id(index), "gathered") not in allowed._memo
        for seed in (10, 11):
            again = Query(vectors={"default": np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)}, k=5, where={"u": 4})
            assert _got(col, again, 5) == _plain(col, again, 5)
            assert col._allowed(again, rows_at=col.store.last_seq()) is allowed
            assert (id(index), "gathered") in allowed._memo
        col.insert(_records(rng, 1000, 10))  # a write: the derived set continues the count (its copy extended)
        after = col._allowed(query, rows_at=col.store.last_seq())
        assert after is not allowed
        assert _got(col, query, 5) == _plain(col, query, 5)
        assert (id(index), "gathered") in after._memo
    finally:
        col.close()
