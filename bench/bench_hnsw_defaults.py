#!/usr/bin/env python
"""HNSW defaults: recall@k against exact search vs queries/s, memcore vs raw faiss vs Chroma.

Data: ``--n`` clustered float32 vectors (``--clusters`` Gaussian blobs, ``--dim``,
normalised), queries = data points plus noise; truth = exact inner-product top ``--k``.

- ``raw``: ``faiss.IndexHNSWFlat(dim, 32, METRIC_INNER_PRODUCT)`` built once per
  ``--ef-construction`` value, then for every ``--ef`` value: recall@k and single-query
  QPS (one ``search`` call per query, as an agent asks) -- the trade-off table;
- ``memcore``: a Collection (SQLite store) with a ``faiss`` index ``factory = "HNSW32"``
  and nothing else set, searched through ``Collection.search_index``: what the defaults
  give (``ef_search`` chosen from k and the index size, ``ef_construction`` 80);
- ``chroma`` (when ``chromadb`` is installed; imported lazily): a persistent collection
  with ``hnsw:space = cosine`` and its defaults (M 16, ef_construction 100, ef_search 100),
  ``query(query_embeddings=[q], n_results=k)``.

    PYTHONPATH=core python bench/bench_hnsw_defaults.py --quick
    PYTHONPATH=core python bench/bench_hnsw_defaults.py --n 200000 --no-chroma   # issue 13's 200k check
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

use_checkout("faiss")

from memcore.collection import Collection  # noqa: E402
from memcore.plugins import get_registry  # noqa: E402
from memcore.records import Query  # noqa: E402
from memcore.spaces import Space  # noqa: E402
from memcore.stores.sqlite import SQLiteStore  # noqa: E402


def make_data(n: int, dim: int, clusters: int, nq: int, seed: int, noise: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centers[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.integers(0, n, nq)] + 0.2 * rng.standard_normal((nq, dim)).astype(np.float32) / np.sqrt(dim)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x.astype(np.float32), q.astype(np.float32)


def truth(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    out = []
    for s in range(0, q.shape[0], 64):
        scores = q[s : s + 64] @ x.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        out.append(top)
    return np.vstack(out)


def recall(found: list[list[int]], gt: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(f[:k]) & set(g.tolist())) / k for f, g in zip(found, gt)]))


def timed(fn, qs: np.ndarray) -> tuple[float, list[list[int]]]:
    found = []
    started = time.perf_counter()
    for q in qs:
        found.append(fn(q))
    return len(qs) / (time.perf_counter() - started), found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.6, help="spread of each cluster (its centre has unit variance per dimension)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--ef", default="16,32,64,96,128,192,256")
    p.add_argument("--ef-construction", default="40,80")
    p.add_argument("--no-chroma", action="store_true")
    p.add_argument("--no-memcore", action="store_true")
    p.add_argument("--quick", action="store_true", help="N=20,000, 100 queries, efConstruction 80 only")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.queries, args.ef_construction = 20_000, 100, "80"
    import faiss

    result = header("bench_hnsw_defaults", args, faiss=faiss.__version__)
    x, qs = make_data(args.n, args.dim, args.clusters, args.queries, args.seed, args.noise)
    gt = truth(x, qs, args.k)
    k = args.k
    raw: dict[str, Any] = {}
    for efc in [int(v) for v in args.ef_construction.split(",") if v]:
        index = faiss.IndexHNSWFlat(args.dim, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = efc
        log(f"raw faiss HNSW32 efConstruction={efc}: building")
        started = time.perf_counter()
        index.add(x)
        entry: dict[str, Any] = {"build_s": round(time.perf_counter() - started, 2)}
        for ef in [int(v) for v in args.ef.split(",")]:
            index.hnsw.efSearch = ef
            rate, found = timed(lambda q, index=index: index.search(q[None, :], k)[1][0].tolist(), qs)
            entry[f"ef={ef}"] = {"recall": round(recall(found, gt, k), 4), "qps": round(rate, 1)}
        raw[f"efConstruction={efc}"] = entry
        log(entry)
        del index
    result["raw_faiss"] = raw
    tmp = Path(tempfile.mkdtemp(prefix="bench_hnsw_"))
    try:
        if not args.no_memcore:
            col = Collection(SQLiteStore(tmp / "mem"), {"dense": Space("dense", args.dim)}, get_registry(), tmp / "mem")
            col.create_index("hnsw", "faiss", space="dense", factory="HNSW32")
            log("memcore: inserting")
            started = time.perf_counter()
            for s in range(0, args.n, 5000):
                col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}} for i in range(s, min(s + 5000, args.n))])
            insert_s = time.perf_counter() - started
            stats = col.index("hnsw").stats()
            rate, found = timed(lambda q: [int(h.id[1:]) for h in col.search_index("hnsw", Query(vectors={"dense": q}, k=k), k)], qs)
            result["memcore"] = {
                "insert_s": round(insert_s, 2),
                "ef_search_used": col.index("hnsw").effective_ef(k),
                "ef_construction": stats.get("ef_construction"),
                "recall": round(recall(found, gt, k), 4),
                "qps": round(rate, 1),
            }
            log(result["memcore"])
            col.close()
        if not args.no_chroma:
            try:
                import chromadb
            except ImportError:
                result["chroma"] = {"skipped": "chromadb is not installed"}
            else:
                client = chromadb.PersistentClient(path=str(tmp / "chroma"))
                coll = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
                log("chroma: inserting")
                started = time.perf_counter()
                step = min(5000, client.get_max_batch_size())
                for s in range(0, args.n, step):
                    e = min(s + step, args.n)
                    coll.add(ids=[f"r{i}" for i in range(s, e)], embeddings=x[s:e])
                insert_s = time.perf_counter() - started
                rate, found = timed(lambda q: [int(i[1:]) for i in coll.query(query_embeddings=[q], n_results=k, include=[])["ids"][0]], qs)
                result["chroma"] = {
                    "version": chromadb.__version__,
                    "insert_s": round(insert_s, 2),
                    "recall": round(recall(found, gt, k), 4),
                    "qps": round(rate, 1),
                }
                log(result["chroma"])
        if "memcore" in result and "qps" in result.get("chroma", {}):
            result["memcore_qps_over_chroma"] = round(result["memcore"]["qps"] / result["chroma"]["qps"], 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
