"""Recall@10 of the ``pgvector`` index at its default settings against exact search, on
20,000 x 64 vectors (half random, half in 40 clusters), unfiltered and with a 10% filter;
and the plans: the database's HNSW index serves both, and the iterative scan is what keeps
a selective filter at k rows."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from memcore.plugin import IndexContext, Query, Record, SpaceInfo, VectorReader, WriteBatch
from memcore_postgres import PgvectorIndexConfig, PostgresStore, PostgresStoreConfig
from memcore_postgres.pgvector import PgvectorIndex

N, DIM, K, QUERIES = 20_000, 64, 10, 60
NAME = "vec"


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def corpus(pg_url: str) -> Iterator[tuple[PostgresStore, np.ndarray, np.ndarray, np.ndarray]]:
    """20k records (metadata ``cat`` = i % 10) in a schema of their own; vectors, categories and queries."""
    import uuid

    import psycopg

    rng = np.random.default_rng(7)
    centers = rng.normal(size=(40, DIM))
    clustered = centers[rng.integers(0, 40, N // 2)] + 0.35 * rng.normal(size=(N // 2, DIM))
    vectors = _unit(np.vstack([rng.normal(size=(N - N // 2, DIM)), clustered]))
    cats = np.arange(N) % 10
    near = vectors[rng.integers(0, N, QUERIES // 2)] + 0.2 * rng.normal(size=(QUERIES // 2, DIM)).astype(np.float32)
    queries = _unit(np.vstack([near, rng.normal(size=(QUERIES - QUERIES // 2, DIM))]))
    schema = "t_" + uuid.uuid4().hex[:12]
    store = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema))
    try:
        for start in range(0, N, 2500):
            records = [Record(f"r{i}", f"text {i}", {"cat": int(cats[i])}, {"default": vectors[i]}) for i in range(start, min(N, start + 2500))]
            store.apply(WriteBatch(upserts=records, add_membership={NAME: [r.id for r in records]}))
        yield store, vectors, cats, queries
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _index(store: PostgresStore, **settings: Any) -> PgvectorIndex:
    context = IndexContext(name=NAME, spaces={"default": SpaceInfo("default", DIM, "test")}, vectors=VectorReader(store, NAME))
    index = PgvectorIndex(PgvectorIndexConfig(**settings), context)
    index.add([Record("r0", "", {}, {"default": np.zeros(DIM, dtype=np.float32)})])  # what a collection does after a batch: builds the database index
    return index


def _exact(vectors: np.ndarray, query: np.ndarray, mask: np.ndarray | None) -> set[str]:
    scores = vectors @ query
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return {f"r{i}" for i in np.argsort(-scores, kind="stable")[:K]}


def _plan(index: PgvectorIndex, query: Query, vector: np.ndarray) -> str:
    store = index.store

    def explain(conn: Any) -> str:
        statement, params = index.statement(query, vector, K, None, index._slot or 0)
        conn.execute(index._settings_for(None))
        rows = conn.execute(b"EXPLAIN " + statement.as_bytes(conn), params).fetchall()
        conn.execute("ROLLBACK")
        return "\n".join(r[0] for r in rows)

    return str(store.pool.read("explaining", explain))


@pytest.mark.parametrize("filtered", [False, True], ids=["unfiltered", "filtered-10pct"])
def test_recall_at_10_at_the_defaults(corpus: Any, filtered: bool) -> None:
    store, vectors, cats, queries = corpus
    index = _index(store)
    recalls = []
    for i, q in enumerate(queries):
        cat = i % 10
        query = Query(vectors={"default": q}, where={"cat": cat} if filtered else None)
        hits = index.search(query, K)
        assert len(hits) == K
        if filtered:
            assert all(int(h.id[1:]) % 10 == cat for h in hits)
        truth = _exact(vectors, q, cats == cat if filtered else None)
        recalls.append(len(truth & {h.id for h in hits}) / K)
    recall = float(np.mean(recalls))
    print(f"recall@10 {'filtered' if filtered else 'unfiltered'}: {recall:.4f}")
    assert recall >= 0.99
    plan = _plan(index, Query(vectors={"default": queries[0]}, where={"cat": 1} if filtered else None), queries[0])
    assert index.db_index_name in plan, plan  # the HNSW index served the search, not a scan of every vector


def test_without_the_iterative_scan_a_selective_filter_comes_back_short(corpus: Any) -> None:
    """The contrast that shows what the iterative scan does: ef_search = 20, 10% filter."""
    store, vectors, cats, queries = corpus
    short = _index(store, ef_search=20, iterative_scan="off")
    full = _index(store, ef_search=20)
    lengths_off, lengths_on = [], []
    for i, q in enumerate(queries[:20]):
        query = Query(vectors={"default": q}, where={"cat": i % 10})
        lengths_off.append(len(short.search(query, K)))
        lengths_on.append(len(full.search(query, K)))
    assert min(lengths_on) == K
    assert sum(lengths_off) < sum(lengths_on)


def test_scope_and_allowed_go_into_the_statement(corpus: Any) -> None:
    store, vectors, cats, queries = corpus
    index = _index(store)
    q = queries[1]
    allowed = {f"r{i}" for i in range(0, N, 97)}
    hits = index.search(Query(vectors={"default": q}, where={"cat": {"$in": [1, 2]}}), K, allowed)
    expected = {f"r{i}" for i in range(0, N, 97) if cats[i] in (1, 2)}
    assert len(hits) == K and {h.id for h in hits} <= expected
    best = set(sorted(expected, key=lambda rid: -float(vectors[int(rid[1:])] @ q))[:K])
    assert len(best & {h.id for h in hits}) >= K - 1
    scoped = Query(vectors={"default": q}, scope={"user_id": "nobody"})
    assert index.search(scoped, K) == []
