"""Resolved filters are cached per store sequence number: never stale, in this process or
a reader; the SQLite store indexes the metadata fields filters read."""

from __future__ import annotations

import sqlite3

import pytest

import memcore
import memcore.plugin
from memcore.plugin import AllowedIds
from memcore import Collection
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.stores._sqlite_fields import INDEX_PREFIX


def ids_of(hits):
    return sorted(h.id for h in hits)


@pytest.fixture
def col(tmp_path):
    c = Collection.create(tmp_path / "c")
    c.create_index("vec", "exact")
    c.insert([{"id": f"r{i}", "text": f"note {i}", "metadata": {"user": f"u{i % 3}", "n": i}} for i in range(30)])
    yield c
    c.close()


def test_cached_sets_follow_every_write(col):
    where = {"user": "u1"}
    first = col.retrieve("note", k=50, where=where)
    assert ids_of(first) == sorted(f"r{i}" for i in range(1, 30, 3))
    assert ids_of(col.retrieve("note", k=50, where=where)) == ids_of(first)
    assert col._allowed_sets.hits >= 1
    col.insert([{"id": "new", "text": "note new", "metadata": {"user": "u1"}}])
    assert "new" in ids_of(col.retrieve("note", k=50, where=where))
    col.update("r1", metadata={"user": "u2"})
    assert "r1" not in ids_of(col.retrieve("note", k=50, where=where))
    col.delete("r4")
    assert "r4" not in ids_of(col.retrieve("note", k=50, where=where))
    # kinds are part of the key: 1 and True are different filters
    col.insert([{"id": "t", "text": "note t", "metadata": {"flag": True}}, {"id": "o", "text": "note o", "metadata": {"flag": 1}}])
    assert ids_of(col.retrieve("note", k=50, where={"flag": True})) == ["t"]
    assert ids_of(col.retrieve("note", k=50, where={"flag": 1})) == ["o"]
    assert ids_of(col.retrieve("note", k=50, where={"flag": 1.0})) == ["o"]


def test_scopes_and_indexes_are_part_of_the_key(tmp_path):
    c = Collection.create(tmp_path / "c")
    c.create_index("a", "exact")
    c.create_index("b", "exact")
    c.insert([{"id": f"a{i}", "text": f"x {i}", "metadata": {"k": 1}} for i in range(5)], indexes="a", scope={"user_id": "u1"})
    c.insert([{"id": f"b{i}", "text": f"x {i}", "metadata": {"k": 1}} for i in range(5)], indexes=["a", "b"], scope={"user_id": "u2"})
    assert len(c.retrieve("x", index="a", k=50, where={"k": 1})) == 10
    assert ids_of(c.retrieve("x", index="b", k=50, where={"k": 1})) == [f"b{i}" for i in range(5)]
    assert ids_of(c.retrieve("x", index="a", k=50, where={"k": 1}, scope={"user_id": "u1"})) == [f"a{i}" for i in range(5)]
    assert ids_of(c.retrieve("x", index="a", k=50, scope={"user_id": "u2"})) == [f"b{i}" for i in range(5)]
    c.close()


def test_a_reader_sees_the_writers_later_records(tmp_path):
    path = tmp_path / "c"
    writer = Collection.create(path)
    writer.create_index("vec", "exact")
    writer.insert([{"id": "a", "text": "note a", "metadata": {"user": "u"}}])
    writer.flush()
    reader = Collection.create(store=SQLiteStore(path, SQLiteStoreConfig(read_only=True)), path=path)
    assert ids_of(reader.retrieve("note", k=10, where={"user": "u"})) == ["a"]
    writer.insert([{"id": "b", "text": "note b", "metadata": {"user": "u"}}])
    assert ids_of(reader.retrieve("note", k=10, where={"user": "u"})) == ["a", "b"]
    reader.close()
    writer.close()


def test_the_store_indexes_filtered_fields(tmp_path, col):
    col.ids(where={"user": "u1", "n": {"$gt": 3}})
    db = sqlite3.connect(tmp_path / "c" / "store.sqlite3")
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    db.close()
    assert {INDEX_PREFIX + "user", INDEX_PREFIX + "n"} <= names
    plan = col.store.db.execute("EXPLAIN QUERY PLAN SELECT id FROM records r WHERE json_extract(r.metadata, '$.\"user\"') = 'u1'").fetchall()
    assert any(INDEX_PREFIX + "user" in row[3] for row in plan)
    col.insert([{"id": "late", "text": "late", "metadata": {"user": "u1", "n": 99}}])
    assert "late" in col.ids(where={"user": "u1", "n": {"$gt": 3}})


def test_a_filter_is_answered_from_the_field_index_alone(col):
    col.ids(where={"user": "u1"})
    sql = "SELECT r.id FROM records r WHERE json_extract(r.metadata, '$.\"user\"') = 'u1'"
    plan = " ".join(row[3] for row in col.store.db.execute("EXPLAIN QUERY PLAN " + sql))
    assert INDEX_PREFIX + "user" in plan and "TEMP B-TREE" not in plan  # an index search, no sort of the matches
    (sql,) = col.store.db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (INDEX_PREFIX + "user",)).fetchone()
    assert sql.endswith(", id)") and "json_type(" in sql  # the ids (and the values' types) are read from the index
    unordered = col.store.allowed_ids(where=memcore.Query(text="x", where={"user": "u1"}).parsed_where())
    assert sorted(unordered) == sorted(col.ids(where={"user": "u1"})) and len(unordered) == 10


def test_an_older_field_index_is_rebuilt_with_the_id(tmp_path):
    path = tmp_path / "c"
    c = Collection.create(path)
    c.create_index("vec", "exact")
    c.insert([{"id": f"r{i}", "text": f"note {i}", "metadata": {"user": f"u{i % 3}"}} for i in range(30)])
    c.close()
    db = sqlite3.connect(path / "store.sqlite3")  # an index as older versions made it: the expression alone
    db.execute(f"""CREATE INDEX "{INDEX_PREFIX}user" ON records (json_extract(metadata, '$."user"'))""")
    db.commit()
    db.close()
    reader = Collection.create(store=SQLiteStore(path, SQLiteStoreConfig(read_only=True)), path=path)
    assert len(reader.retrieve("note", k=30, where={"user": "u1"})) == 10  # a reader uses the older index as it is
    reader.close()
    c = Collection.create(path)
    assert len(c.retrieve("note", k=30, where={"user": "u1"})) == 10
    (sql,) = c.store.db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (INDEX_PREFIX + "user",)).fetchone()
    assert sql.endswith(", id)") and "json_type(" in sql
    c.close()


def test_field_indexes_can_be_turned_off(tmp_path):
    store = SQLiteStore(tmp_path, SQLiteStoreConfig(filter_indexes=0))
    c = Collection.create(store=store, path=tmp_path)
    c.insert([{"id": "a", "text": "a", "metadata": {"user": "u"}}])
    assert c.ids(where={"user": "u"}) == ["a"]
    assert not [r for r in store.db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'mc_field:%'")]
    c.close()


def test_allowed_ids_memo_is_per_owner_and_version():
    allowed = AllowedIds(["a", "b"])
    assert allowed == {"a", "b"} and isinstance(allowed, frozenset)

    class Owner:
        pass

    one, two = Owner(), Owner()
    calls = []
    assert allowed.memo(one, "t", 1, lambda: calls.append(1) or "x") == "x"
    assert allowed.memo(one, "t", 1, lambda: calls.append(2) or "y") == "x"
    assert allowed.memo(one, "t", 2, lambda: calls.append(3) or "z") == "z"
    assert allowed.memo(two, "t", 2, lambda: calls.append(4) or "w") == "w"
    assert calls == [1, 3, 4]


def test_memory_store_collections_cache_too():
    c = Collection.create()
    c.create_index("vec", "exact")
    c.insert([{"id": f"r{i}", "text": f"n {i}", "metadata": {"g": i % 2}} for i in range(10)])
    assert len(c.retrieve("n", k=20, where={"g": 1})) == 5
    c.delete("r1")
    assert len(c.retrieve("n", k=20, where={"g": 1})) == 4
    c.close()
    assert memcore.plugin.AllowedIds is AllowedIds


def test_new_stores_use_8k_pages_and_old_ones_keep_theirs(tmp_path):
    store = SQLiteStore(tmp_path / "new")
    assert store.db.execute("PRAGMA page_size").fetchone()[0] == 8192
    store.close()
    old = tmp_path / "old"
    old.mkdir()
    db = sqlite3.connect(old / "store.sqlite3")
    db.execute("CREATE TABLE x (a)")
    db.close()
    kept = SQLiteStore(old)  # an existing file keeps its page size (changing it would need a VACUUM)
    assert kept.db.execute("PRAGMA page_size").fetchone()[0] == 4096
    kept.close()
    reopened = SQLiteStore(tmp_path / "new")
    assert reopened.db.execute("PRAGMA page_size").fetchone()[0] == 8192
    reopened.close()


def test_cached_record_rows_never_go_stale(tmp_path):
    path = tmp_path / "c"
    writer = Collection.create(path)
    writer.create_index("vec", "exact")
    writer.insert([{"id": "a", "text": "alpha", "metadata": {"n": 1}}, {"id": "b", "text": "beta"}])
    reader = Collection.create(store=SQLiteStore(path, SQLiteStoreConfig(read_only=True)), path=path)
    for col in (writer, reader):
        first = col.store.get(["a", "b", "zz"], with_vectors=False)
        assert [r.text if r else None for r in first] == ["alpha", "beta", None]
        first[0].metadata["n"] = 99  # a caller's change never reaches the cache
        assert col.store.get(["a"], with_vectors=False)[0].metadata == {"n": 1}
    writer.update("a", text="alpha 2", metadata={"n": 2})
    writer.link("b", "a")
    for col in (writer, reader):
        a, b = col.store.get(["a", "b"], with_vectors=False)
        assert (a.text, a.metadata) == ("alpha 2", {"n": 2})
        assert [l.target for l in b.links] == ["a"]
    writer.delete("b")
    for col in (writer, reader):
        assert col.store.get(["b", "a"], with_vectors=False)[0] is None
    store = writer.store
    store._rows.limit = 3
    writer.insert([{"id": f"x{i}", "text": f"x{i}"} for i in range(5)])
    got = store.get([f"x{i}" for i in range(5)] + ["a"], with_vectors=False)
    assert [r.text for r in got] == [f"x{i}" for i in range(5)] + ["alpha 2"]
    assert [r.text for r in store.get(["x0", "x4", "a"], with_vectors=False)] == ["x0", "x4", "alpha 2"]
    reader.close()
    writer.close()


def test_the_writers_own_writes_carry_cached_sets_forward(col):
    where = {"user": "u1"}
    col.retrieve("note", k=50, where=where)
    before = col._allowed(col.make_query("note", where=where), "vec")
    col.set_state({("app", "tick"): 1})  # no record changed: the same set, memos included
    assert col._allowed(col.make_query("note", where=where), "vec") is before
    col.insert([{"id": "other", "text": "note other", "metadata": {"user": "u2"}}])  # not in the set: kept
    assert col._allowed(col.make_query("note", where=where), "vec") is before
    misses = col._allowed_sets.misses
    col.insert([{"id": "mine", "text": "note mine", "metadata": {"user": "u1"}}])
    after = col._allowed(col.make_query("note", where=where), "vec")
    assert after is not before and after == before | {"mine"}
    assert col._allowed_sets.misses == misses  # carried forward, not resolved again
    col.store.apply(memcore.plugin.WriteBatch(state={("app", "x"): 1}))  # a write the collection did not see: resolved again
    col._allowed(col.make_query("note", where=where), "vec")
    assert col._allowed_sets.misses == misses + 1


FILTERS = [
    {"user": "u1"},
    {"user": {"$ne": "u1"}},
    {"n": {"$gte": 10}},
    {"$or": [{"user": "u0"}, {"n": {"$lt": 3}}]},
    {"user": {"$nin": ["u0", "u2"]}},
    {"tag": {"$in": [1, "1", True]}},
    {"tag": None},
]


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_carried_sets_equal_a_fresh_resolution_after_random_writes(tmp_path, store):
    import random

    rng = random.Random(5)
    c = Collection.create(tmp_path / "c" if store == "sqlite" else None)
    c.create_index("vec", "exact")

    def meta():
        out = {"user": f"u{rng.randrange(3)}", "n": rng.randrange(20)}
        if rng.random() < 0.5:
            out["tag"] = rng.choice([1, "1", True, 1.0, None, [1]])
        if rng.random() < 0.2:
            del out["user"]
        return out

    scopes = [None, {"user_id": "a"}, {"user_id": "b", "agent_id": "x"}]
    c.insert([{"id": f"r{i}", "text": f"note {i}", "metadata": meta()} for i in range(40)], scope={"user_id": "a"})
    for step in range(60):
        for where in FILTERS:
            for scope in scopes:
                q = c.make_query("note", where=where, scope=scope)
                cached = c._allowed(q, "vec")
                assert set(cached) == set(c.store.ids(where=q.parsed_where(), scope=q.scope)), (step, where, scope)
        action = rng.randrange(5)
        ids = c.ids()
        if action == 0:
            c.insert([{"id": f"n{step}-{j}", "text": "note", "metadata": meta()} for j in range(rng.randrange(1, 4))], scope=rng.choice(scopes))
        elif action == 1 and ids:
            c.update(rng.choice(ids), metadata=meta())
        elif action == 2 and ids:
            c.delete(rng.sample(ids, min(len(ids), rng.randrange(1, 3))))
        elif action == 3:
            c.set_state({("app", "k"): step})
        elif ids:
            c.upsert([{"id": rng.choice(ids), "text": "again", "metadata": meta()}], scope=rng.choice(scopes))
    assert c._allowed_sets.carried > 0
    c.close()


def test_a_write_too_large_to_recheck_empties_the_cache(col, monkeypatch):
    import memcore.indexes._allowed

    monkeypatch.setattr(memcore.indexes._allowed, "ADVANCE_BUDGET", 5)
    where = {"user": "u1"}
    col.retrieve("note", k=50, where=where)
    misses = col._allowed_sets.misses
    col.insert([{"id": f"bulk{i}", "text": "note bulk", "metadata": {"user": "u1"}} for i in range(6)])
    assert len(col._allowed_sets._entries) == 0
    assert {f"bulk{i}" for i in range(6)} <= {h.id for h in col.retrieve("note", k=100, where=where)}
    assert col._allowed_sets.misses == misses + 1
