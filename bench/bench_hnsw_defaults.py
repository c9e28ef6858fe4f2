#!/usr/bin/env python
"""HNSW defaults: recall@k against exact search vs queries/s, memcore vs raw faiss vs Chroma.

Data: ``--n`` clustered float32 vectors (``--clusters`` Gaussian blobs, ``--dim``,
normalised), queries = data points plus noise; truth = exact inner-product top ``--k``.

- ``raw``: ``faiss.IndexHNSWFlat(dim, 32, METRIC_INNER_PRODUCT)`` built once per
  ``--ef-construction`` value, then for every ``--ef`` value: recall@k and single-query
  QPS (one ``search`` call per query, as an agent asks) -- the trade-off table;
- ``memcore``: a Collection (SQLite store) with a ``faiss`` index ``factory = "HNSW32"``
  and nothing else set, searched through ``Collection.search_index``: what the defaults
  give (``ef_search`` chosen from k and the index size, ``ef_construction`` 64);
- ``chroma`` (when ``chromadb`` is installed; imported lazily): a persistent collection
  (``PersistentClient``) with ``hnsw:space = cosine``, its defaults (M 16, ef_construction
  100, ef_search 100) and the vectors given explicitly,
  ``query(query_embeddings=[q], n_results=k, include=[])``.

The speed comparison at the defaults (``at_defaults``) is taken in the same run, in
``--rounds`` interleaved rounds after an untimed warm-up: in every round each query is
timed on memcore, then Chroma, then raw faiss (built with ``ef_construction`` 64, searched
at the ``ef_search`` memcore chose), so a change of machine load hits all three alike. It
reports each side's median q/s and p50 latency over the rounds and
``memcore_qps_over_chroma``, the median of the per-round q/s ratios.

    PYTHONPATH=core python bench/bench_hnsw_defaults.py --quick
    PYTHONPATH=core python bench/bench_hnsw_defaults.py --n 200000 --no-chroma   # issue 13's 200k check
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, pct, use_checkout

use_checkout("faiss")

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore import Query
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore


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


def interleaved(searchers: dict[str, Any], qs: np.ndarray, rounds: int) -> dict[str, Any]:
    """Warm each searcher up once, then ``rounds`` passes over the queries in which every
    query is timed on each searcher in turn (so a change of machine load hits all alike):
    per searcher the median over rounds of q/s and of the p50 latency, and the median of the
    per-round ratios of memcore's q/s over each other searcher's."""
    for fn in searchers.values():
        for q in qs[: max(1, len(qs) // 4)]:
            fn(q)
    names = list(searchers)
    per: dict[str, list[list[float]]] = {name: [] for name in names}
    for r in range(rounds):
        times: dict[str, list[float]] = {name: [] for name in names}
        for q in qs:
            for name in names:
                started = time.perf_counter()
                searchers[name](q)
                times[name].append(time.perf_counter() - started)
        for name in names:
            per[name].append(times[name])
        log(f"round {r + 1}/{rounds}:", {name: round(len(qs) / sum(times[name]), 1) for name in names})
    out: dict[str, Any] = {"rounds": rounds}
    for name, runs in per.items():
        out[name] = {
            "qps_median": round(statistics.median(len(qs) / sum(ts) for ts in runs), 1),
            "qps_rounds": [round(len(qs) / sum(ts), 1) for ts in runs],
            "p50_ms": round(statistics.median(pct([t * 1000 for t in ts], 50) for ts in runs), 3),
        }
    if "memcore" in per:
        for other in names:
            if other != "memcore":
                ratios = [sum(o) / sum(m) for m, o in zip(per["memcore"], per[other])]
                out[f"memcore_qps_over_{other}"] = round(statistics.median(ratios), 2)
                out[f"memcore_qps_over_{other}_rounds"] = [round(x, 2) for x in ratios]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.6, help="spread of each cluster (its centre has unit variance per dimension)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--ef", default="16,32,64,96,128,192,256")
    p.add_argument("--ef-construction", default="40,64,80")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds at the defaults (memcore, Chroma, raw faiss)")
    p.add_argument("--no-chroma", action="store_true")
    p.add_argument("--no-memcore", action="store_true")
    p.add_argument("--quick", action="store_true", help="N=20,000, 100 queries, efConstruction 64 only, 3 rounds")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.queries, args.ef_construction, args.rounds = 20_000, 100, "64", 3
    import faiss
    from memcore_faiss.defaults import DEFAULT_EF_CONSTRUCTION

    result = header("bench_hnsw_defaults", args, faiss=faiss.__version__)
    x, qs = make_data(args.n, args.dim, args.clusters, args.queries, args.seed, args.noise)
    gt = truth(x, qs, args.k)
    k = args.k
    raw: dict[str, Any] = {}
    raw_default = None  # the raw index built with memcore's default ef_construction, for the timed rounds
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
        if efc == DEFAULT_EF_CONSTRUCTION:
            raw_default = index
        del index
    result["raw_faiss"] = raw
    tmp = Path(tempfile.mkdtemp(prefix="bench_hnsw_"))
    searchers: dict[str, Any] = {}
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

            def memcore_search(q: np.ndarray) -> list[int]:
                return [int(h.id[1:]) for h in col.search_index("hnsw", Query(vectors={"dense": q}, k=k), k)]

            rate, found = timed(memcore_search, qs)
            result["memcore"] = {
                "insert_s": round(insert_s, 2),
                "ef_search_used": col.index("hnsw").effective_ef(k),
                "ef_construction": stats.get("ef_construction"),
                "recall": round(recall(found, gt, k), 4),
                "qps": round(rate, 1),
            }
            log(result["memcore"])
            searchers["memcore"] = memcore_search
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

                def chroma_search(q: np.ndarray) -> list[int]:
                    return [int(i[1:]) for i in coll.query(query_embeddings=[q], n_results=k, include=[])["ids"][0]]

                rate, found = timed(chroma_search, qs)
                result["chroma"] = {
                    "version": chromadb.__version__,
                    "insert_s": round(insert_s, 2),
                    "recall": round(recall(found, gt, k), 4),
                    "qps": round(rate, 1),
                }
                log(result["chroma"])
                searchers["chroma"] = chroma_search
        if raw_default is not None and "memcore" in result:
            raw_default.hnsw.efSearch = result["memcore"]["ef_search_used"]
            searchers["raw_faiss"] = lambda q: raw_default.search(q[None, :], k)[1][0].tolist()
        if len(searchers) > 1 and args.rounds > 0:
            log(f"interleaved timing at the defaults: {', '.join(searchers)}")
            result["at_defaults"] = interleaved(searchers, qs, args.rounds)
            if "memcore_qps_over_chroma" in result["at_defaults"]:
                result["memcore_qps_over_chroma"] = result["at_defaults"]["memcore_qps_over_chroma"]
        if not args.no_memcore:
            col.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
