#!/usr/bin/env python
"""Performance at scale: reopen, first filtered query, query p50, insert, disk and RSS.

memcore's ``exact`` and ``faiss`` (HNSW32) indexes next to what a user would write by hand
(raw numpy, raw faiss on the same rows) and, when installed, Chroma and LanceDB, in the
same run. Data: ``--n`` float32 vectors of ``--dim`` (``--data random``: unit vectors;
``clustered``: a Gaussian mixture of 1,000 centres, as ANN benchmarks use when real
embeddings are not at hand), each with metadata ``{"u": 0..99, "g": 0..9, "h": 0|1}``
drawn at random, so the filters ``u == 1``, ``g == 1``, ``h == 1`` select ~1%, ~10%, ~50%.

Each system is built in a child process (insert rec/s, disk MiB) and reopened in a FRESH
child process (``reopen``: open + first query, wall and CPU seconds, timed once the
libraries are imported -- ``import_s``, reported apart, is the imports and for memcore the
plugin registry, paid once per process; then the first
filtered query of each selectivity against a warm one of the same filter, the query p50,
the child's peak RSS). A memcore tree other than this checkout can be measured in the same
run (``--trees new=.,old=/tmp/old``: a checkout whose ``core/`` holds ``memcore`` and
``plugins/faiss`` its faiss plugin, e.g. ``git archive main | tar -x -C /tmp/old``): each
memcore system is then built and reopened once per tree, trees alternating.

Prints ONE JSON object (progress on stderr)::

    python bench/bench_scale.py --quick
    python bench/bench_scale.py --n 100000 --dim 384 --data random --trees new=.,old=/tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, emit, finish_environment, header, log, pct

LEVELS = {"1%": ("u", 100), "10%": ("g", 10), "50%": ("h", 2)}
CENTRES = 1000

# -- children: each runs in a fresh interpreter, prints one JSON line ---------------------

COMMON = r"""
import json, resource, sys, time
import numpy as np
t_start = time.perf_counter(); c_start = time.process_time()
mode, system, path, data = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
k, queries = 10, int(sys.argv[5])
LEVELS = {"1%": "u", "10%": "g", "50%": "h"}


def ready():
    # imports done: reopen is timed from here (the import time is reported apart)
    global t_start, c_start, import_s
    import_s = round(time.perf_counter() - t_start, 4)
    t_start, c_start = time.perf_counter(), time.process_time()


import_s = None


def rss_mib():
    # VmHWM: this process's own peak (ru_maxrss keeps the parent's peak across fork + exec)
    try:
        with open("/proc/self/status") as fh:
            return round(int(next(line for line in fh if line.startswith("VmHWM:")).split()[1]) / 1024, 1)
    except (OSError, StopIteration):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def finish(out):
    out["peak_rss_mib"] = rss_mib()
    out["import_s"] = import_s
    print(json.dumps(out))
"""

MEMCORE = r"""
from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore
from pathlib import Path

kind = system.split(":")[1]
qs = np.load(data + "/q.npy")
registry = get_registry()  # once per process (the plugins' entry points): counted with the imports
if kind == "faiss":
    import faiss
ready()


def collection():
    p = Path(path)
    return Collection(SQLiteStore(p), {"dense": Space("dense", qs.shape[1])}, registry, p)


def search(col, q, where=None):
    return col.search_index(kind, Query(vectors={"dense": q}, k=k, where=where), k)


if mode == "build":
    x = np.load(data + "/x.npy", mmap_mode="r")
    cols = {f: np.load(data + f"/{f}.npy") for f in LEVELS.values()}
    col = collection()
    col.create_index(kind, kind, space="dense", **({"factory": "HNSW32"} if kind == "faiss" else {}))
    t = time.perf_counter()
    for s in range(0, x.shape[0], 2000):
        e = min(s + 2000, x.shape[0])
        meta = {f: c[s:e].tolist() for f, c in cols.items()}
        col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {f: meta[f][i - s] for f in meta}} for i in range(s, e)])
    insert_s = time.perf_counter() - t
    col.close()
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s)})
else:
    col = collection()
    t_open = time.perf_counter()
    hits = search(col, qs[0])
    out = {"open_s": round(t_open - t_start, 4), "reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    for level, field in LEVELS.items():
        t = time.perf_counter(); search(col, qs[1], {field: 1}); first = time.perf_counter() - t
        warm = []
        for q in qs[2:queries]:
            t = time.perf_counter(); search(col, q, {field: 1}); warm.append(time.perf_counter() - t)
        out[f"filtered_{level}"] = {"first_ms": round(first * 1000, 3), "warm_p50_ms": round(float(np.median(warm)) * 1000, 3)}
    times, found = [], []
    for q in qs[:queries]:
        t = time.perf_counter(); hits = search(col, q); times.append(time.perf_counter() - t)
        found.append([int(h.id[1:]) for h in hits])
    out["query_p50_ms"] = round(float(np.median(times[1:])) * 1000, 3)
    np.save(path + "/found.npy", np.asarray(found, dtype=np.int64))
    col.close()
    finish(out)
"""

RAW = r"""
import os
lib = system.split(":")[1]
qs = np.load(data + "/q.npy")
if lib == "faiss":
    import faiss
ready()


def top(scores):
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]


if mode == "build":
    x = np.load(data + "/x.npy")
    t = time.perf_counter()
    if lib == "numpy":
        np.save(path + "/x.npy", x)
        for f in LEVELS.values():
            np.save(path + f"/{f}.npy", np.load(data + f"/{f}.npy"))
    else:
        import faiss
        index = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        index.add(x)
        faiss.write_index(index, path + "/index.faiss")
    insert_s = time.perf_counter() - t
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s)})
else:
    if lib == "numpy":
        x = np.asarray(np.load(path + "/x.npy", mmap_mode="r"))  # a plain ndarray over the mapping
        search = lambda q: top(x @ q)
    else:
        import faiss
        index = faiss.read_index(path + "/index.faiss")
        search = lambda q: index.search(q[None, :], k)[1][0]
    search(qs[0])
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    if lib == "numpy":
        for level, field in LEVELS.items():
            col = np.load(path + f"/{field}.npy")
            times = []
            for q in qs[1:queries]:
                t = time.perf_counter(); rows = np.flatnonzero(col == 1); rows[top(x[rows] @ q)]; times.append(time.perf_counter() - t)
            out[f"filtered_{level}"] = {"first_ms": round(times[0] * 1000, 3), "warm_p50_ms": round(float(np.median(times[1:])) * 1000, 3)}
    times = []
    for q in qs[:queries]:
        t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
    out["query_p50_ms"] = round(float(np.median(times[1:])) * 1000, 3)
    finish(out)
"""

CHROMA = r"""
import chromadb
qs = np.load(data + "/q.npy")
ready()
if mode == "build":
    x = np.load(data + "/x.npy")
    cols = {f: np.load(data + f"/{f}.npy").tolist() for f in LEVELS.values()}
    client = chromadb.PersistentClient(path=path)
    coll = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    step = min(5000, client.get_max_batch_size())
    t = time.perf_counter()
    for s in range(0, x.shape[0], step):
        e = min(s + step, x.shape[0])
        coll.add(ids=[f"r{i}" for i in range(s, e)], embeddings=x[s:e], metadatas=[{f: c[i] for f, c in cols.items()} for i in range(s, e)])
    insert_s = time.perf_counter() - t
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s)})
else:
    coll = chromadb.PersistentClient(path=path).get_collection("bench")
    search = lambda q, where=None: coll.query(query_embeddings=[q], n_results=k, where=where, include=[])
    search(qs[0])
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    for level, field in LEVELS.items():
        times = []
        for q in qs[1:queries]:
            t = time.perf_counter(); search(q, {field: 1}); times.append(time.perf_counter() - t)
        out[f"filtered_{level}"] = {"first_ms": round(times[0] * 1000, 3), "warm_p50_ms": round(float(np.median(times[1:])) * 1000, 3)}
    times = []
    for q in qs[:queries]:
        t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
    out["query_p50_ms"] = round(float(np.median(times[1:])) * 1000, 3)
    finish(out)
"""

LANCEDB = r"""
import lancedb
qs = np.load(data + "/q.npy")
ready()
if mode == "build":
    import pyarrow as pa
    x = np.load(data + "/x.npy")
    cols = {f: np.load(data + f"/{f}.npy") for f in LEVELS.values()}
    db = lancedb.connect(path)
    t = time.perf_counter()
    table = None
    for s in range(0, x.shape[0], 20000):
        e = min(s + 20000, x.shape[0])
        batch = pa.table({"id": pa.array([f"r{i}" for i in range(s, e)]), "vector": pa.FixedSizeListArray.from_arrays(pa.array(x[s:e].ravel()), x.shape[1]), **{f: pa.array(c[s:e]) for f, c in cols.items()}})
        table = db.create_table("bench", batch) if table is None else table
        if s:
            table.add(batch)
    insert_s = time.perf_counter() - t
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s)})
else:
    table = lancedb.connect(path).open_table("bench")
    def search(q, where=None):
        s = table.search(q).metric("cosine").limit(k)
        return (s.where(where, prefilter=True) if where else s).to_arrow()
    search(qs[0])
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    for level, field in LEVELS.items():
        times = []
        for q in qs[1:queries]:
            t = time.perf_counter(); search(q, f"{field} = 1"); times.append(time.perf_counter() - t)
        out[f"filtered_{level}"] = {"first_ms": round(times[0] * 1000, 3), "warm_p50_ms": round(float(np.median(times[1:])) * 1000, 3)}
    times = []
    for q in qs[:queries]:
        t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
    out["query_p50_ms"] = round(float(np.median(times[1:])) * 1000, 3)
    finish(out)
"""

BODIES = {"memcore": MEMCORE, "raw": RAW, "chroma": CHROMA, "lancedb": LANCEDB}


def make_data(n: int, dim: int, data: str, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Vectors (unit rows), metadata columns and query vectors (data points plus noise)."""
    rng = np.random.default_rng(seed)
    if data == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((CENTRES, dim), dtype=np.float32)
        x = centres[rng.integers(0, CENTRES, n)] + 0.5 * rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    cols = {field: rng.integers(0, card, n) for field, card in LEVELS.values()}
    q = x[rng.integers(0, n, 200)] + 0.2 * rng.standard_normal((200, dim), dtype=np.float32) / np.sqrt(dim)
    return x, cols, (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def child(body: str, mode: str, system: str, path: Path, data: Path, queries: int, pythonpath: str | None) -> dict[str, Any]:
    """Run one child (``build`` or ``reopen``) and return its JSON (an ``error`` when it fails)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-c", COMMON + body, mode, system, str(path), str(data), str(queries)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def disk_mib(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def recall(found: np.ndarray, x: np.ndarray, qs: np.ndarray, k: int = 10) -> float:
    truth = np.argsort(-(qs[: len(found)] @ x.T), axis=1)[:, :k]
    return round(float(np.mean([len(set(f.tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)])), 4)


def available(module: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return proc.returncode == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--data", choices=["random", "clustered"], default="random")
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--reopens", type=int, default=3, help="fresh-process reopens per system (medians reported)")
    p.add_argument("--systems", default="memcore:exact,memcore:faiss,raw:numpy,raw:faiss,chroma,lancedb")
    p.add_argument("--trees", default="new=.", help="name=path of memcore checkouts, comma separated (memcore systems run once per tree)")
    p.add_argument("--quick", action="store_true", help="n=10,000, dim=64, 20 queries, 2 reopens")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.dim, args.queries, args.reopens = 10_000, 64, 20, 2
    result = header("bench_scale", args)
    trees = dict(item.split("=", 1) for item in args.trees.split(",") if item)
    x, cols, qs = make_data(args.n, args.dim, args.data, args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    systems: dict[str, Any] = {}
    try:
        data = tmp / "data"
        data.mkdir()
        np.save(data / "x.npy", x)
        np.save(data / "q.npy", qs)
        for field, column in cols.items():
            np.save(data / f"{field}.npy", column)
        runs: list[tuple[str, str, str, str | None]] = []  # (label, body, system, pythonpath)
        for system in args.systems.split(","):
            family = system.split(":")[0]
            if family == "memcore":
                for name, tree in trees.items():
                    root = Path(tree).resolve()
                    runs.append(
                        (f"{system}@{name}" if len(trees) > 1 else system, BODIES[family], system, f"{root / 'core'}{os.pathsep}{root / 'plugins' / 'faiss'}")
                    )
            elif family in ("chroma", "lancedb") and not available({"chroma": "chromadb"}.get(family, family)):
                systems[system] = {"skipped": f"{family} is not installed"}
            else:
                runs.append((system, BODIES[family], system, None))
        for label, body, system, pythonpath in runs:
            path = tmp / label.replace(":", "_").replace("@", "_")
            path.mkdir()
            log(f"building {label}")
            entry: dict[str, Any] = {"build": child(body, "build", system, path, data, args.queries, pythonpath)}
            entry["disk_mib"] = disk_mib(path)
            systems[label] = entry
        for round_ in range(args.reopens):
            order = runs if round_ % 2 == 0 else runs[::-1]
            for label, body, system, pythonpath in order:
                if "error" in systems[label]["build"]:
                    continue
                path = tmp / label.replace(":", "_").replace("@", "_")
                log(f"reopen {round_ + 1}/{args.reopens} {label}")
                systems[label].setdefault("reopens", []).append(child(body, "reopen", system, path, data, args.queries, pythonpath))
                found = path / "found.npy"
                if found.exists() and "recall@10" not in systems[label]:
                    systems[label]["recall@10"] = recall(np.load(found), x, qs)
        for entry in systems.values():
            reopens = [r for r in entry.get("reopens", []) if "error" not in r]
            if reopens:
                entry["median"] = _medians(reopens)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["systems"] = systems
    finish_environment(result["environment"])
    emit(result, args.out)


def _medians(reopens: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in reopens[0].items():
        if isinstance(value, dict):
            out[key] = _medians([r[key] for r in reopens])
        elif isinstance(value, (int, float)):
            out[key] = round(pct([r[key] for r in reopens], 50), 4)
    for key, value in out.items():
        if key.startswith("filtered_") and value.get("warm_p50_ms"):
            value["first_over_warm"] = round(value["first_ms"] / value["warm_p50_ms"], 1)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "bench"))
    main()
