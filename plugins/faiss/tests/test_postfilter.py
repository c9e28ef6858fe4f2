"""The first query of a filter on an HNSW index over the SQLite store (issue 25): a broad filter
is answered from an unfiltered search's candidates that the store allows (no listing of every
match), a selective one falls back to the resolved set; a large set is gathered at its second
query, not its first. Answers are checked against brute force over the allowed records: other
scopes, deleted records and records updated out of the filter never come back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query, Scope
from memcore_faiss import index as index_module

DIM = 16
N = 600


def _open(path: Path) -> Collection:
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore

    return Collection(SQLiteStore(path), {"default": Space("default", DIM)}, get_registry(), path)


def _vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m"
    c = _open(p)
    c.create_index("vec", "faiss", factory="HNSW32")
    x = _vectors(N, 0)
    c.insert(
        [
            {
                "id": f"r{i}",
                "text": f"doc {i}",
                "vectors": {"default": x[i]},
                "metadata": {"half": i % 2, "tenth": int(i % 10 == 0), "rare": int(i % 50 == 0)},
                "scope": Scope(user_id="alice" if i % 3 else "bob"),
            }
            for i in range(N)
        ]
    )
    c.close()
    return p


def _truth(col: Collection, q: np.ndarray, k: int, where=None, scope=None) -> list[str]:
    """The best ``k`` allowed records by brute force over the store's own records and vectors."""
    ids = col.ids(where=where, scope=scope)
    records = col.store.get(ids)
    matrix = np.stack([r.vectors["default"] for r in records])
    scores = matrix @ (q / np.linalg.norm(q))
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


class _Calls:
    """Counts of the store's set-resolving calls (every match listed)."""

    def __init__(self, store, monkeypatch):
        self.rows = 0
        self.ids = 0
        rows, ids = store.allowed_rows, store.allowed_ids

        def counted_rows(*args, **kwargs):
            self.rows += 1
            return rows(*args, **kwargs)

        def counted_ids(*args, **kwargs):
            self.ids += 1
            return ids(*args, **kwargs)

        monkeypatch.setattr(store, "allowed_rows", counted_rows)
        monkeypatch.setattr(store, "allowed_ids", counted_ids)


def test_a_broad_filter_is_answered_without_listing_its_matches(path, monkeypatch):
    col = _open(path)
    try:
        calls = _Calls(col.store, monkeypatch)
        queries = _vectors(10, 5)
        for q in queries:
            hits = col.search_index("vec", Query(vectors={"default": q}, k=10, where={"half": 1}), 10)
            assert [h.id for h in hits] == _truth(col, q, 10, {"half": 1})
            assert all(int(h.id[1:]) % 2 == 1 for h in hits)
        assert calls.rows == 0 and calls.ids == 0  # the set was never resolved
    finally:
        col.close()


def test_a_selective_filter_falls_back_to_the_resolved_set(path, monkeypatch):
    col = _open(path)
    try:
        calls = _Calls(col.store, monkeypatch)
        for q in _vectors(5, 6):
            hits = col.search_index("vec", Query(vectors={"default": q}, k=10, where={"rare": 1}), 10)
            assert [h.id for h in hits] == _truth(col, q, 10, {"rare": 1})
        assert calls.rows == 1  # resolved once, at the first query; the next ones use the resolved set
    finally:
        col.close()


def test_another_scopes_nearest_records_never_come_back(path, monkeypatch):
    col = _open(path)
    try:
        calls = _Calls(col.store, monkeypatch)
        bob = [f"r{i}" for i in range(0, N, 3)]
        for target in bob[:10]:  # a query sitting on one of bob's records: the nearest candidate is bob's
            q = col.store.get([target])[0].vectors["default"]
            for where in (None, {"half": 0}):
                hits = col.search_index("vec", Query(vectors={"default": q}, k=10, scope=Scope(user_id="alice"), where=where), 10)
                assert hits and all(int(h.id[1:]) % 3 for h in hits) and target not in {h.id for h in hits}
                assert [h.id for h in hits] == _truth(col, q, 10, where, Scope(user_id="alice"))
        assert calls.rows <= 1  # the scope alone (2/3 of the records) was never resolved
    finally:
        col.close()


def test_deleted_and_updated_records_never_come_back(path, monkeypatch):
    col = _open(path)
    try:
        calls = _Calls(col.store, monkeypatch)
        q = _vectors(1, 7)[0]
        first = [h.id for h in col.search_index("vec", Query(vectors={"default": q}, k=10, where={"half": 1}), 10)]
        col.delete(first[:3])
        col.update(first[3], metadata={"half": 0, "tenth": 0, "rare": 0})  # out of the filter
        far = -q  # a new vector for another one: no longer near the query
        col.update(first[4], vectors={"default": far})
        hits = [h.id for h in col.search_index("vec", Query(vectors={"default": q}, k=10, where={"half": 1}), 10)]
        assert not set(first[:4]) & set(hits) and first[4] not in hits
        assert hits == _truth(col, q, 10, {"half": 1})
        assert calls.rows == 0  # answered from the candidates both times
    finally:
        col.close()


def test_a_large_set_is_gathered_at_its_second_query(path, monkeypatch):
    monkeypatch.setattr(index_module, "GATHER_MAX", 40)  # sets of 41+ labels are "large"
    col = _open(path)
    try:
        budget = col._indexes["vec"].index._gather_budget
        queries = _vectors(3, 8)
        ids = []
        for i, q in enumerate(queries):
            query = Query(vectors={"default": q}, k=10, where={"tenth": 1})  # 60 labels, scored exactly
            ids.append([h.id for h in col.search_index("vec", query, 10)])
            assert ids[-1] == _truth(col, q, 10, {"tenth": 1})
            assert (budget.used > 0) == (i > 0)  # no copy at the first query, one from the second on
    finally:
        col.close()


def test_a_selective_filter_saved_at_the_last_close_skips_the_attempt(path, monkeypatch):
    # the writer resolved it before closing: the next process takes the saved rows at once
    col = _open(path)
    q = _vectors(1, 9)[0]
    col.search_index("vec", Query(vectors={"default": q}, k=10, where={"rare": 1}, scope=Scope(user_id="alice")), 10)
    col.close()
    col = _open(path)
    try:
        asked = []
        among = col.store.allowed_among
        monkeypatch.setattr(col.store, "allowed_among", lambda *a, **kw: asked.append(a) or among(*a, **kw))
        for p in _vectors(3, 10):
            for scope in (Scope(user_id="alice"), Scope(user_id="bob")):  # bob's set was never saved: the attempt, as before
                hits = col.search_index("vec", Query(vectors={"default": p}, k=10, where={"rare": 1}, scope=scope), 10)
                assert [h.id for h in hits] == _truth(col, p, 10, {"rare": 1}, scope)
        assert len(asked) == 1  # only bob's first query tried the unfiltered candidates
    finally:
        col.close()
    col = _open(path)  # a write since the save: the saved rows are stale, the attempt is made again
    try:
        col.delete(["r50"])
        asked = []
        among = col.store.allowed_among
        monkeypatch.setattr(col.store, "allowed_among", lambda *a, **kw: asked.append(a) or among(*a, **kw))
        hits = col.search_index("vec", Query(vectors={"default": q}, k=10, where={"rare": 1}, scope=Scope(user_id="alice")), 10)
        assert [h.id for h in hits] == _truth(col, q, 10, {"rare": 1}, Scope(user_id="alice")) and "r50" not in {h.id for h in hits}
        assert len(asked) == 1
    finally:
        col.close()


def test_a_broad_filter_saved_at_the_last_close_is_still_answered_from_candidates(path, monkeypatch):
    col = _open(path)
    query = Query(vectors={"default": _vectors(1, 11)[0]}, k=10, where={"half": 1})
    assert len(col._allowed(query, "vec", rows_at=col.store.last_seq()).file_rows("default")) == N // 2  # resolved: saved at close
    col.close()
    col = _open(path)
    try:
        calls = _Calls(col.store, monkeypatch)
        asked = []
        among = col.store.allowed_among
        monkeypatch.setattr(col.store, "allowed_among", lambda *a, **kw: asked.append(a) or among(*a, **kw))
        queries = _vectors(4, 12)
        for q in queries:
            hits = col.search_index("vec", Query(vectors={"default": q}, k=10, where={"half": 1}), 10)
            assert [h.id for h in hits] == _truth(col, q, 10, {"half": 1})
        assert len(asked) == len(queries) and calls.rows == 0  # every query answered from its candidates, as without the file
    finally:
        col.close()
