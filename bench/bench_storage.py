#!/usr/bin/env python
"""The storage side of issue 25: one memory of ``--n`` x ``--dim`` random unit vectors in the
SQLite store with an ``exact`` index, built once into ``--path`` (kept and reused: a 1M
memory takes minutes to fill), then reopened in fresh processes.

Prints ONE JSON object: the build (insert rec/s in batches of ``--batch``, the bytes on disk
by file, against the raw float32 vectors), and per reopen (a fresh interpreter, timed once
memcore is imported): open, open + first query (``reopen_s``, wall and CPU), the query p50
over ``--queries`` more, the first and a warm filtered query (10%), and the child's peak
RSS (``VmHWM``) against the raw vectors' bytes. Compare with a raw numpy matrix of the same
vectors memory-mapped and searched (``raw``), in the same run::

    python bench/bench_storage.py --n 100000 --path /tmp/storage_100k
    python bench/bench_storage.py --n 1000000 --path /tmp/storage_1m --reopens 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log

CHILD = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
import numpy as np
mode, path, n_queries = sys.argv[1], sys.argv[2], int(sys.argv[3])
qs = np.load(path + "/queries.npy")
def peak():
    with open("/proc/self/status") as fh:
        return round(int(next(l for l in fh if l.startswith("VmHWM:")).split()[1]) / 1024, 1)
if mode == "raw":
    t0, c0 = time.perf_counter(), time.process_time()
    x = np.asarray(np.load(path + "/raw.npy", mmap_mode="r"))
    def search(q):
        s = x @ q
        part = np.argpartition(-s, 9)[:10]
        return part[np.argsort(-s[part])]
    search(qs[0])
    out = {"reopen_s": time.perf_counter() - t0, "reopen_cpu_s": time.process_time() - c0}
else:
    from memcore import Collection, Query
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore
    registry = get_registry()
    import_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    col = Collection(SQLiteStore(path + "/memory"), {"dense": Space("dense", qs.shape[1])}, registry, path + "/memory")
    open_s = time.perf_counter() - t0
    search = lambda q, where=None: col.search_index("exact", Query(vectors={"dense": q}, k=10, where=where), 10)
    search(qs[0])
    out = {"import_s": import_s, "open_s": open_s, "reopen_s": time.perf_counter() - t0, "reopen_cpu_s": time.process_time() - c0,
           "loaded_from_disk": col._handle("exact").loaded_from_disk}
    t = time.perf_counter(); search(qs[1], {"g": 1}); out["filtered_10%_first_ms"] = (time.perf_counter() - t) * 1000
    warm = []
    for q in qs[2:12]:
        t = time.perf_counter(); search(q, {"g": 1}); warm.append(time.perf_counter() - t)
    out["filtered_10%_warm_p50_ms"] = float(np.median(warm)) * 1000
times = []
for q in qs[1 : 1 + n_queries]:
    t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
out["query_p50_ms"] = float(np.median(times)) * 1000
out["peak_rss_mib"] = peak()
print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))
"""

BUILD = r"""
import json, sys, time
import numpy as np
from memcore import Collection
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore
path, batch = sys.argv[1], int(sys.argv[2])
x = np.load(path + "/raw.npy", mmap_mode="r")
g = np.load(path + "/g.npy")
col = Collection(SQLiteStore(path + "/memory"), {"dense": Space("dense", x.shape[1])}, get_registry(), path + "/memory")
col.create_index("exact", "exact", space="dense")
t = time.perf_counter()
for s in range(0, x.shape[0], batch):
    e = min(s + batch, x.shape[0])
    gs = g[s:e].tolist()
    col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {"g": gs[i - s]}} for i in range(s, e)])
insert_s = time.perf_counter() - t
t = time.perf_counter()
col.close()
print(json.dumps({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s), "close_s": round(time.perf_counter() - t, 3)}))
"""


def run(code: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def sizes(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            out[p.relative_to(path).as_posix()] = round(p.stat().st_size / 2**20, 2)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--path", type=Path, required=True, help="where the memory is built (kept; reused when it exists)")
    p.add_argument("--reopens", type=int, default=3)
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = header("bench_storage", args)
    path: Path = args.path
    raw_bytes = args.n * args.dim * 4
    if not (path / "memory").exists():
        path.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(args.seed)
        x = np.lib.format.open_memmap(path / "raw.npy", mode="w+", dtype=np.float32, shape=(args.n, args.dim))
        for s in range(0, args.n, 100_000):
            block = rng.standard_normal((min(100_000, args.n - s), args.dim), dtype=np.float32)
            x[s : s + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
        x.flush()
        np.save(path / "g.npy", rng.integers(0, 10, args.n))
        picks = rng.integers(0, args.n, 64)
        np.save(path / "queries.npy", np.asarray(x[picks]) + 0.01)
        del x
        log(f"building {args.n} x {args.dim} into {path}")
        result["build"] = run(BUILD, str(path), str(args.batch))
    else:
        result["build"] = {"reused": str(path)}
    files = sizes(path / "memory")
    result["disk"] = {
        "files_mib": files,
        "total_mib": round(sum(files.values()), 1),
        "raw_vectors_mib": round(raw_bytes / 2**20, 1),
        "over_raw": round(sum(files.values()) * 2**20 / raw_bytes, 3),
    }
    reopens: dict[str, list[dict[str, Any]]] = {"memcore": [], "raw": []}
    for i in range(args.reopens):
        for system in ("memcore", "raw") if i % 2 == 0 else ("raw", "memcore"):
            log(f"reopen {i + 1}/{args.reopens} {system}")
            reopens[system].append(run(CHILD, "memcore" if system == "memcore" else "raw", str(path), str(args.queries)))
    result["reopens"] = reopens
    result["median"] = {
        system: {
            key: round(float(np.median([r[key] for r in runs if key in r])), 4)
            for key in runs[0]
            if isinstance(runs[0][key], (int, float)) and not isinstance(runs[0][key], bool)
        }
        for system, runs in reopens.items()
        if runs and "error" not in runs[0]
    }
    for med in result["median"].values():
        if "peak_rss_mib" in med:
            med["rss_over_raw"] = round(med["peak_rss_mib"] * 2**20 / raw_bytes, 3)
    result["load"] = os.getloadavg()
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
