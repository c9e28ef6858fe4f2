"""Filtered faiss searches over the SQLite store take the filter's matches as rows of the
store's vector file (issue 25): the index keeps the row of each label and turns the rows into
labels with one gather, without reading an id. Answers stay exactly those of a plain
``frozenset`` of the matching ids through deletes that free rows and inserts that reuse them,
updates, compactions, scopes, reopening, a reader catching up and a crash."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query, Record, Scope
from memcore.plugin import AllowedRows
from memcore_faiss.rows import StoreRows

DIM = 8
FACTORIES = {
    "hnsw": {"factory": "HNSW16", "compact_fraction": 0.1},  # positional labels, tombstones, compactions renumber
    "flat": {"factory": "Flat"},  # labels in an IndexIDMap2
    "ivf": {"factory": "IVF4,Flat", "min_train": 200, "nprobe": 4},  # native labels, trained on the way
}


def _records(rng: np.random.Generator, start: int, count: int) -> list[dict]:
    return [
        {"id": f"r{i}", "text": f"doc {i}", "vectors": {"default": rng.standard_normal(DIM)}, "metadata": {"u": i % 5, "n": i}}
        for i in range(start, start + count)
    ]


def _open(path: Path, read_only: bool = False) -> Collection:
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

    return Collection(SQLiteStore(path, SQLiteStoreConfig(read_only=read_only)), {"default": Space("default", DIM)}, get_registry(), path)


@pytest.fixture(params=sorted(FACTORIES))
def path(request, tmp_path):
    p = tmp_path / "m"
    c = _open(p)
    c.create_index("vec", "faiss", exact_filter_below=0, exact_filter_fraction=0.15, **FACTORIES[request.param])
    c.insert(_records(np.random.default_rng(0), 0, 400))
    c.close()
    return p


def _plain(col: Collection, query: Query, k: int) -> list[tuple[str, float]]:
    """The same search with a plain frozenset of the matching ids (no rows, no memo)."""
    plain = frozenset(col.ids(where=query.where, scope=query.scope))
    return [(h.id, round(h.score, 5)) for h in col._indexes["vec"].index.search(query, k, plain)]


def _got(col: Collection, query: Query, k: int) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 5)) for h in col.search_index("vec", query, k)]


# 1%-ish, 20% (exact, gathered), 60% (a selector in the graph search or scan)
FILTERS = [{"n": {"$lt": 6}}, {"u": 1}, {"u": {"$in": [0, 2, 3]}}]


def test_a_reopened_index_filters_by_rows_without_reading_ids(path, monkeypatch):
    col = _open(path)
    try:
        store, index = col.store, col._indexes["vec"].index
        assert index._rows.usable and not index._rows.from_save  # saved with the index
        read_ids: list[object] = []
        monkeypatch.setattr(store, "allowed_ids", lambda **kw: read_ids.append(kw) or [])
        monkeypatch.setattr(index._labels, "labels_for", lambda ids: read_ids.append(ids) or np.zeros(0, dtype=np.int64))
        q = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
        for where in FILTERS:
            hits = col.search_index("vec", Query(vectors={"default": q}, k=5, where=where), 5)
            assert len(hits) == 5
        assert read_ids == []  # neither the store nor the index read an id of a filter
        monkeypatch.undo()
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(col, query, 10) == _plain(col, query, 10)
    finally:
        col.close()


def test_answers_stay_exact_through_writes_reused_rows_and_compactions(path):
    col = _open(path)
    try:
        rng = random.Random(3)
        vecs = np.random.default_rng(3)
        live = {f"r{i}" for i in range(400)}
        nxt = 400
        for step in range(40):
            action = rng.choice(["delete", "insert", "update", "revector"])
            if action == "delete":  # frees rows the next insert reuses; HNSW compacts past 10% tombstones
                gone = rng.sample(sorted(live), 15)
                col.delete(gone)
                live -= set(gone)
            elif action == "insert":
                col.insert(_records(vecs, nxt, 10))
                live |= {f"r{i}" for i in range(nxt, nxt + 10)}
                nxt += 10
            elif action == "update":
                col.update(rng.choice(sorted(live)), metadata={"u": rng.randrange(5), "n": rng.randrange(400)})
            else:  # a new vector: a new row of the file, a new label
                col.update(rng.choice(sorted(live)), vectors={"default": vecs.standard_normal(DIM)})
            q = vecs.standard_normal(DIM).astype(np.float32)
            for where in FILTERS:
                query = Query(vectors={"default": q}, k=12, where=where)
                assert _got(col, query, 12) == _plain(col, query, 12), (step, action, where)
        assert col._indexes["vec"].index._rows.usable
        col.close()
        col = _open(path)
        q = vecs.standard_normal(DIM).astype(np.float32)
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=12, where=where)
            assert _got(col, query, 12) == _plain(col, query, 12)
    finally:
        col.close()


def test_a_scope_never_lets_another_scopes_record_through_reused_rows(tmp_path):
    col = _open(tmp_path / "s")
    try:
        col.create_index("vec", "faiss", factory="HNSW16")
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
            assert {h.id for h in hits} == set(col.ids(scope=Scope(user_id=user)))
            query = Query(vectors={"default": q}, k=7, scope={"user_id": user}, where={"u": {"$ne": 1}})
            assert _got(col, query, 7) == _plain(col, query, 7)
    finally:
        col.close()


def test_a_save_without_rows_looks_them_up_once(path, monkeypatch):
    col = _open(path)
    col.insert(_records(np.random.default_rng(5), 400, 5))  # dirty: saved at close ...
    monkeypatch.setattr(StoreRows, "saved", lambda self, labels: None)  # ... as before the rows were kept
    col.close()
    monkeypatch.undo()
    col = _open(path)
    try:
        index = col._indexes["vec"].index
        assert index._rows.from_save and not index._rows.usable
        q = np.random.default_rng(6).standard_normal(DIM).astype(np.float32)
        query = Query(vectors={"default": q}, k=10, where={"u": 2})
        assert _got(col, query, 10) == _plain(col, query, 10)
        assert index._rows.usable and not index._rows.from_save  # looked up at the first filtered search
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(col, query, 10) == _plain(col, query, 10)
    finally:
        col.close()


def test_a_vector_the_store_does_not_hold_turns_the_rows_off(path):
    col = _open(path)
    try:
        index = col._indexes["vec"].index
        index.add([Record(id="r7", text="x", vectors={"default": np.full(DIM, 0.5, dtype=np.float32)})])  # not the store's vector of r7
        assert not index._rows.usable
        q = np.random.default_rng(7).standard_normal(DIM).astype(np.float32)
        query = Query(vectors={"default": q}, k=400, where={"u": 2})
        allowed = col._allowed(query, rows_at=col._indexes["vec"].applied_seq)
        assert isinstance(allowed, AllowedRows)
        assert "r7" in {h.id for h in index.search(query, 400, allowed)}  # its ids: r7 found though its row is unknown
        index.remove(["r7"])
        assert index._rows.usable  # the label whose row was unknown is gone
    finally:
        col.close()


def test_a_reader_catches_up_while_the_writer_replaces_the_files(path):
    writer = _open(path)
    reader = _open(path, read_only=True)
    try:
        rng = np.random.default_rng(8)
        q = rng.standard_normal(DIM).astype(np.float32)
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(reader, query, 10) == _got(writer, query, 10)
        writer.delete([f"r{i}" for i in range(0, 60, 3)])
        writer.insert(_records(rng, 400, 30))
        writer.update("r5", vectors={"default": q})
        writer.flush()  # saves: the files the reader mapped are replaced
        writer.insert(_records(rng, 430, 5))
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(reader, query, 10) == _plain(reader, query, 10) == _got(writer, query, 10)
    finally:
        reader.close()
        writer.close()


def test_a_crash_is_caught_up_with_the_rows_of_the_records_written_since(path):
    code = textwrap.dedent(
        f"""
        import os, sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store_rows import _open, _records
        c = _open({str(path)!r})
        rng = np.random.default_rng(9)
        c.delete([f"r{{i}}" for i in range(1, 80, 4)])
        c.insert(_records(rng, 400, 20))
        c.update("r2", metadata={{"u": 1, "n": 2}})
        os._exit(0)  # no close: the index files stay as saved, the log has the writes
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})
    col = _open(path)
    try:
        assert col._indexes["vec"].loaded_from_disk
        q = np.random.default_rng(10).standard_normal(DIM).astype(np.float32)
        for where in FILTERS:
            query = Query(vectors={"default": q}, k=10, where=where)
            assert _got(col, query, 10) == _plain(col, query, 10)
        assert "r2" in {h.id for h in col.search_index("vec", Query(vectors={"default": q}, k=200, where={"u": 1}), 200)}
    finally:
        col.close()
