"""Settings of the ``pgvector`` index kind (no psycopg import: read at every memcore start)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from memcore.plugin import ComponentConfig

__all__ = ["PgvectorIndexConfig"]


class PgvectorIndexConfig(ComponentConfig):
    """Settings of the ``pgvector`` index: an HNSW or IVFFlat index of pgvector over the
    postgres store's own vectors table of ``space`` (no copy of the vectors anywhere else).

    The defaults (m 16, ef_construction 128, ef_search 800, relaxed iterative scan) reach
    recall@10 >= 0.99 against exact search, filtered (10%) and unfiltered, on clustered
    100k x 384 data (bench/bench_postgres.py --data clustered) and on the test data of
    ``plugins/postgres/tests/test_pgvector_recall.py``; docs/guides/postgres.md has the
    measurements and what random vectors reach.
    """

    #: options a memory may change without rebuilding the database index (each search, and
    #: each build, sets them in its own transaction)
    search_time: ClassVar[frozenset[str]] = frozenset({"ef_search", "probes", "iterative_scan", "force_index", "max_scan_tuples", "build_memory_mb"})
    store_kinds: ClassVar[frozenset[str]] = frozenset({"postgres"})

    kind: str = "pgvector"
    space: str = Field("default", description="Embedding space whose vectors (the store's table of that space) are indexed.")
    metric: Literal["cosine", "ip", "l2"] = Field(
        "cosine", description="cosine similarity, inner product, or L2 (score = -squared distance): the operator class of the database index."
    )
    method: Literal["hnsw", "ivfflat"] = Field("hnsw", description="pgvector index method: hnsw (graph) or ivfflat (lists; build it after loading data).")
    m: int = Field(16, ge=2, le=100, description="HNSW: links per node (pgvector's m).")
    ef_construction: int = Field(128, ge=4, le=1000, description="HNSW: candidate list size while building (pgvector's ef_construction).")
    ef_search: int = Field(
        800,
        ge=1,
        le=1000,
        description="HNSW: candidate list size per query (SET LOCAL hnsw.ef_search); higher is better recall, slower. "
        "A filter keeping a share s of the records leaves about s * ef_search candidates for the k results of the first scan: "
        "800 leaves 80 for k = 10 under a 10% filter (400 measured 0.983 filtered on the test data, 800 0.99+).",
    )
    lists: int = Field(100, ge=1, le=32768, description="IVFFlat: number of lists (pgvector's lists), fixed when the database index is built.")
    probes: int = Field(10, ge=1, le=32768, description="IVFFlat: lists searched per query (SET LOCAL ivfflat.probes).")
    iterative_scan: Literal["relaxed_order", "strict_order", "off"] = Field(
        "relaxed_order",
        description="pgvector 0.8 iterative index scan, so a selective filter still returns k rows (ivfflat knows only relaxed_order); results are re-sorted by score.",
    )
    force_index: bool = Field(
        True,
        description="Keep the planner on the vector index (SET LOCAL enable_sort = off) for where/scope filters, whose selectivity it cannot estimate; "
        "an explicit id list (a text filter) is left to the planner.",
    )
    build_memory_mb: int = Field(
        0,
        ge=0,
        le=1_048_576,
        description="maintenance_work_mem (MB) of the database index's build; 0: enough for pgvector to build the HNSW graph in memory, "
        "estimated from the number of vectors (64 MB to 4 GB).",
    )
    max_scan_tuples: int = Field(
        20000, ge=1, le=10_000_000, description="HNSW: most tuples an iterative scan visits before it gives up (hnsw.max_scan_tuples)."
    )
