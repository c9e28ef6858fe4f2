"""The SQLite writer reuses what its last ``get`` read (ids, rowids, membership) in the next
``apply`` while its sequence number has not moved: random gets and writes log exactly the
ops and keep exactly the records the in-memory store does."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore.errors import MemcoreError
from memcore import Link, Record
from memcore.plugin import WriteBatch
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore

POOL = [f"r{i}" for i in range(12)]


def rec(rid: str, rng: random.Random) -> Record:
    links = (Link(rng.choice(POOL)),) if rng.random() < 0.2 else ()
    links = tuple(link for link in links if link.target != rid)
    return Record(rid, f"text {rng.random()}", {"n": rng.randrange(5)}, {"v": np.full(3, rng.random() + 0.5, dtype=np.float32)}, links, None, 1.0, 1.0)


def random_batch(rng: random.Random) -> WriteBatch:
    upserts = [rec(rid, rng) for rid in rng.sample(POOL, rng.randrange(0, 4))]
    deletes = rng.sample(POOL, rng.randrange(0, 2)) if rng.random() < 0.3 else []
    add = {ix: rng.sample(POOL, rng.randrange(1, 4)) for ix in ("a", "b") if rng.random() < 0.6}
    remove = {ix: rng.sample(POOL, 1) for ix in ("a", "b") if rng.random() < 0.2}
    return WriteBatch(upserts=upserts, deletes=deletes, add_membership=add, remove_membership=remove)


def state(store) -> list[tuple]:
    records = store.get(POOL)
    members = store.memberships(POOL)
    return [
        None if r is None else (r.id, r.text, r.metadata, tuple(r.links), sorted(members.get(r.id, ())), r.vectors["v"].tolist() if "v" in r.vectors else None)
        for r in records
    ]


@pytest.mark.parametrize("seed", range(4))
def test_gets_before_writes_change_nothing_the_store_logs(tmp_path, seed):
    rng = random.Random(seed)
    sqlite, memory = SQLiteStore(tmp_path / "s"), MemoryStore()
    try:
        for _ in range(150):
            if rng.random() < 0.7:
                asked = rng.sample(POOL, rng.randrange(1, 8))
                assert [r is None for r in sqlite.get(asked)] == [r is None for r in memory.get(asked)]
            batch = random_batch(rng)
            outcomes = []
            for store in (sqlite, memory):
                try:
                    applied = store.apply(batch)
                    outcomes.append([(op.index, op.record_id, op.op) for op in applied.ops])
                except MemcoreError as exc:
                    outcomes.append(type(exc))
            assert outcomes[0] == outcomes[1]
            assert state(sqlite) == state(memory)
    finally:
        sqlite.close()


@pytest.mark.parametrize("seed", range(4))
def test_batches_of_new_records_log_what_the_general_path_logs(tmp_path, seed):
    """Batches whose records are all new take the SQLite store's insert path: the same ops,
    records, membership, oplog and errors as the in-memory store."""
    rng = random.Random(seed)
    sqlite, memory = SQLiteStore(tmp_path / "s"), MemoryStore()
    made: list[str] = []
    try:
        for step in range(60):
            fresh = [f"n{step}-{i}" for i in range(rng.randrange(0, 5))]
            upserts = [
                Record(
                    rid,
                    f"t {rid}",
                    {"i": i},
                    {"v": np.full(3, 1.0 + i, dtype=np.float32)},
                    (Link(rng.choice(made)),) if made and rng.random() < 0.3 else (),
                    None,
                    1.0,
                    1.0,
                )
                for i, rid in enumerate(fresh)
            ]
            if upserts and rng.random() < 0.2:
                upserts.append(upserts[0])  # a repeated record
            if rng.random() < 0.1:
                upserts.append(Record(f"x{step}", "t", {}, {}, (Link("missing"),), None, 1.0, 1.0))  # a link target that does not exist
            add = {ix: rng.choices(fresh, k=rng.randrange(0, 2 * len(fresh) + 1)) for ix in ("a", "b", "c") if fresh and rng.random() < 0.6}
            if rng.random() < 0.1:
                add["a"] = [*add.get("a", []), "nowhere"]  # membership for a record that does not exist
            state = {("svc", "k"): step} if rng.random() < 0.3 else {}
            batch = WriteBatch(upserts=upserts, add_membership=add, state=state)
            outcomes = []
            for store in (sqlite, memory):
                try:
                    applied = store.apply(batch)
                    outcomes.append((applied.seq, [(op.index, op.record_id, op.op) for op in applied.ops]))
                except MemcoreError as exc:
                    outcomes.append(type(exc))
            assert outcomes[0] == outcomes[1]
            if not isinstance(outcomes[0], type):
                made += fresh
            for index in ("a", "b", "c"):
                assert sqlite.ops_since(0, index) == memory.ops_since(0, index)
                assert sqlite.ids(index=index) == memory.ids(index=index)
            assert sqlite.get_state("svc", "k") == memory.get_state("svc", "k")

        def rows(store):
            return [(r.id, r.text, r.metadata, r.links, r.vectors["v"].tolist() if "v" in r.vectors else None) for r in store.get(made)]

        assert rows(sqlite) == rows(memory)
        assert sqlite.memberships(made) == memory.memberships(made)
    finally:
        sqlite.close()


@pytest.mark.parametrize("odd", ["strided", "float64", "big-endian", "none"])
def test_vector_blobs_of_any_layout_read_back_as_written(tmp_path, odd):
    """Vectors are bound as their own buffers when they are plain C-ordered float32 rows,
    else converted: every layout reads back as the same float32 values."""
    matrix = np.arange(40, dtype=np.float32).reshape(5, 8) + 1
    vectors = [matrix[i] for i in range(5)]
    if odd == "strided":
        vectors[2] = np.arange(16, dtype=np.float32)[::2] + 1
    elif odd == "float64":
        vectors[2] = vectors[2].astype(np.float64)
    elif odd == "big-endian":
        vectors[2] = vectors[2].astype(">f4")
    store = SQLiteStore(tmp_path / "s")
    try:
        store.apply(WriteBatch(upserts=[Record(f"r{i}", "t", {}, {"v": v}, (), None, 1.0, 1.0) for i, v in enumerate(vectors)]))
        got = store.get([f"r{i}" for i in range(5)])
        for record, v in zip(got, vectors):
            assert record.vectors["v"].dtype == np.float32
            np.testing.assert_array_equal(record.vectors["v"], np.asarray(v, dtype=np.float32))
        matrix_read, present = store.vectors([f"r{i}" for i in range(5)], "v")
        assert present.all()
        np.testing.assert_array_equal(matrix_read, np.stack([np.asarray(v, dtype=np.float32) for v in vectors]))
    finally:
        store.close()
