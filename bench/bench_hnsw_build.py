#!/usr/bin/env python
"""Where an HNSW insert's time goes: faiss' add by efConstruction, OpenMP threads and batch
size, memcore's part around it, and Chroma's insert, on the data of ``bench_scale.py``.

Reads a data folder ``bench/bench_scale.py --cache`` made (``x.npy``, ``q.npy``,
``truth.npy``: clustered unit vectors and their exact top 10). Every configuration runs in
a FRESH child process (one OpenMP runtime per setting, nothing cached), one after another,
``--rounds`` times in alternating order, and reports wall seconds, the process' CPU seconds
(all its threads), records/s and, for the HNSW builds, recall@10 of 200 queries at the
``ef_search`` memcore picks at k = 10 for that size (``auto_ef_search``):

- ``faiss efC<e> t<t> b<b>``: raw ``IndexHNSWFlat(d, 32, METRIC_INNER_PRODUCT)`` with
  efConstruction ``e``, ``t`` OpenMP threads, ``add`` in batches of ``b``;
- ``memcore efC<e> t<t>``: a Collection (SQLite store) with a ``faiss`` index
  ``factory = "HNSW32"`` (``ef_construction = e``, ``omp_threads = t``) filled by
  ``Collection.insert`` in batches of ``--batch`` records, with the time spent inside
  faiss' ``add`` and inside the faiss index's ``add`` (memcore's part around faiss: id map,
  normalising) counted apart, and the ``close`` (the saves) timed;
- ``chroma``: ``PersistentClient`` collection at its defaults (M 16, efConstruction 100,
  ``hnsw:space = cosine``), ``add`` in batches of 5,000 (when ``chromadb`` is installed).

    python bench/bench_hnsw_build.py --data /tmp/bench_scale_data/clustered_10000_384_s7
    python bench/bench_hnsw_build.py --data /tmp/bench_scale_data/clustered_100000_384_s7 \\
        --ef-construction 40,64,80 --threads 1 --batches 2000 --systems faiss --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, emit, finish_environment, header, log, pct

CHILD = r"""
import json, sys, time
import numpy as np
system, data, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
x = np.load(data + "/x.npy", mmap_mode="r")
n = x.shape[0] if not opts["n"] else min(opts["n"], x.shape[0])
out = {}
if system == "faiss":
    import faiss
    faiss.omp_set_num_threads(opts["threads"])
    index = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = opts["efc"]
    rows = np.ascontiguousarray(x[:n])
    t, c = time.perf_counter(), time.process_time()
    for s in range(0, n, opts["batch"]):
        index.add(rows[s : s + opts["batch"]])
    out["wall_s"], out["cpu_s"] = time.perf_counter() - t, time.process_time() - c
    index.hnsw.efSearch = opts["ef_search"]
    out["found"] = index.search(np.load(data + "/q.npy"), 10)[1].tolist()
elif system == "memcore":
    import faiss
    from pathlib import Path
    from memcore import Collection, Query
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore
    import memcore_faiss.index as fx
    import memcore_faiss.container as fc
    spent = {"faiss_add_s": 0.0, "index_add_s": 0.0}
    def timed(fn, key):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t0
        return wrapper
    fc.Container.add = timed(fc.Container.add, "faiss_add_s")
    fx.FaissIndex.add = timed(fx.FaissIndex.add, "index_add_s")
    path = Path(opts["tmp"])
    qs = np.load(data + "/q.npy")
    col = Collection(SQLiteStore(path), {"dense": Space("dense", x.shape[1])}, get_registry(), path)
    col.create_index("faiss", "faiss", space="dense", factory="HNSW32", ef_construction=opts["efc"], omp_threads=opts["threads"])
    t, c = time.perf_counter(), time.process_time()
    for s in range(0, n, opts["batch"]):
        e = min(s + opts["batch"], n)
        col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {"g": i % 10}} for i in range(s, e)])
    out["wall_s"], out["cpu_s"] = time.perf_counter() - t, time.process_time() - c
    out.update({k: round(v, 3) for k, v in spent.items()})
    t = time.perf_counter()
    col.close()
    out["close_s"] = round(time.perf_counter() - t, 3)
    col = Collection(SQLiteStore(path), {"dense": Space("dense", x.shape[1])}, get_registry(), path)
    out["found"] = [[int(h.id[1:]) for h in col.search_index("faiss", Query(vectors={"dense": q}, k=10), 10)] for q in qs]
    col.close()
else:
    import chromadb
    client = chromadb.PersistentClient(path=opts["tmp"])
    coll = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    t, c = time.perf_counter(), time.process_time()
    for s in range(0, n, 5000):
        e = min(s + 5000, n)
        coll.add(ids=[f"r{i}" for i in range(s, e)], embeddings=np.ascontiguousarray(x[s:e]), metadatas=[{"g": i % 10} for i in range(s, e)])
    out["wall_s"], out["cpu_s"] = time.perf_counter() - t, time.process_time() - c
    qs = np.load(data + "/q.npy")
    out["found"] = [[int(i[1:]) for i in coll.query(query_embeddings=[q], n_results=10, include=[])["ids"][0]] for q in qs]
out["wall_s"], out["cpu_s"] = round(out["wall_s"], 3), round(out["cpu_s"], 3)
out["n"] = n
print(json.dumps(out))
"""


def run_child(system: str, data: Path, opts: dict[str, Any]) -> dict[str, Any]:
    """One build in a fresh interpreter; its JSON (``error`` when it failed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "core"), str(REPO / "plugins" / "faiss")])
    env["OMP_NUM_THREADS"] = str(opts["threads"])  # faiss' and the BLAS' runtime
    with tempfile.TemporaryDirectory(prefix="bench_hnsw_build_") as tmp:
        proc = subprocess.run([sys.executable, "-c", CHILD, system, str(data), json.dumps({**opts, "tmp": tmp})], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="a data folder of bench_scale.py --cache (x.npy, q.npy, truth.npy)")
    p.add_argument("--n", type=int, default=0, help="use the first n vectors only (0: all)")
    p.add_argument("--systems", default="faiss,memcore,chroma")
    p.add_argument("--ef-construction", default="40,64,80")
    p.add_argument("--threads", default="1,2", help="OpenMP threads of the faiss and memcore builds")
    p.add_argument("--batches", default="2000", help="raw faiss add batch sizes (0: one add of everything)")
    p.add_argument("--batch", type=int, default=2000, help="records per memcore insert call")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    sys.path.insert(0, str(REPO / "plugins" / "faiss"))
    from memcore_faiss.defaults import auto_ef_search

    result = header("bench_hnsw_build", args)
    truth = np.load(args.data / "truth.npy")
    n = int(np.load(args.data / "x.npy", mmap_mode="r").shape[0])
    n = min(args.n, n) if args.n else n
    ef_search = auto_ef_search(10, n)
    configs: list[tuple[str, str, dict[str, Any]]] = []
    systems = args.systems.split(",")
    for efc in [int(v) for v in args.ef_construction.split(",")]:
        for threads in [int(v) for v in args.threads.split(",")]:
            base = {"n": args.n, "efc": efc, "threads": threads, "ef_search": ef_search}
            if "faiss" in systems:
                for batch in [int(v) for v in args.batches.split(",")]:
                    configs.append((f"faiss efC{efc} t{threads} b{batch or 'all'}", "faiss", {**base, "batch": batch or n}))
            if "memcore" in systems:
                configs.append((f"memcore efC{efc} t{threads}", "memcore", {**base, "batch": args.batch}))
    if "chroma" in systems:
        configs.append(("chroma", "chroma", {"n": args.n, "threads": 0, "efc": 100, "ef_search": 100}))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in configs}
    for round_ in range(args.rounds):
        for label, system, opts in configs if round_ % 2 == 0 else configs[::-1]:
            log(f"round {round_ + 1}: {label}")
            out = run_child(system, args.data, opts)
            if "found" in out:
                found = np.asarray(out.pop("found"))
                out["recall@10"] = round(float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found.tolist(), truth.tolist())])), 4)
            if "wall_s" in out:
                out["rec_s"] = round(out["n"] / out["wall_s"])
                out["rec_per_cpu_s"] = round(out["n"] / out["cpu_s"])
            out["loadavg"] = [round(v, 1) for v in os.getloadavg()]
            log(f"  {out}")
            runs[label].append(out)
    summary = {}
    for label, outs in runs.items():
        ok = [o for o in outs if "error" not in o]
        if ok:
            summary[label] = {
                key: round(pct([o[key] for o in ok], 50), 4) for key in ("rec_s", "rec_per_cpu_s", "wall_s", "cpu_s", "recall@10") if key in ok[0]
            }
    result.update({"n": n, "ef_search": ef_search, "runs": runs, "median": summary})
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
