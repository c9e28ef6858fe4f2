"""The SQLite writer's row cache forgets, in each write, only the rows that write can change.

Random write batches (upserts with links, scopes and metadata; deletes of link targets;
membership changes; dropped indexes; failing batches), each followed by cached reads
(``get(with_vectors=False)`` and ``get_batch``) of random ids: the writer must answer exactly
what the in-memory store and a reader opening the same file answer. Records handed out as a
:class:`~memcore.model._record_batch.RecordBatch` stay what they were when read, whatever is written
later."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from memcore.errors import MemcoreError
from memcore import Link, Record, Scope
from memcore.plugin import WriteBatch
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.stores._sqlite import FORGET_UP_TO, RowCache

POOL = [f"r{i}" for i in range(16)]
SCOPES = [None, Scope("u1"), Scope("u2", "a1"), Scope("u1", None, "run")]


def rec(rid: str, rng: random.Random) -> Record:
    # sorted by target, as the SQLite store returns them
    links = tuple(Link(t, rng.choice(["rel", "cites"]), rng.random()) for t in sorted({rng.choice(POOL) for _ in range(rng.randrange(0, 3))}) if t != rid)
    metadata = {"n": rng.randrange(5)} if rng.random() < 0.7 else {"nested": {"n": rng.randrange(5)}, "tags": ["a", rng.choice("bc")]}
    return Record(rid, f"text {rng.random()}", metadata, {"v": np.full(3, rng.random() + 0.5, dtype=np.float32)}, links, rng.choice(SCOPES), 1.0, rng.random())


def random_batch(rng: random.Random) -> WriteBatch:
    upserts = [rec(rid, rng) for rid in rng.sample(POOL, rng.randrange(0, 3))]
    deletes = rng.sample(POOL, rng.randrange(1, 3)) if rng.random() < 0.35 else []
    add = {ix: rng.sample(POOL, rng.randrange(1, 4)) for ix in ("a", "b") if rng.random() < 0.4}
    remove = {ix: rng.sample(POOL, 1) for ix in ("a", "b") if rng.random() < 0.2}
    state = {("svc", "k"): rng.randrange(9)} if rng.random() < 0.2 else {}
    drop = ["b"] if rng.random() < 0.05 else []
    return WriteBatch(upserts=upserts, deletes=deletes, add_membership=add, remove_membership=remove, state=state, drop_indexes=drop)


def rows_of(records) -> list[tuple | None]:
    return [None if r is None else (r.id, r.text, r.metadata, r.links, r.scope, r.created_at, r.updated_at, dict(r.vectors)) for r in records]


def batch_rows(store, ids) -> list[tuple | None]:
    batch = store.get_batch(ids)
    return rows_of([batch.record(rid) for rid in ids])


@pytest.mark.parametrize("seed", range(6))
def test_cached_reads_after_random_writes_equal_fresh_reads(tmp_path, seed):
    rng = random.Random(seed)
    writer, memory = SQLiteStore(tmp_path / "s"), MemoryStore()
    reader = None
    held: list[tuple[object, list[str], list[tuple | None]]] = []  # record batches read earlier, with what they held then
    try:
        first = [rec(rid, rng) for rid in POOL[:10]]
        for r in first:
            r.links = tuple(link for link in r.links if link.target in POOL[:10])
        for store in (writer, memory):
            store.apply(WriteBatch(upserts=first, add_membership={"a": POOL[:10]}))
        reader = SQLiteStore(tmp_path / "s", SQLiteStoreConfig(read_only=True))
        for step in range(250):
            for _ in range(rng.randrange(0, 3)):  # cache some rows before the write
                asked = rng.sample(POOL, rng.randrange(1, 10))
                assert rows_of(writer.get(asked, with_vectors=False)) == rows_of(memory.get(asked, with_vectors=False))
                if rng.random() < 0.3:
                    held.append((writer.get_batch(asked), asked, batch_rows(memory, asked)))
            batch = random_batch(rng)
            outcomes = []
            for store in (writer, memory):
                try:
                    store.apply(batch)
                    outcomes.append(None)
                except MemcoreError as exc:
                    outcomes.append(type(exc))
            assert outcomes[0] == outcomes[1], (step, outcomes)
            asked = rng.sample(POOL, rng.randrange(1, len(POOL)))
            expected = rows_of(memory.get(asked, with_vectors=False))
            assert rows_of(writer.get(asked, with_vectors=False)) == expected, step
            assert batch_rows(writer, asked) == expected, step
            assert rows_of(reader.get(asked, with_vectors=False)) == expected, step  # another connection, its own cache rules
            if rng.random() < 0.1:  # a fresh connection on the same file
                fresh = SQLiteStore(tmp_path / "s", SQLiteStoreConfig(read_only=True))
                try:
                    assert rows_of(fresh.get(asked, with_vectors=False)) == expected
                finally:
                    fresh.close()
        for batch, asked, then in held:  # snapshots: what they held when read
            assert rows_of([batch.record(rid) for rid in asked]) == then
    finally:
        writer.close()
        if reader is not None:
            reader.close()


def test_a_write_keeps_the_rows_it_cannot_change(tmp_path):
    """What the cache keeps: rows of records a batch does not involve; what it forgets: the
    records written, deleted, re-membered, and those that lose a link to a deleted record."""
    store = SQLiteStore(tmp_path / "s")
    try:
        store.apply(
            WriteBatch(
                upserts=[
                    Record("a", "a", {}, {}, (), None, 1.0, 1.0),
                    Record("b", "b", {}, {}, (Link("a"),), None, 1.0, 1.0),
                    Record("c", "c", {}, {}, (), None, 1.0, 1.0),
                    Record("d", "d", {}, {}, (), None, 1.0, 1.0),
                ],
                add_membership={"ix": ["a", "b", "c", "d"]},
            )
        )
        everything = ["a", "b", "c", "d"]
        store.get(everything, with_vectors=False)
        assert set(store._rows.rows) == set(everything)
        store.apply(WriteBatch(upserts=[Record("e", "e", {}, {}, (), None, 1.0, 1.0)]))  # a new record: every row kept
        assert set(store._rows.rows) == set(everything)
        store.apply(WriteBatch(deletes=["a"]))  # b loses its link to a
        assert set(store._rows.rows) == {"c", "d"}
        assert store.get(["b"], with_vectors=False)[0].links == ()
        store.apply(WriteBatch(remove_membership={"ix": ["c"]}, state={("s", "k"): 1}))
        assert set(store._rows.rows) == {"b", "d"}
        store.apply(WriteBatch(drop_indexes=["ix"]))  # index-wide: everything forgotten
        assert store._rows.rows == {}
    finally:
        store.close()


def test_row_cache_forget_keeps_snapshots():
    cache = RowCache(limit=10)
    cache.put({"a": ("a",), "b": ("b",)})
    held = cache.rows
    cache.forget({"x"})  # none held: the same dict, shared
    assert cache.rows is held
    assert cache.put({"c": ("c",)})  # copied before adding: the snapshot does not grow
    assert held == {"a": ("a",), "b": ("b",)} and cache.rows == {"a": ("a",), "b": ("b",), "c": ("c",)}
    current = cache.rows
    assert cache.put({"d": ("d",)}) and cache.rows is current  # no write since: added in place
    cache.forget({"a"})
    assert current == {"a": ("a",), "b": ("b",), "c": ("c",), "d": ("d",)} and cache.rows == {"b": ("b",), "c": ("c",), "d": ("d",)}
    cache.forget({f"x{i}" for i in range(FORGET_UP_TO + 1)})  # a large write: everything forgotten
    assert cache.rows == {}


def test_threads_reading_while_one_writes_never_go_back(tmp_path):
    """Threads reading one writer store (cached reads, some without its lock) while another
    thread rewrites records: each thread sees every record's version only move forward,
    and at the end the cached rows equal a fresh reader's."""
    store = SQLiteStore(tmp_path / "s")
    ids = [f"r{i}" for i in range(8)]
    store.apply(WriteBatch(upserts=[Record(rid, f"{rid} v0", {"v": 0}, {}, (), None, 1.0, 1.0) for rid in ids]))
    done = threading.Event()
    errors: list[str] = []

    def read(seed: int) -> None:
        rng, seen = random.Random(seed), dict.fromkeys(ids, 0)
        while not done.is_set():
            asked = rng.sample(ids, rng.randrange(1, len(ids)))
            got = store.get(asked, with_vectors=False) if rng.random() < 0.5 else [store.get_batch(asked).record(rid) for rid in asked]
            for rid, r in zip(asked, got):
                if r is None or r.metadata["v"] < seen[rid] or r.text != f"{rid} v{r.metadata['v']}":
                    errors.append(f"{rid}: {r} after version {seen[rid]}")
                    return
                seen[rid] = r.metadata["v"]

    readers = [threading.Thread(target=read, args=(seed,)) for seed in range(3)]
    for t in readers:
        t.start()
    try:
        rng = random.Random(7)
        for version in range(1, 300):
            rid = rng.choice(ids)
            store.apply(WriteBatch(upserts=[Record(rid, f"{rid} v{version}", {"v": version}, {}, (), None, 1.0, 1.0)]))
    finally:
        done.set()
        for t in readers:
            t.join()
    try:
        assert not errors, errors[0]
        fresh = SQLiteStore(tmp_path / "s", SQLiteStoreConfig(read_only=True))
        try:
            assert rows_of(store.get(ids, with_vectors=False)) == rows_of(fresh.get(ids, with_vectors=False))
        finally:
            fresh.close()
    finally:
        store.close()


def test_a_reader_never_mixes_versions_of_one_write(tmp_path):
    """A reader reads its sequence number and the rows it lacks in one read transaction: a
    write landing between the two cannot leave it with one record of the new version beside
    a cached one of the old version (both were written in one batch)."""
    writer = SQLiteStore(tmp_path / "s")

    def plain(rid: str, text: str) -> Record:
        return Record(rid, text, {}, {"v": np.ones(3, dtype=np.float32)})

    old_a, old_b = plain("r1", "a, first"), plain("r2", "b, first")
    writer.apply(WriteBatch(upserts=[old_a, old_b]))
    reader = SQLiteStore(tmp_path / "s", SQLiteStoreConfig(read_only=True))
    try:
        assert rows_of(reader.get(["r2"], with_vectors=False))[0][1] == old_b.text  # r2 cached at the first version
        new_a, new_b = plain("r1", "a, second"), plain("r2", "b, second")
        cache, valid_for = reader._rows, reader._rows.valid_for

        def write_after_the_seq_is_read(seq):
            valid_for(seq)
            writer.apply(WriteBatch(upserts=[new_a, new_b]))  # lands between the seq read and the row read

        cache.valid_for = write_after_the_seq_is_read
        texts = [row[1] for row in rows_of(reader.get(["r1", "r2"], with_vectors=False))]
        cache.valid_for = valid_for
        assert texts == [old_a.text, old_b.text]  # one version: the one the sequence number names
        assert [row[1] for row in rows_of(reader.get(["r1", "r2"], with_vectors=False))] == [new_a.text, new_b.text]
    finally:
        reader.close()
        writer.close()
