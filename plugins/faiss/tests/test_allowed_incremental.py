"""Filtered faiss queries after writes (issue 14): a cached allowed set changed by a write
inherits the index's translation (labels) and its gathered rows, brought up to date
instead of rebuilt; answers stay those of a plain ``frozenset`` (no memo)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore.plugin import AllowedIds
from memcore import Collection, Query
from memcore.embedders._embedder import Space
from memcore.plugin import GatheredRows as Gathered


@pytest.fixture(params=["HNSW32", "Flat"])
def col(request, tmp_path):
    c = Collection.create(tmp_path / "c", spaces={"v": Space("v", 16)})
    c.create_index("vec", "faiss", space="v", factory=request.param, exact_filter_below=5000)
    rng = np.random.default_rng(1)
    c.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"v": rng.standard_normal(16)}, "metadata": {"u": f"u{i % 5}"}} for i in range(400)])
    yield c
    c.close()


def test_labels_are_updated_not_translated_again(col, monkeypatch):
    index = col._indexes["vec"].index
    calls = []
    labels_for, labels_of = index._labels.labels_for, index._rows.labels_of
    monkeypatch.setattr(index._labels, "labels_for", lambda ids: calls.append(1) or labels_for(ids))
    monkeypatch.setattr(index._rows, "labels_of", lambda rows, live: calls.append(1) or labels_of(rows, live))  # from the store's rows
    rng = np.random.default_rng(2)
    col.search_index("vec", Query(vectors={"v": rng.standard_normal(16)}, k=5, where={"u": "u2"}), 5)
    assert len(calls) == 1
    for i in range(6):
        v = rng.standard_normal(16).astype(np.float32)
        col.insert([{"id": f"w{i}", "text": "w", "vectors": {"v": v}, "metadata": {"u": "u2"}}])
        hits = col.search_index("vec", Query(vectors={"v": v}, k=3, where={"u": "u2"}), 3)
        assert hits[0].id == f"w{i}"
    assert len(calls) == 1


def test_random_writes_keep_filtered_answers_exact(col):
    rng = random.Random(3)
    vecs = np.random.default_rng(3)
    live = {f"r{i}" for i in range(400)}
    filters = [{"u": "u1"}, {"u": {"$in": ["u2", "u4"]}}]
    for step in range(50):
        action = rng.choice(["insert", "insert", "update", "delete"])
        if action == "insert":
            rid = f"n{step}"
            col.insert([{"id": rid, "text": "n", "vectors": {"v": vecs.standard_normal(16)}, "metadata": {"u": f"u{rng.randrange(5)}"}}])
            live.add(rid)
        elif action == "update":
            col.update(rng.choice(sorted(live)), metadata={"u": f"u{rng.randrange(5)}"})
        else:
            rid = rng.choice(sorted(live))
            col.delete([rid])
            live.discard(rid)
        q = vecs.standard_normal(16).astype(np.float32)
        for where in filters:
            fq = Query(vectors={"v": q}, k=15, where=where)
            got = [(h.id, round(h.score, 4)) for h in col.search_index("vec", fq, 15)]
            want = [(h.id, round(h.score, 4)) for h in col._indexes["vec"].index.search(fq, 15, frozenset(col.ids(where=where)))]
            assert got == want, (step, action, where)


def test_gathered_rows_never_overwrite_another_view():
    stored = np.arange(40, dtype=np.float32).reshape(10, 4)
    base = Gathered.of(np.array([1, 3]), stored)
    a = base.extended(np.array([1, 3, 5]), stored)
    b = base.extended(np.array([1, 3, 7]), stored)  # from the same earlier view: must not write a's row
    assert a.matrix().tolist() == stored[[1, 3, 5]].tolist()
    assert b.matrix().tolist() == stored[[1, 3, 7]].tolist()
    assert base.matrix().tolist() == stored[[1, 3]].tolist()
    assert base.extended(np.array([1, 5]), stored) is None  # a label gone: gathered afresh
    assert base.extended(np.array([0, 1, 3]), stored) is None  # not appended past the last


def test_derived_set_shares_nothing_wrong_after_delete(col):
    rng = np.random.default_rng(4)
    allowed = AllowedIds(col.ids(where={"u": "u3"}))
    index = col._indexes["vec"].index
    q = Query(vectors={"v": rng.standard_normal(16)}, k=10)
    index.search(q, 10, allowed)
    gone = sorted(allowed)[0]
    col.delete([gone])
    derived = allowed.derive([], [gone])
    assert [h.id for h in index.search(q, 10, derived)] == [h.id for h in index.search(q, 10, frozenset(derived))]
