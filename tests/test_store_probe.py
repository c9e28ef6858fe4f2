"""The SQLite writer reuses what its last ``get`` read (ids, rowids, membership) in the next
``apply`` while its sequence number has not moved: random gets and writes log exactly the
ops and keep exactly the records the in-memory store does."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore.errors import MemcoreError
from memcore.records import Link, Record
from memcore.store import WriteBatch
from memcore.stores.memory import MemoryStore
from memcore.stores.sqlite import SQLiteStore

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
