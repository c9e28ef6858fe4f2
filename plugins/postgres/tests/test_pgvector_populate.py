"""Creating a ``pgvector`` index over records already stored: their membership is written in
SQL and no record is read back when their vectors are stored (the vectors stay in the
database); records without a vector of the space are embedded the ordinary way. And what
the index declares about its hits: the index's name as their source, and exact cosine
scores (``cosine_space``), which the relevance stage reuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memcore
from memcore import Query

pytest.importorskip("pgvector")


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_populating_reads_no_stored_record_back(pg_url: str, schema: str, pg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memcore_postgres import PostgresStore

    # a text index only: the records are stored without vectors unless given
    settings = {"store": {"kind": "postgres", "url": pg_url, "schema": schema}, "indexes": {"text": {"kind": "pg_text"}}}
    with memcore.open(settings, path=pg_dir) as memory:
        col = memory.collection
        vectors = _unit(np.random.default_rng(3).normal(size=(60, col.spaces["default"].dim)))
        col.insert([{"id": f"v{i}", "text": f"vector {i}", "vectors": {"default": vectors[i]}} for i in range(60)])
        col.insert([{"id": "t0", "text": "the cat sat on the mat"}, {"id": "t1", "text": "stock markets fell sharply"}])  # no vector yet
        assert col.store.missing_vectors(["v0", "t0", "t1", "nobody"], "default") == ["t0", "t1", "nobody"]
        read: list[tuple[int, bool]] = []
        vector_reads: list[int] = []
        get, read_vectors = PostgresStore.get, PostgresStore.vectors

        def spy_get(self: PostgresStore, ids: Any, *, with_vectors: bool = True) -> Any:
            read.append((len(ids), with_vectors))
            return get(self, ids, with_vectors=with_vectors)

        def spy_vectors(self: PostgresStore, ids: Any, space: str) -> Any:
            vector_reads.append(len(ids))
            return read_vectors(self, ids, space)

        monkeypatch.setattr(PostgresStore, "get", spy_get)
        monkeypatch.setattr(PostgresStore, "vectors", spy_vectors)
        col.create_index("main", "pgvector", populate=True)
        monkeypatch.undo()
        assert vector_reads == []
        assert sum(n for n, with_vectors in read if with_vectors) == 2  # only the two records that needed embedding
        assert len(col.index("main")) == 62 and col.store.missing_vectors(["t0", "t1"], "default") == []
        hits = col.search_index("main", Query(vectors={"default": vectors[7]}, k=3), 3)
        assert hits[0].id == "v7"
        assert col.search_index("main", Query(text="a cat on a mat", k=1), 1)[0].id == "t0"  # embedded by the populate
        # a second populate has nothing left to add
        assert col.populate_index("main") == 0


def test_hits_name_their_index_and_carry_exact_cosines(pg_url: str, schema: str, pg_dir: Path) -> None:
    settings = {"store": {"kind": "postgres", "url": pg_url, "schema": schema}, "indexes": {"main": {"kind": "pgvector"}}}
    with memcore.open(settings, path=pg_dir) as memory:
        col = memory.collection
        col.create_index("near", "pgvector", metric="l2")
        dim = col.spaces["default"].dim
        vectors = _unit(np.random.default_rng(4).normal(size=(50, dim)))
        col.insert([{"id": f"v{i}", "text": f"vector {i}", "vectors": {"default": vectors[i]}} for i in range(50)])
        index = col.index("main")
        assert index.cosine_space == "default" and col.cosine_space("main") == "default"
        assert col.index("near").cosine_space is None  # l2: the score is not a cosine
        q = _unit(np.random.default_rng(5).normal(size=(1, dim)))[0]
        hits = index.search(Query(vectors={"default": q}), 10)
        assert [h.source for h in hits] == ["main"] * 10
        assert np.allclose([h.score for h in hits], [float(vectors[int(h.id[1:])] @ q) for h in hits], atol=1e-5)
        assert {h.source for h in col.index("near").search(Query(vectors={"default": q}), 3)} == {"near"}


def test_the_build_memory_holds_the_graph() -> None:
    from memcore_postgres import PgvectorIndexConfig
    from memcore_postgres.pgvector import build_memory_mb, build_settings

    # 100k x 384 at m 16: 2,312 bytes a vector (pgvector measured 2,251) plus 25%
    assert build_memory_mb(PgvectorIndexConfig(), 384, 100_000) == 276
    assert build_memory_mb(PgvectorIndexConfig(m=32), 384, 100_000) > 276
    assert build_memory_mb(PgvectorIndexConfig(), 384, 10) == 64  # the floor
    assert build_memory_mb(PgvectorIndexConfig(), 384, 100_000_000) == 4096  # the cap of the estimate
    assert build_memory_mb(PgvectorIndexConfig(build_memory_mb=8192), 384, 10) == 8192
    assert build_memory_mb(PgvectorIndexConfig(method="ivfflat"), 384, 100_000) == 64
    assert build_settings(PgvectorIndexConfig(), 384, 100_000) == [("maintenance_work_mem", "276MB")]


def test_search_settings_change_without_a_rebuild(pg_url: str, schema: str, pg_dir: Path) -> None:
    base = {"store": {"kind": "postgres", "url": pg_url, "schema": schema}}
    with memcore.open({**base, "indexes": {"main": {"kind": "pgvector"}}}, path=pg_dir) as memory:
        memory.insert([{"id": "a", "text": "the cat sat on the mat"}, {"id": "b", "text": "stock markets fell"}])
        name = memory.collection.index("main").stats()["db_index"]
    changed = {"kind": "pgvector", "ef_search": 100, "max_scan_tuples": 5000, "build_memory_mb": 128}
    with memcore.open({**base, "indexes": {"main": changed}}, path=pg_dir) as memory:
        index = memory.collection.index("main")
        assert index.config.ef_search == 100 and index.stats()["db_index"] == name
        assert memory.retrieve("a cat on a mat", k=1)[0]["id"] == "a"
