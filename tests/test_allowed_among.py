"""Which of a few search candidates a filter allows, without resolving the whole set (issue 25):
``Store.allowed_among`` looks up just those ids under the filter, scope and text filter, at
one store state, and ``AllowedRows.among`` asks it only while the set's ids were not read.
Every answer is checked against the resolved set (``allowed_ids``): another scope's records,
deleted records and records updated out of the filter are never members."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore import Collection, Query, Scope
from memcore.indexes._allowed import AllowedRows
from memcore.model._document import parse_where_document
from memcore.stores._memory import MemoryStore

DIM = 4


def _open(path) -> Collection:
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore

    return Collection(SQLiteStore(path), {"default": Space("default", DIM)}, get_registry(), path)


@pytest.fixture
def col(tmp_path):
    c = _open(tmp_path / "m")
    c.create_index("vec", "exact")
    rng = np.random.default_rng(0)
    c.insert(
        [
            {
                "id": f"r{i}",
                "text": f"doc {i} {'red' if i % 3 else 'blue'}",
                "vectors": {"default": rng.standard_normal(DIM)},
                "metadata": {"u": i % 4, "n": i},
                "scope": Scope(user_id="alice" if i % 2 else "bob"),
            }
            for i in range(200)
        ]
    )
    yield c
    c.close()


def _where(where):
    return Query(text="x", where=where).parsed_where()


CASES = [
    ({"u": 1}, None, None),
    ({"n": {"$lt": 150}}, Scope(user_id="alice"), None),
    ({"u": {"$in": [0, 2]}}, Scope(user_id="bob"), None),
    ({"u": {"$ne": 3}}, None, {"$contains": "red"}),
    (None, Scope(user_id="alice"), None),
]


def _check(store, seq, rng):
    for where, scope, document in CASES:
        parsed = _where(where) if where is not None else None
        doc = parse_where_document(document)
        members = set(store.allowed_ids(where=parsed, where_document=doc, scope=scope))
        for _ in range(5):
            candidates = [f"r{i}" for i in rng.sample(range(260), 40)]  # some ids never stored or deleted
            got = store.allowed_among(candidates, seq, where=parsed, where_document=doc, scope=scope)
            assert got is not None and sorted(got) == sorted(c for c in candidates if c in members)


def test_the_store_answers_exactly_the_members_among_the_candidates(col):
    store = col.store
    rng = random.Random(1)
    _check(store, store.last_seq(), rng)
    col.delete([f"r{i}" for i in range(0, 60, 2)])
    col.update("r1", metadata={"u": 9, "n": 1})  # out of every u filter
    col.update("r3", metadata={"u": 1, "n": 3}, text="doc 3 red", vectors={"default": np.ones(DIM, dtype=np.float32)})
    _check(store, store.last_seq(), rng)
    alice = store.allowed_among([f"r{i}" for i in range(200)], store.last_seq(), scope=Scope(user_id="alice"))
    assert alice and all(int(rid[1:]) % 2 for rid in alice)  # never a record of another scope
    assert "r1" not in store.allowed_among(["r1", "r5"], store.last_seq(), where=_where({"u": 1}))


def test_the_store_answers_only_at_the_state_asked_for(col):
    store = col.store
    seq = store.last_seq()
    assert store.allowed_among(["r1"], seq - 1, where=_where({"u": 1})) is None
    assert store.allowed_among([], seq, where=_where({"u": 1})) == []
    many = store.allowed_among([f"r{i}" for i in range(1200)], seq, where=_where({"u": 1}))  # more than one statement's chunk
    assert many is not None and sorted(many) == sorted(f"r{i}" for i in range(1, 200, 4))


def test_a_store_without_the_lookup_says_it_cannot():
    store = MemoryStore()
    assert store.allowed_among(["a"], store.last_seq(), where=_where({"u": 1})) is None


def test_the_set_asks_the_store_only_while_its_ids_were_not_read(col):
    query = Query(vectors={"default": np.ones(DIM, dtype=np.float32)}, k=5, where={"u": 2})
    allowed = col._allowed(query, rows_at=col.store.last_seq())
    assert isinstance(allowed, AllowedRows) and not allowed.resolved
    asked = []
    resolve = allowed._resolve_among
    allowed._resolve_among = lambda ids, seq: asked.append(seq) or resolve(ids, seq)
    assert allowed.among(["r2", "r3", "r6", "nope"]) == {"r2", "r6"}
    assert asked == [allowed.seq] and not allowed.resolved
    assert len(allowed) == 50  # its ids read
    assert allowed.among(["r2", "r3", "r10"]) == {"r2", "r10"} and len(asked) == 1  # from the ids, no store lookup
    without = AllowedRows(allowed.seq, lambda: ["r2"], lambda space, seq: None)
    assert without.among(["r2"]) is None  # no lookup offered: the caller resolves the set
