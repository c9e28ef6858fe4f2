#!/usr/bin/env python
"""Filtered vector queries: memcore vs the raw numpy-mask equivalent vs Chroma, same run.

Data: ``--n`` clustered float32 vectors (``--clusters`` Gaussian blobs, ``--dim``), each
with metadata ``{"u": "u<0..99>", "g": "g<0..9>", "h": 0|1}`` drawn at random, so the
filters ``{"u": ...}``, ``{"g": ...}`` and ``{"h": ...}`` select ~1%, ~10% and ~50%.

For each selectivity and each memcore index (``--indexes``: ``faiss`` = HNSW32 at its
defaults, ``exact``), ``--queries`` queries (data points plus noise) are timed through
``Collection.search_index`` (the path every pipeline uses: filter -> allowed -> index):

- ``warm``: the filter value is the same for every query (an agent asking about one user);
  the first query, which resolves the filter, is reported apart as ``first_ms``;
- ``after_write``: a state write before each query bumps the store's sequence number
  (what an agent that keeps state between reads pays; the collection carries its cached
  sets across its own writes, so this no longer resolves the filter again);
- ``after_insert``: one record matching the filter is inserted before each query (an agent
  that writes a memory between reads): the cached set gains it, the index changed, so every
  per-index translation of the set is redone. The records are deleted afterwards.

The raw side is what a user would write by hand: ``np.flatnonzero(column == value)``, the
allowed rows gathered and scored with one matrix-vector product, ``argpartition`` for the
top k. Recall@k is against that exact answer. Chroma (``pip install chromadb``, imported
lazily, skipped when absent) gets the same vectors, metadata and ``where`` filters.

    PYTHONPATH=core python bench/bench_filtered.py --quick
    PYTHONPATH=core python bench/bench_filtered.py --n 100000 --out filtered.json
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
from _common import emit, finish_environment, header, log, pct, use_checkout

use_checkout("faiss")

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore import Query
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore

LEVELS = {"1%": ("u", 100), "10%": ("g", 10), "50%": ("h", 2)}


def make_data(n: int, dim: int, clusters: int, seed: int, noise: float = 0.6) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    assign = rng.integers(0, clusters, n)
    x = centers[assign] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    cols = {field: rng.integers(0, card, n) for field, card in LEVELS.values()}
    return x.astype(np.float32), cols


def meta_value(field: str, v: int) -> Any:
    return int(v) if field == "h" else f"{field}{int(v)}"


def queries(x: np.ndarray, nq: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    q = x[rng.integers(0, x.shape[0], nq)] + 0.2 * rng.standard_normal((nq, x.shape[1])).astype(np.float32) / np.sqrt(x.shape[1])
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def raw_search(x: np.ndarray, col: np.ndarray, value: int, q: np.ndarray, k: int) -> np.ndarray:
    rows = np.flatnonzero(col == value)
    scores = x[rows] @ q
    top = np.argpartition(-scores, min(k, len(rows)) - 1)[:k]
    return rows[top[np.argsort(-scores[top])]]


def build_memcore(tmp: Path, x: np.ndarray, cols: dict[str, np.ndarray], kinds: list[str], batch: int) -> tuple[Collection, float]:
    dim = x.shape[1]
    col = Collection(SQLiteStore(tmp), {"dense": Space("dense", dim)}, get_registry(), tmp)
    for kind in kinds:
        options = {"space": "dense"} | ({"factory": "HNSW32"} if kind == "faiss" else {})
        col.create_index(kind, kind, **options)
    started = time.perf_counter()
    for s in range(0, x.shape[0], batch):
        col.insert(
            [
                {"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {f: meta_value(f, cols[f][i]) for f, _ in LEVELS.values()}}
                for i in range(s, min(s + batch, x.shape[0]))
            ]
        )
    return col, time.perf_counter() - started


def time_memcore(col: Collection, index: str, qs: np.ndarray, where: dict, k: int, mode: str = "warm") -> tuple[list[float], list[list[int]], float]:
    times, found = [], []
    first = None
    after_write = mode != "warm"
    inserted = []
    for i, q in enumerate(qs):
        if mode == "after_write":
            col.set_state({("bench", "tick"): i})
        elif mode == "after_insert":
            rid = f"w{len(inserted)}"
            col.insert([{"id": rid, "text": "written", "vectors": {"dense": q}, "metadata": dict(where)}], indexes=[index])
            inserted.append(rid)
        query = Query(vectors={"dense": q}, k=k, where=where)
        t = time.perf_counter()
        hits = col.search_index(index, query, k)
        dt = time.perf_counter() - t
        if first is None:
            first = dt
            if not after_write:
                continue
        times.append(dt)
        found.append([int(h.id[1:]) for h in hits if h.id.startswith("r")])
    if inserted:
        col.delete(inserted)
    return times, found, first or 0.0


def recall(found: list[list[int]], truth: list[np.ndarray], k: int) -> float:
    return float(np.mean([len(set(f) & set(t.tolist())) / min(k, len(t)) for f, t in zip(found, truth)]))


def stats(times: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times]
    return {"p50_ms": round(pct(ms, 50), 3), "p95_ms": round(pct(ms, 95), 3)}


def run_chroma(tmp: Path, x: np.ndarray, cols: dict[str, np.ndarray], qs: np.ndarray, levels: dict[str, tuple[str, int]], k: int) -> dict[str, Any]:
    try:
        import chromadb
    except ImportError:
        return {"skipped": "chromadb is not installed (pip install -c constraints.txt chromadb)"}
    client = chromadb.PersistentClient(path=str(tmp / "chroma"))
    coll = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    step = min(5000, client.get_max_batch_size())
    started = time.perf_counter()
    for s in range(0, x.shape[0], step):
        e = min(s + step, x.shape[0])
        coll.add(
            ids=[f"r{i}" for i in range(s, e)],
            embeddings=x[s:e],
            metadatas=[{f: meta_value(f, cols[f][i]) for f, _ in LEVELS.values()} for i in range(s, e)],
            documents=[f"doc {i}" for i in range(s, e)],
        )
    out: dict[str, Any] = {"version": chromadb.__version__, "insert_s": round(time.perf_counter() - started, 2)}
    for level, (field, value) in levels.items():
        where = {field: meta_value(field, value)}
        times, found = [], []
        for q in qs:
            t = time.perf_counter()
            res = coll.query(query_embeddings=[q], n_results=k, where=where, include=[])
            times.append(time.perf_counter() - t)
            found.append([int(i[1:]) for i in res["ids"][0]])
        truth = [raw_search(x, cols[field], value, q, k) for q in qs]
        out[level] = {**stats(times[1:]), "recall": round(recall(found, truth, k), 4)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.6, help="spread of each cluster (its centre has unit variance per dimension)")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--indexes", default="faiss,exact")
    p.add_argument("--no-chroma", action="store_true")
    p.add_argument("--quick", action="store_true", help="N=10,000, 30 queries")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.queries = 10_000, 30
    kinds = [k for k in args.indexes.split(",") if k]
    result = header("bench_filtered", args)
    x, cols = make_data(args.n, args.dim, args.clusters, args.seed, args.noise)
    qs = queries(x, args.queries, args.seed)
    levels = {name: (field, 1) for name, (field, _) in LEVELS.items()}
    tmp = Path(tempfile.mkdtemp(prefix="bench_filtered_"))
    try:
        log(f"inserting {args.n} x {args.dim} into memcore ({', '.join(kinds)})")
        col, insert_s = build_memcore(tmp / "mem", x, cols, kinds, args.batch)
        result["memcore_insert_s"] = round(insert_s, 2)
        for level, (field, value) in levels.items():
            where = {field: meta_value(field, value)}
            truth = [raw_search(x, cols[field], value, q, args.k) for q in qs]
            raw_times = []
            for q in qs:
                t = time.perf_counter()
                raw_search(x, cols[field], value, q, args.k)
                raw_times.append(time.perf_counter() - t)
            entry: dict[str, Any] = {"where": where, "selected": int((cols[field] == value).sum()), "raw": stats(raw_times)}
            raw_p50 = entry["raw"]["p50_ms"]
            for kind in kinds:
                log(f"{level}: memcore {kind}")
                warm, found, first = time_memcore(col, kind, qs, where, args.k)
                cold, _, _ = time_memcore(col, kind, qs, where, args.k, "after_write")
                written, _, _ = time_memcore(col, kind, qs, where, args.k, "after_insert")
                entry[kind] = {
                    "warm": stats(warm),
                    "first_ms": round(first * 1000, 3),
                    "after_write": stats(cold),
                    "recall": round(recall(found, truth[1:], args.k), 4),
                    "ratio_warm_p50_over_raw": round(stats(warm)["p50_ms"] / raw_p50, 2),
                    "ratio_after_write_p50_over_raw": round(stats(cold)["p50_ms"] / raw_p50, 2),
                    "after_insert": stats(written),
                    "ratio_after_insert_p50_over_raw": round(stats(written)["p50_ms"] / raw_p50, 2),
                }
            result[level] = entry
        col.close()
        if not args.no_chroma:
            log("chroma")
            chroma = run_chroma(tmp, x, cols, qs, levels, args.k)
            result["chroma"] = chroma
            for level in levels:
                if level in chroma:
                    for kind in kinds:
                        result[level][kind]["chroma_p50_over_memcore_warm"] = round(chroma[level]["p50_ms"] / result[level][kind]["warm"]["p50_ms"], 2)
                        result[level][kind]["chroma_p50_over_memcore_after_write"] = round(
                            chroma[level]["p50_ms"] / result[level][kind]["after_write"]["p50_ms"], 2
                        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
