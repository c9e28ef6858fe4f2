#!/usr/bin/env python
"""Bytes on disk and reopen time of one vector collection: memcore (faiss HNSW32, faiss Flat,
``exact``) vs the raw float32 vectors vs Chroma, on the same vectors in the same run.

Data: ``--n`` clustered unit float32 vectors of ``--dim`` (the data of
``bench_filtered.py``), each record with the text ``"doc <i>"`` and metadata
``{"u", "g", "h"}``. For each memcore index kind (``--indexes``) a collection directory
(SQLite store + the index folder) is filled in batches of ``--batch``, closed (which saves
the index and prunes the log) and measured:

- ``store_bytes`` (the SQLite file with its WAL), ``index_bytes`` (the index folder),
  ``total_bytes``, ``over_raw`` (total / the raw ``n * dim * 4`` bytes) and, when Chroma
  ran, ``over_chroma`` (total / Chroma's directory);
- ``reopen_s``: opening the closed collection again (store + index load + catch-up) and
  answering one query, median of ``--reopen`` runs (``reopen_cpu_s``: the process CPU
  time of it, steadier than the wall time on a loaded machine), and whether the index was loaded
  from its files (``loaded_from_disk``, False would mean a rebuild);
- ``recall_at_10`` of 50 queries after the reopen against exact numpy search.

Chroma (``pip install chromadb``, imported lazily, skipped when absent or with
``--no-chroma``): a ``PersistentClient`` collection (cosine, its HNSW defaults) with the
same ids, documents, metadata and embeddings; its directory is measured after the client
is released, and its reopen is a new client + one query.

    PYTHONPATH=core python bench/bench_footprint.py --quick
    PYTHONPATH=core python bench/bench_footprint.py --n 100000 --out footprint.json
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, package_version, use_checkout

use_checkout("faiss")

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore import Query
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore

MiB = 1024 * 1024
KINDS = {
    "hnsw": ("faiss", {"factory": "HNSW32"}),
    "flat": ("faiss", {"factory": "Flat"}),
    "exact": ("exact", {}),
}


def make_data(n: int, dim: int, clusters: int, seed: int, noise: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centers[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.integers(0, n, 50)] + 0.05 * rng.standard_normal((50, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x.astype(np.float32), q.astype(np.float32)


def metadata(i: int) -> dict[str, Any]:
    return {"u": f"u{i % 100}", "g": f"g{i % 10}", "h": i % 2}


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def truth(x: np.ndarray, qs: np.ndarray, k: int) -> list[set[int]]:
    scores = qs @ x.T
    return [set(np.argpartition(-row, k - 1)[:k].tolist()) for row in scores]


def open_collection(path: Path, dim: int) -> Collection:
    return Collection(SQLiteStore(path), {"dense": Space("dense", dim)}, get_registry(), path)


def run_memcore(tmp: Path, name: str, x: np.ndarray, qs: np.ndarray, best: list[set[int]], args: argparse.Namespace) -> dict[str, Any]:
    kind, options = KINDS[name]
    path = tmp / f"memcore-{name}"
    col = open_collection(path, x.shape[1])
    col.create_index("vec", kind, space="dense", **options)
    started = time.perf_counter()
    for s in range(0, x.shape[0], args.batch):
        col.insert(
            [{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": metadata(i)} for i in range(s, min(s + args.batch, x.shape[0]))]
        )
    insert_s = time.perf_counter() - started
    started = time.perf_counter()
    col.close()
    close_s = time.perf_counter() - started
    store = sum(p.stat().st_size for p in path.glob("store.sqlite3*") if p.is_file())
    index = dir_bytes(path / "indexes")
    reopen, cpu, loaded, found = [], [], [], []
    for _ in range(args.reopen):
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        col = open_collection(path, x.shape[1])
        hits = col.search_index("vec", Query(vectors={"dense": qs[0]}, k=10), 10)
        reopen.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        loaded.append(bool(col._indexes["vec"].loaded_from_disk))
        found = [[int(h.id[1:]) for h in col.search_index("vec", Query(vectors={"dense": q}, k=10), 10)] for q in qs]
        col.close()
        del hits
    total = store + index
    return {
        "insert_s": round(insert_s, 2),
        "close_s": round(close_s, 2),
        "store_bytes": store,
        "index_bytes": index,
        "total_bytes": total,
        "total_mib": round(total / MiB, 1),
        "over_raw": round(total / (x.nbytes), 3),
        "index_files": sorted(p.name for p in (path / "indexes" / "vec").iterdir()),
        "reopen_s": round(statistics.median(reopen), 3),
        "reopen_runs_s": [round(t, 3) for t in reopen],
        "reopen_cpu_s": round(statistics.median(cpu), 3),
        "loaded_from_disk": all(loaded),
        "recall_at_10": round(float(np.mean([len(set(f) & b) / 10 for f, b in zip(found, best)])), 4),
    }


def run_chroma(tmp: Path, x: np.ndarray, qs: np.ndarray, best: list[set[int]], args: argparse.Namespace) -> dict[str, Any]:
    try:
        import chromadb
        from chromadb.api.client import SharedSystemClient
    except ImportError:
        return {"skipped": "chromadb is not installed (pip install -c constraints.txt chromadb)"}
    path = tmp / "chroma"
    client = chromadb.PersistentClient(path=str(path))
    coll = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    step = min(args.batch, client.get_max_batch_size())
    started = time.perf_counter()
    for s in range(0, x.shape[0], step):
        e = min(s + step, x.shape[0])
        coll.add(
            ids=[f"r{i}" for i in range(s, e)], embeddings=x[s:e], metadatas=[metadata(i) for i in range(s, e)], documents=[f"doc {i}" for i in range(s, e)]
        )
    insert_s = time.perf_counter() - started
    coll.query(query_embeddings=[qs[0]], n_results=10, include=[])  # the index is complete and written
    del coll, client
    SharedSystemClient.clear_system_cache()
    gc.collect()
    total = dir_bytes(path)
    reopen, cpu, found = [], [], []
    for _ in range(args.reopen):
        started, started_cpu = time.perf_counter(), time.process_time()
        client = chromadb.PersistentClient(path=str(path))
        coll = client.get_collection("bench")
        coll.query(query_embeddings=[qs[0]], n_results=10, include=[])
        reopen.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        found = [[int(i[1:]) for i in coll.query(query_embeddings=[q], n_results=10, include=[])["ids"][0]] for q in qs]
        del coll, client
        SharedSystemClient.clear_system_cache()
        gc.collect()
    return {
        "version": chromadb.__version__,
        "insert_s": round(insert_s, 2),
        "total_bytes": total,
        "total_mib": round(total / MiB, 1),
        "over_raw": round(total / x.nbytes, 3),
        "files": sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()),
        "reopen_s": round(statistics.median(reopen), 3),
        "reopen_runs_s": [round(t, 3) for t in reopen],
        "reopen_cpu_s": round(statistics.median(cpu), 3),
        "recall_at_10": round(float(np.mean([len(set(f) & b) / 10 for f, b in zip(found, best)])), 4),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--batch", type=int, default=5000)
    p.add_argument("--indexes", default="hnsw,exact", help=f"comma-separated, of {sorted(KINDS)}")
    p.add_argument("--reopen", type=int, default=3, help="reopen runs (median reported)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-chroma", action="store_true")
    p.add_argument("--quick", action="store_true", help="n=10,000, one reopen")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.reopen = 10_000, 1
    result = header("bench_footprint", args, faiss=package_version("faiss-cpu"), chromadb=package_version("chromadb"))
    x, qs = make_data(args.n, args.dim, args.clusters, args.seed)
    best = truth(x, qs, 10)
    result["raw_vector_bytes"] = x.nbytes
    result["raw_vector_mib"] = round(x.nbytes / MiB, 1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-footprint-"))
    try:
        if not args.no_chroma:
            log("chroma")
            result["chroma"] = run_chroma(tmp, x, qs, best, args)
        chroma_total = result.get("chroma", {}).get("total_bytes")
        for name in [s.strip() for s in args.indexes.split(",") if s.strip()]:
            log("memcore", name)
            out = run_memcore(tmp, name, x, qs, best, args)
            if chroma_total:
                out["over_chroma"] = round(out["total_bytes"] / chroma_total, 3)
            result[f"memcore_{name}"] = out
            log(name, out["total_mib"], "MiB", "reopen", out["reopen_s"], "s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
