#!/usr/bin/env python
"""``Memory.retrieve_many`` of a batch of vector queries against a loop of ``Memory.retrieve``.

One memory of ``--n`` clustered unit vectors (``--dim``) in an ``exact`` index (the default
``basic`` pipeline, SQLite store), loaded with ``insert_columns``. Each round runs the same
``--batch`` query vectors (k=10) both ways, alternating which goes first: a loop of
``retrieve(vector=q)`` and one ``retrieve_many(vectors=Q)``; CPU and wall time per query
(median over ``--rounds``), their ratio, and that both give the same ids. Beside them, raw
numpy on the same matrix: a matrix-vector product per query against one matrix product
for the batch (each with ``argpartition`` for the top 10). BLAS is capped at
``--blas-threads`` (default 1, the server's default).

    python bench/bench_retrieve_many.py --quick
    python bench/bench_retrieve_many.py                     # 10k x 128
    python bench/bench_retrieve_many.py --n 100000 --dim 384

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from _common import emit, finish_environment, header, log, use_checkout

use_checkout()

import memcore  # noqa: E402


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(8, n // 500), dim)).astype(np.float32)
    x = centers[rng.integers(0, len(centers), n)] + 0.3 * rng.normal(size=(n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(CPU seconds of this process, wall seconds, value) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return time.process_time() - c0, time.perf_counter() - t0, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32, help="queries per batch")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: the library's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2,000 records, 5 rounds")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds = min(args.n, 2000), min(args.rounds, 5)

    result = header("retrieve_many", args)
    from threadpoolctl import threadpool_limits

    if args.blas_threads > 0:
        threadpool_limits(limits=args.blas_threads)
    x = clustered(args.n, args.dim, args.seed)
    queries = clustered(args.batch, args.dim, args.seed + 1)
    settings = {"spaces": {"default": {"dim": args.dim}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
    with tempfile.TemporaryDirectory() as tmp, memcore.open(settings, path=Path(tmp) / "m") as memory:
        log(f"loading {args.n} x {args.dim}")
        for start in range(0, args.n, 20_000):
            end = min(args.n, start + 20_000)
            memory.insert_columns([f"record {i}" for i in range(start, end)], ids=[f"r{i}" for i in range(start, end)], vectors=x[start:end])

        def loop() -> list[list[dict[str, Any]]]:
            return [memory.retrieve(vector=q, k=10) for q in queries]

        def batch() -> list[list[dict[str, Any]]]:
            return memory.retrieve_many(vectors=queries, k=10)

        def raw_loop() -> list[np.ndarray]:
            return [np.argpartition(-x.dot(q), 10)[:10] for q in queries]

        def raw_batch() -> list[np.ndarray]:
            return list(np.argpartition(-(queries @ x.T), 10, axis=1)[:, :10])

        same = [[r["id"] for r in hits] for hits in loop()] == [[r["id"] for r in hits] for hits in batch()]
        times: dict[str, dict[str, list[float]]] = {name: {"cpu": [], "wall": []} for name in ("loop", "batch", "raw_loop", "raw_batch")}
        runs = {"loop": loop, "batch": batch, "raw_loop": raw_loop, "raw_batch": raw_batch}
        log(f"{args.rounds} rounds of {args.batch} queries")
        for r in range(args.rounds):
            order = ["loop", "batch", "raw_loop", "raw_batch"] if r % 2 == 0 else ["batch", "loop", "raw_batch", "raw_loop"]
            for name in order:
                cpu, wall, _ = timed(runs[name])
                times[name]["cpu"].append(cpu * 1000 / args.batch)
                times[name]["wall"].append(wall * 1000 / args.batch)

    def med(name: str, clock: str) -> float:
        return round(statistics.median(times[name][clock]), 4)

    result["same_ids"] = same
    result["ms_per_query"] = {name: {"cpu": med(name, "cpu"), "wall": med(name, "wall")} for name in times}
    result["batch_over_loop"] = {clock: round(med("batch", clock) / med("loop", clock), 3) for clock in ("cpu", "wall")}
    result["raw_batch_over_raw_loop"] = {clock: round(med("raw_batch", clock) / med("raw_loop", clock), 3) for clock in ("cpu", "wall")}
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
