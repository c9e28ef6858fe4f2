#!/usr/bin/env python
"""IVF-PQ configurations side by side: recall@10 and query p50 per (factory, nprobe, refine).

memcore's ``faiss`` index is built once per ``--factories`` entry (a SQLite collection in a
temporary folder, as ``bench_scale.py`` builds ``memcore:ivfpq``), then queried at every
``--nprobes`` x ``--refines`` pair through ``Query.extras["faiss"]`` (no rebuild: both are
search-time options); LanceDB ``IVF_PQ`` (at its default partitions and sub-vectors) is
built once and queried at every ``--lance-nprobes`` x ``--lance-refines`` pair (refine 0:
none). Every grid point is run twice, in opposite orders, in the same process; its p50 is
over both passes. The data set is a ``bench_scale.py --cache`` folder (``x.npy``,
``q.npy``, ``truth.npy``)::

    python bench/ivfpq_sweep.py --data /tmp/bench_scale_data/clustered_100000_384_s7 \\
        --factories IVF256,PQ48 --nprobes 8,16 --refines 0,4,8 --lance-nprobes 20 --lance-refines 0,4

Prints ONE JSON object (progress on stderr).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

K = 10


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    """Mean share of each query's true top 10 among the ids found for it."""
    return round(float(np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth)])), 4)


def grid(points: list[Any], search: Callable[[Any, np.ndarray], list[int]], qs: np.ndarray, truth: np.ndarray) -> list[dict[str, Any]]:
    """Each point's recall@10 and p50 (ms) over two passes in opposite orders."""
    times: dict[int, list[float]] = {i: [] for i in range(len(points))}
    found: dict[int, list[list[int]]] = {}
    for order in (range(len(points)), reversed(range(len(points)))):
        for i in order:
            search(points[i], qs[0])  # warm
            rows = []
            for q in qs:
                t = time.perf_counter()
                ids = search(points[i], q)
                times[i].append(time.perf_counter() - t)
                rows.append(ids)
            found.setdefault(i, rows)
    return [{"point": points[i], "recall@10": recall(found[i], truth), "p50_ms": round(float(np.median(times[i])) * 1000, 3)} for i in range(len(points))]


def memcore_runs(factory: str, x: np.ndarray, qs: np.ndarray, truth: np.ndarray, nprobes: list[int], refines: list[int], tmp: Path) -> dict[str, Any]:
    from memcore import Collection, Query
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore

    path = tmp / factory.replace(",", "_")
    path.mkdir()
    col = Collection(SQLiteStore(path), {"dense": Space("dense", x.shape[1])}, get_registry(), path)
    col.create_index("ivfpq", "faiss", space="dense", factory=factory, nprobe=nprobes[0])
    t = time.perf_counter()
    for s in range(0, len(x), 2000):
        e = min(s + 2000, len(x))
        col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}} for i in range(s, e)])
    build_s = round(time.perf_counter() - t, 1)
    log(f"built memcore {factory} in {build_s} s")

    def search(point: tuple[int, int], q: np.ndarray) -> list[int]:
        nprobe, refine = point
        query = Query(vectors={"dense": q}, k=K, extras={"faiss": {"nprobe": nprobe, "refine_k_factor": refine}})
        return [int(h.id[1:]) for h in col.search_index("ivfpq", query, K)]

    points = [(n, r) for n in nprobes for r in refines]
    results = grid(points, search, qs, truth)
    log(f"memcore {factory}: {results}")
    col.close()
    return {
        "build_s": build_s,
        "grid": [{"nprobe": p["point"][0], "refine_k_factor": p["point"][1], **{k: v for k, v in p.items() if k != "point"}} for p in results],
    }


def lancedb_runs(x: np.ndarray, qs: np.ndarray, truth: np.ndarray, nprobes: list[int], refines: list[int], tmp: Path) -> dict[str, Any]:
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp / "lance"))
    table = None
    for s in range(0, len(x), 20000):
        e = min(s + 20000, len(x))
        batch = pa.table({"id": pa.array(np.arange(s, e)), "vector": pa.FixedSizeListArray.from_arrays(pa.array(x[s:e].ravel()), x.shape[1])})
        table = db.create_table("bench", batch) if table is None else table
        if s:
            table.add(batch)
    assert table is not None
    t = time.perf_counter()
    table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_PQ")
    build_s = round(time.perf_counter() - t, 1)
    log(f"built LanceDB IVF_PQ in {build_s} s")

    def search(point: tuple[int, int], q: np.ndarray) -> list[int]:
        nprobe, refine = point
        s = table.search(q).metric("cosine").limit(K).select(["id"]).nprobes(nprobe)
        if refine:
            s = s.refine_factor(refine)
        ids: list[int] = s.to_arrow()["id"].to_pylist()
        return ids

    points = [(n, r) for n in nprobes for r in refines]
    results = grid(points, search, qs, truth)
    log(f"LanceDB IVF_PQ: {results}")
    return {
        "index_s": build_s,
        "grid": [{"nprobes": p["point"][0], "refine_factor": p["point"][1], **{k: v for k, v in p.items() if k != "point"}} for p in results],
    }


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="a bench_scale.py --cache data folder")
    p.add_argument("--factories", nargs="*", default=["IVF256,PQ48"])
    p.add_argument("--nprobes", type=ints, default=[8, 16])
    p.add_argument("--refines", type=ints, default=[0, 4, 8])
    p.add_argument("--lance-nprobes", type=ints, default=[20])
    p.add_argument("--lance-refines", type=ints, default=[0, 4])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    use_checkout("faiss")
    result = header("ivfpq_sweep", args)
    x = np.load(args.data / "x.npy", mmap_mode="r")
    qs = np.load(args.data / "q.npy")[: args.queries]
    truth = np.load(args.data / "truth.npy")[: args.queries]
    tmp = Path(tempfile.mkdtemp(prefix="ivfpq_sweep_"))
    try:
        result["memcore"] = {f: memcore_runs(f, x, qs, truth, args.nprobes, args.refines, tmp) for f in args.factories}
        if args.lance_nprobes:
            result["lancedb"] = lancedb_runs(np.asarray(x), qs, truth, args.lance_nprobes, args.lance_refines, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
