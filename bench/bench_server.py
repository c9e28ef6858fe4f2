#!/usr/bin/env python
"""memcore serve under load: concurrent clients mixing inserts and searches, against in process and Chroma.

One collection of ``--n`` records with caller-given vectors (``--dim``, clustered, fixed
seed) in an ``exact`` index; ``--clients`` threads each run ``--ops`` operations, a search
(k=10, by vector) or with probability ``--insert-share`` an insert of a new record. The same
operations (same vectors, same order per client) run against:

- ``in_process``: ``memcore.Memory`` in this process (the threads share it);
- ``http``: ``memcore serve`` started as its own process on 127.0.0.1, through
  ``memcore_server.RemoteMemory`` (one client per thread); with ``--http granian`` the same
  application on granian instead of uvicorn (``bench/_serve_granian.py``, one process);
- ``chroma_server`` (unless ``--no-chroma``): ``chroma run`` on 127.0.0.1 with the same
  vectors, through ``chromadb.HttpClient`` (its HNSW index: approximate, where memcore's
  ``exact`` is exact).

For each: throughput (operations per second), search and insert p50/p99 in ms, errors, the
CPU the bench process spent per operation (for ``in_process`` that is all the work; for the
others the clients' share) and, for ``memcore serve``, the server's CPU per operation. Then
one client alone runs ``--single-ops`` searches against each (the latency without queueing).

BLAS / OpenMP threads: ``--blas-threads N`` (default 1, the server's default) is the
server's ``[server] blas_threads`` and, through threadpoolctl, the cap of the in-process
run, so both sides search with the same thread pools (0: the libraries' default on both).

Goals of issue 23, answered in ``"goals"`` (each: value, target, met): search p50 over HTTP
<= in-process p50 + 3 ms (32 clients; the one-client figure beside it); throughput >=
Chroma's server; 0 errors. The load average before and after each run is in ``"load"``.

    python bench/bench_server.py --quick                    # 2k records, 32 clients x 20 ops
    python bench/bench_server.py                            # 10k records, 32 clients x 50 ops

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from contextlib import nullcontext
from typing import Any, Callable

import numpy as np

from _common import emit, finish_environment, free_port, header, loadavg, log, pct, process_cpu_s, use_checkout, wait_for_serve

use_checkout("server")

import memcore  # noqa: E402
from memcore_server.threads import compute_threads  # noqa: E402


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(8, n // 500), dim)).astype(np.float32)
    x = centers[rng.integers(0, len(centers), n)] + 0.3 * rng.normal(size=(n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def plan(args: argparse.Namespace) -> list[list[tuple[str, int]]]:
    """Per client, its operations: ("search", query row) or ("insert", new record row)."""
    rng = np.random.default_rng(args.seed + 7)
    work, fresh = [], 0
    for _ in range(args.clients):
        ops = []
        for _ in range(args.ops):
            if rng.random() < args.insert_share:
                ops.append(("insert", fresh))
                fresh += 1
            else:
                ops.append(("search", int(rng.integers(0, args.queries))))
        work.append(ops)
    return work


def run(
    work: list[list[tuple[str, int]]],
    make: Callable[[], Any],
    search: Callable[[Any, int], Any],
    insert: Callable[[Any, int], Any],
    server_pid: int | None = None,
) -> dict[str, Any]:
    """Run every client's operations in its own thread; latencies, throughput, errors, CPU per op, load."""
    lat: dict[str, list[float]] = {"search": [], "insert": []}
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(work) + 1)

    def client(ops: list[tuple[str, int]]) -> None:
        handle = make()
        barrier.wait()
        mine: dict[str, list[float]] = {"search": [], "insert": []}
        for kind, row in ops:
            t0 = time.perf_counter()
            try:
                (search if kind == "search" else insert)(handle, row)
            except Exception as exc:  # counted, not raised: a benchmark reports errors
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            mine[kind].append((time.perf_counter() - t0) * 1000)
        with lock:
            for k, v in mine.items():
                lat[k].extend(v)
        close = getattr(handle, "close", None)
        if close is not None and handle is not None and not isinstance(handle, memcore.Memory):
            close()

    threads = [threading.Thread(target=client, args=(ops,)) for ops in work]
    for t in threads:
        t.start()
    load_before = loadavg()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    s0 = process_cpu_s(server_pid) if server_pid else None
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    s1 = process_cpu_s(server_pid) if server_pid else None
    done = len(lat["search"]) + len(lat["insert"])
    return {
        "seconds": round(seconds, 2),
        "ops_per_s": round(done / seconds, 1),
        "search_ms": {"n": len(lat["search"]), "p50": round(pct(lat["search"], 50), 2), "p99": round(pct(lat["search"], 99), 2)} if lat["search"] else None,
        "insert_ms": {"n": len(lat["insert"]), "p50": round(pct(lat["insert"], 50), 2), "p99": round(pct(lat["insert"], 99), 2)} if lat["insert"] else None,
        "errors": len(errors),
        "first_errors": errors[:3],
        "bench_cpu_ms_per_op": round(cpu * 1000 / max(1, done), 2),
        **({"server_cpu_ms_per_op": round((s1 - s0) * 1000 / max(1, done), 2)} if s0 is not None and s1 is not None else {}),
        "load": {"before": load_before, "after": loadavg()},
    }


def single(ops: int, queries: int, search: Callable[[int], Any]) -> dict[str, Any] | None:
    """One client alone: ``ops`` searches one after the other (latency without queueing)."""
    if ops <= 0:
        return None
    for row in range(min(10, ops)):  # warm the connection and the caches
        search(row % queries)
    lat, load_before = [], loadavg()
    for i in range(ops):
        t0 = time.perf_counter()
        search(i % queries)
        lat.append((time.perf_counter() - t0) * 1000)
    return {"n": ops, "p50": round(pct(lat, 50), 2), "p90": round(pct(lat, 90), 2), "load": {"before": load_before, "after": loadavg()}}


def blas_limit(threads: int) -> Any:
    """threadpoolctl's cap on this process's BLAS / OpenMP pools for a block (nothing for 0)."""
    if threads <= 0:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads)


def goal(value: float, target: float, at_most: bool, unit: str) -> dict[str, Any]:
    """One goal of the issue: its value, its target and whether it is met."""
    return {"value": value, "target": f"{'<=' if at_most else '>='} {target}{unit}", "met": bool(value <= target if at_most else value >= target)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--ops", type=int, default=50, help="operations per client")
    parser.add_argument("--insert-share", type=float, default=0.2)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--single-ops", type=int, default=200, help="searches of the one-client run (0: skip it)")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS/OpenMP threads, server and in process alike (0: the libraries' default)")
    parser.add_argument("--server-threads", type=int, default=0, help="[server] threads of memcore serve (0: the server's default)")
    parser.add_argument("--quick", action="store_true", help="2,000 records, 20 ops per client, 100 one-client searches")
    parser.add_argument(
        "--http",
        default="uvicorn",
        choices=["uvicorn", "granian"],
        help="the HTTP server of memcore serve: uvicorn (memcore serve itself) or granian (bench/_serve_granian.py: pip install granian)",
    )
    parser.add_argument("--granian-task", default="rust", choices=["rust", "asyncio"], help="with --http granian: granian's task implementation")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.n, args.ops, args.single_ops = min(args.n, 2000), min(args.ops, 20), min(args.single_ops, 100)

    result = header("server", args)
    x = clustered(args.n, args.dim, args.seed)
    queries = clustered(args.queries, args.dim, args.seed + 1)
    work = plan(args)
    inserts = sum(kind == "insert" for ops in work for kind, _ in ops)
    new = clustered(max(1, inserts), args.dim, args.seed + 2)
    settings = {"spaces": {"default": {"dim": args.dim}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        log(f"loading {args.n} records")
        with memcore.open(settings, path=base) as memory:
            for start in range(0, args.n, 1000):
                memory.insert([{"text": f"record {i}", "id": f"r{i}", "vectors": {"default": x[i]}} for i in range(start, min(args.n, start + 1000))])
        for name in ("local", "served"):
            shutil.copytree(base, Path(tmp) / name)

        def m_search(handle: Any, row: int) -> Any:
            return handle.retrieve(vector=queries[row], k=10)

        def m_insert(handle: Any, row: int) -> Any:
            return handle.insert({"text": f"new {row}", "id": f"n{row}", "vectors": {"default": new[row]}})

        log(f"in process (BLAS/OpenMP threads: {args.blas_threads or 'library default'})")
        with memcore.open(settings, path=Path(tmp) / "local") as memory, blas_limit(args.blas_threads):
            result["in_process"] = run(work, lambda: memory, m_search, m_insert)
            result["in_process"]["one_client_search_ms"] = single(args.single_ops, args.queries, lambda row: m_search(memory, row))
            result["in_process"]["compute_threads"] = compute_threads()

        log("over HTTP (memcore serve)")
        port = free_port()
        config = Path(tmp) / "memcore.toml"
        config.write_text(
            f'[spaces.default]\ndim = {args.dim}\n\n[indexes.vector]\nkind = "exact"\nspace = "default"\n\n'
            f"[server]\nport = {port}\nblas_threads = {args.blas_threads}\n" + (f"threads = {args.server_threads}\n" if args.server_threads else ""),
            encoding="utf-8",
        )
        if args.http == "granian":
            cmd = [sys.executable, str(Path(__file__).with_name("_serve_granian.py")), str(config), str(Path(tmp) / "served"), args.granian_task]
        else:
            cmd = [sys.executable, "-m", "memcore.cli", "serve", "--config", str(config), "--path", str(Path(tmp) / "served")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            from memcore_server import RemoteMemory

            url = f"http://127.0.0.1:{port}"
            wait_for_serve(url, proc)
            result["http"] = run(work, lambda: RemoteMemory(url, retries=0, timeout=120), m_search, m_insert, server_pid=proc.pid)
            with RemoteMemory(url, retries=0, timeout=120) as remote:
                result["http"]["one_client_search_ms"] = single(args.single_ops, args.queries, lambda row: m_search(remote, row))
        finally:
            proc.terminate()
            proc.wait(timeout=60)

        if not args.no_chroma:
            log("chroma run")
            import chromadb
            from chromadb.config import Settings
            from memcore_chroma_support.server import chroma_server

            result["chromadb"] = chromadb.__version__
            with chroma_server(Path(tmp)) as (host, cport):
                admin = chromadb.HttpClient(host=host, port=cport, settings=Settings(anonymized_telemetry=False))
                coll = admin.create_collection("bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
                batch = int(admin.get_max_batch_size())
                for start in range(0, args.n, batch):
                    end = min(args.n, start + batch)
                    coll.add(ids=[f"r{i}" for i in range(start, end)], embeddings=x[start:end], documents=[f"record {i}" for i in range(start, end)])

                def c_make() -> Any:
                    return chromadb.HttpClient(host=host, port=cport, settings=Settings(anonymized_telemetry=False)).get_collection(
                        "bench", embedding_function=None
                    )

                def c_search(handle: Any, row: int) -> Any:
                    return handle.query(query_embeddings=queries[row : row + 1], n_results=10)

                def c_insert(handle: Any, row: int) -> Any:
                    return handle.add(ids=[f"n{row}"], embeddings=new[row : row + 1], documents=[f"new {row}"])

                result["chroma_server"] = run(work, c_make, c_search, c_insert)
                one = c_make()
                result["chroma_server"]["one_client_search_ms"] = single(args.single_ops, args.queries, lambda row: c_search(one, row))

    local, http = result["in_process"], result["http"]
    result["blas_threads"] = {"server": args.blas_threads, "in_process": args.blas_threads, "note": "0 = the libraries' default"}
    result["http_search_p50_minus_in_process_ms"] = round(http["search_ms"]["p50"] - local["search_ms"]["p50"], 2)
    goals = {"search_p50_http_minus_in_process_ms": goal(result["http_search_p50_minus_in_process_ms"], 3.0, True, " ms")}
    if local.get("one_client_search_ms") and http.get("one_client_search_ms"):
        one = round(http["one_client_search_ms"]["p50"] - local["one_client_search_ms"]["p50"], 2)
        goals["search_p50_http_minus_in_process_ms"]["one_client"] = goal(one, 3.0, True, " ms")
    if "chroma_server" in result:
        result["http_throughput_over_chroma"] = round(http["ops_per_s"] / result["chroma_server"]["ops_per_s"], 2)
        goals["throughput_http_over_chroma_server"] = goal(result["http_throughput_over_chroma"], 1.0, False, "")
    goals["errors"] = goal(http["errors"] + local["errors"], 0, True, "")
    result["goals"] = goals
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
