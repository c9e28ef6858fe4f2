#!/usr/bin/env python
"""Performance at scale: insert, reopen, first filtered query, query p50, recall, disk and RSS.

memcore's ``exact`` index, its ``faiss`` index at the plugin's HNSW defaults (``HNSW32``)
and an IVF-PQ configuration of it, next to what a user would write by hand (raw numpy, raw
faiss on the same rows with the same parameters) and, when installed, Chroma and LanceDB
(flat and IVF_PQ at LanceDB's defaults), in the same run.

Data: ``--n`` float32 vectors of ``--dim`` (``--data random``: unit vectors; ``clustered``:
a Gaussian mixture of 1,000 centres, as ANN benchmarks use when real embeddings are not at
hand), each with metadata ``{"u": 0..99, "g": 0..9, "h": 0|1}`` drawn at random, so the
filters ``u == 1``, ``g == 1``, ``h == 1`` select ~1%, ~10%, ~50%; 200 queries (data points
plus noise) and their exact top 10, unfiltered and under each filter (for recall). With
``--cache DIR`` the data set and its truth are written once under ``DIR`` and reused by
later runs (a 1M x 384 set is 1.5 GB and takes minutes to make).

Each system is built in a child process (insert rec/s, the child's peak RSS, disk MiB)
and reopened in FRESH child processes (``reopen``: open + first query, wall and CPU
seconds, timed once the libraries are imported -- ``import_s``, reported apart, is the
imports and for memcore the plugin registry, paid once per process; then the first
filtered query of each selectivity against a warm one of the same filter, the query p50,
recall@10 unfiltered and filtered, the child's peak RSS). memcore is given each batch as
columns (``Collection.insert_columns``: ids, texts, metadata columns, one vector matrix), as
LanceDB is given an arrow table; ``--insert dicts`` (and a tree without ``insert_columns``)
gives it a dict per record (``insert``). ``goals`` sums up issue 25's
query and insert targets as ratios within the run. A memcore tree other than this checkout
can be measured in the same run (``--trees new=.,old=/tmp/old``: a checkout whose
``core/`` holds ``memcore`` and ``plugins/faiss`` its faiss plugin): each memcore system is
then built and reopened once per tree, trees alternating.

Prints ONE JSON object (progress on stderr); ``bench/plot_scale.py`` turns the JSONs of
several sizes into the scale curve::

    python bench/bench_scale.py --quick
    python bench/bench_scale.py --n 100000 --data clustered --cache /tmp/bench_scale_data --out /tmp/scale_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, emit, finish_environment, header, log, pct

LEVELS = {"1%": ("u", 100), "10%": ("g", 10), "50%": ("h", 2)}
CENTRES = 1000
QUERIES = 200
K = 10
ALL_SYSTEMS = "memcore:exact,memcore:faiss,memcore:ivfpq,raw:numpy,raw:faiss,raw:ivfpq,chroma,lancedb,lancedb:ivfpq"

# -- children: each runs in a fresh interpreter, prints one JSON line ---------------------

COMMON = r"""
import json, resource, sys, time
import numpy as np
t_start = time.perf_counter(); c_start = time.process_time()
mode, system, path, data = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
k, queries = 10, int(sys.argv[5])
opts = json.loads(sys.argv[6])
LEVELS = {"1%": "u", "10%": "g", "50%": "h"}
found = {}


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


def keep(name, ids):
    # the ids a query found (ints, -1 padded), for recall in the parent
    row = [int(i) for i in ids][:k]
    found.setdefault(name, []).append(row + [-1] * (k - len(row)))


def measure(search, out, filtered=True, first_timed=False):
    # first + warm filtered queries of each level, then the unfiltered p50; ``search(q, level)`` returns ids
    if filtered:
        for level in LEVELS:
            times = []
            for q in qs[1:queries]:
                t = time.perf_counter(); ids = search(q, level); times.append(time.perf_counter() - t)
                keep(level, ids)
            out[f"filtered_{level}"] = {"first_ms": round(times[0] * 1000, 3), "warm_p50_ms": round(float(np.median(times[1:])) * 1000, 3)}
    times = []
    for q in qs[:queries]:
        t = time.perf_counter(); ids = search(q, None); times.append(time.perf_counter() - t)
        keep("all", ids)
    out["query_p50_ms"] = round(float(np.median(times[1:])) * 1000, 3)
    np.savez(path + "/found.npz", **{name: np.asarray(rows, dtype=np.int64) for name, rows in found.items()})


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

variant = system.split(":")[1]
kind = "exact" if variant == "exact" else "faiss"
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
    config = {"exact": {}, "faiss": {"factory": "HNSW32"}, "ivfpq": {"factory": opts["ivfpq"], "nprobe": opts["nprobe"], "refine_k_factor": opts["refine"]}}[variant]
    col.create_index(kind, kind, space="dense", **config)
    batch = opts["batch"]
    # columns (ids, texts, metadata columns, one matrix), as LanceDB takes an arrow table; a
    # tree without Collection.insert_columns (or --insert dicts) gets a dict per record
    columns = opts.get("insert", "columns") == "columns" and hasattr(col, "insert_columns")
    t, cpu0 = time.perf_counter(), time.process_time()
    for s in range(0, x.shape[0], batch):
        e = min(s + batch, x.shape[0])
        if columns:
            col.insert_columns([f"doc {i}" for i in range(s, e)], ids=[f"r{i}" for i in range(s, e)], metadata={f: c[s:e] for f, c in cols.items()}, vectors={"dense": x[s:e]})
            continue
        meta = {f: c[s:e].tolist() for f, c in cols.items()}
        col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {f: meta[f][i - s] for f in meta}} for i in range(s, e)])
    insert_s, insert_cpu_s = time.perf_counter() - t, time.process_time() - cpu0
    t = time.perf_counter()
    col.close()
    out = {"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s), "insert_cpu_s": round(insert_cpu_s, 3), "close_s": round(time.perf_counter() - t, 3)}
    finish({**out, "insert_api": "columns" if columns else "dicts"})
else:
    col = collection()
    t_open = time.perf_counter()
    search(col, qs[0])
    out = {"open_s": round(t_open - t_start, 4), "reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    measure(lambda q, level: [int(h.id[1:]) for h in search(col, q, None if level is None else {LEVELS[level]: 1})], out)
    col.close()
    finish(out)
"""

RAW = r"""
lib = system.split(":")[1]
qs = np.load(data + "/q.npy")
if lib != "numpy":
    import faiss
ready()


def top(scores):
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]


if mode == "build":
    x = np.load(data + "/x.npy")
    t, cpu0 = time.perf_counter(), time.process_time()
    if lib == "numpy":
        np.save(path + "/x.npy", x)
        for f in LEVELS.values():
            np.save(path + f"/{f}.npy", np.load(data + f"/{f}.npy"))
    elif lib == "faiss":  # what memcore's HNSW defaults build: M 32, its efConstruction
        index = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = opts["ef_construction"]
        index.add(x)
        faiss.write_index(index, path + "/index.faiss")
    else:  # the same IVF-PQ factory as memcore:ivfpq, trained on as many vectors as the plugin trains on
        index = faiss.index_factory(x.shape[1], opts["ivfpq"], faiss.METRIC_INNER_PRODUCT)
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        if hasattr(ivf, "do_polysemous_training"):  # off, as the plugin trains (the factory turns it on: minutes of training)
            ivf.do_polysemous_training = False
        index.train(x[: opts["min_train"]])
        index.add(x)
        faiss.write_index(index, path + "/index.faiss")
    insert_s, insert_cpu_s = time.perf_counter() - t, time.process_time() - cpu0
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s), "insert_cpu_s": round(insert_cpu_s, 3)})
else:
    if lib == "numpy":
        x = np.asarray(np.load(path + "/x.npy", mmap_mode="r"))  # a plain ndarray over the mapping
        search = lambda q: top(x @ q)
    else:
        index = faiss.read_index(path + "/index.faiss")
        if lib == "faiss":
            index.hnsw.efSearch = opts["ef_search"]  # what memcore's automatic ef_search picks at k=10 and this size
            search = lambda q: index.search(q[None, :], k)[1][0]
        else:
            faiss.extract_index_ivf(index).nprobe = opts["nprobe"]
            factor = opts["refine"]
            if factor:  # what a user writes by hand: k * factor PQ candidates re-scored with numpy over the mapped vectors
                x = np.load(data + "/x.npy", mmap_mode="r")

                def search(q):
                    found = index.search(q[None, :], k * factor)[1][0]
                    found = found[found >= 0]
                    return found[top(x[found] @ q)] if len(found) > k else found
            else:
                search = lambda q: index.search(q[None, :], k)[1][0]
    search(qs[0])
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    if lib == "numpy":
        cols = {}

        def run(q, level):
            if level is None:
                return search(q)
            if level not in cols:  # read once: a user keeps the column in memory
                cols[level] = np.load(path + f"/{LEVELS[level]}.npy")
            rows = np.flatnonzero(cols[level] == 1)
            return rows[top(x[rows] @ q)]

        measure(run, out)
    else:
        measure(lambda q, level: search(q), out, filtered=False)
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
    t, cpu0 = time.perf_counter(), time.process_time()
    for s in range(0, x.shape[0], step):
        e = min(s + step, x.shape[0])
        coll.add(ids=[f"r{i}" for i in range(s, e)], embeddings=x[s:e], metadatas=[{f: c[i] for f, c in cols.items()} for i in range(s, e)])
    insert_s, insert_cpu_s = time.perf_counter() - t, time.process_time() - cpu0
    finish({"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s), "insert_cpu_s": round(insert_cpu_s, 3)})
else:
    coll = chromadb.PersistentClient(path=path).get_collection("bench")
    def search(q, level):
        where = None if level is None else {LEVELS[level]: 1}
        return [int(i[1:]) for i in coll.query(query_embeddings=[q], n_results=k, where=where, include=[])["ids"][0]]
    search(qs[0], None)
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    measure(search, out)
    finish(out)
"""

LANCEDB = r"""
import lancedb
variant = system.split(":")[1] if ":" in system else "flat"
qs = np.load(data + "/q.npy")
ready()
if mode == "build":
    import pyarrow as pa
    x = np.load(data + "/x.npy")
    cols = {f: np.load(data + f"/{f}.npy") for f in LEVELS.values()}
    db = lancedb.connect(path)
    t, cpu0 = time.perf_counter(), time.process_time()
    table = None
    for s in range(0, x.shape[0], 20000):
        e = min(s + 20000, x.shape[0])
        batch = pa.table({"id": pa.array(np.arange(s, e)), "vector": pa.FixedSizeListArray.from_arrays(pa.array(x[s:e].ravel()), x.shape[1]), **{f: pa.array(c[s:e]) for f, c in cols.items()}})
        if table is None:
            table = db.create_table("bench", batch)
        else:
            table.add(batch)
    insert_s, insert_cpu_s = time.perf_counter() - t, time.process_time() - cpu0
    out = {"insert_s": round(insert_s, 3), "insert_rec_s": round(x.shape[0] / insert_s), "insert_cpu_s": round(insert_cpu_s, 3)}
    if variant == "ivfpq":  # LanceDB's defaults (partitions ~ sqrt(n), sub-vectors dim / 16)
        t = time.perf_counter()
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_PQ")
        out["index_s"] = round(time.perf_counter() - t, 3)
    finish(out)
else:
    table = lancedb.connect(path).open_table("bench")
    def search(q, level):
        s = table.search(q).metric("cosine").limit(k).select(["id"])
        if variant == "ivfpq" and opts["lance_nprobes"]:
            s = s.nprobes(opts["lance_nprobes"])
        if variant == "ivfpq" and opts["lance_refine"]:
            s = s.refine_factor(opts["lance_refine"])
        if level is not None:
            s = s.where(f"{LEVELS[level]} = 1", prefilter=True)
        return s.to_arrow()["id"].to_pylist()
    search(qs[0], None)
    out = {"reopen_s": round(time.perf_counter() - t_start, 4), "reopen_cpu_s": round(time.process_time() - c_start, 4)}
    measure(search, out)
    finish(out)
"""

BODIES = {"memcore": MEMCORE, "raw": RAW, "chroma": CHROMA, "lancedb": LANCEDB}


# -- data ------------------------------------------------------------------------------------


def make_data(folder: Path, n: int, dim: int, data: str, seed: int) -> None:
    """Write ``x.npy`` (unit rows), the metadata columns, ``q.npy`` (data points plus noise)
    and the exact top 10 of every query, unfiltered (``truth.npy``) and under each filter
    (``truth_<field>.npy``), in blocks (a 1M x 384 set never exists twice in memory)."""
    rng = np.random.default_rng(seed)
    x = np.lib.format.open_memmap(folder / "x.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    centres = rng.standard_normal((CENTRES, dim), dtype=np.float32)
    for s in range(0, n, 65536):
        e = min(s + 65536, n)
        block = rng.standard_normal((e - s, dim), dtype=np.float32)
        if data == "clustered":
            block *= 0.5
            block += centres[rng.integers(0, CENTRES, e - s)]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        x[s:e] = block
    x.flush()
    cols = {field: rng.integers(0, card, n) for field, card in LEVELS.values()}
    for field, column in cols.items():
        np.save(folder / f"{field}.npy", column)
    q = x[rng.integers(0, n, QUERIES)] + 0.2 * rng.standard_normal((QUERIES, dim), dtype=np.float32) / np.sqrt(dim)
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    np.save(folder / "q.npy", q)
    masks: dict[str, np.ndarray | None] = {"all": None, **{field: cols[field] == 1 for field, _ in LEVELS.values()}}
    best = {name: (np.full((QUERIES, K), -np.inf, dtype=np.float32), np.full((QUERIES, K), -1, dtype=np.int64)) for name in masks}
    for s in range(0, n, 65536):
        e = min(s + 65536, n)
        scores = q @ np.asarray(x[s:e]).T
        for name, mask in masks.items():
            block = scores if mask is None else np.where(mask[s:e][None, :], scores, -np.inf)
            values = np.concatenate([best[name][0], block], axis=1)
            labels = np.concatenate([best[name][1], np.broadcast_to(np.arange(s, e), block.shape)], axis=1)
            pick = np.argpartition(-values, K - 1, axis=1)[:, :K]
            best[name] = (np.take_along_axis(values, pick, 1), np.take_along_axis(labels, pick, 1))
    for name, (_, labels) in best.items():
        np.save(folder / ("truth.npy" if name == "all" else f"truth_{name}.npy"), labels)


def dataset(cache: Path | None, tmp: Path, n: int, dim: int, data: str, seed: int) -> Path:
    """The data folder: made under ``tmp``, or reused from / kept in ``cache``."""
    if cache is None:
        folder = tmp / "data"
        folder.mkdir()
        make_data(folder, n, dim, data, seed)
        return folder
    folder = cache / f"{data}_{n}_{dim}_s{seed}"
    if (folder / "done").exists():
        log(f"data from {folder}")
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log(f"making data in {folder}")
    make_data(folder, n, dim, data, seed)
    (folder / "done").write_text("ok\n")
    return folder


def recall(found: np.ndarray, truth: np.ndarray, start: int) -> float:
    """Mean share of the true top 10 of queries ``start..`` among the ids found for them."""
    rows = truth[start : start + len(found)]
    return round(float(np.mean([len(set(f.tolist()) & set(t.tolist())) / K for f, t in zip(found, rows)])), 4)


# -- runs ------------------------------------------------------------------------------------


def child(
    body: str, mode: str, system: str, path: Path, data: Path, queries: int, opts: dict[str, Any], pythonpath: str | None, timeout: float | None
) -> dict[str, Any]:
    """Run one child (``build`` or ``reopen``) and return its JSON (an ``error`` when it fails)."""
    env = dict(os.environ)
    if opts.get("threads"):  # BLAS and OpenMP threads of every library in the child
        env.update({name: str(opts["threads"]) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")})
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    argv = [sys.executable, "-c", COMMON + body, mode, system, str(path), str(data), str(queries), json.dumps(opts)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over the time budget of {timeout:g} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def disk_mib(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def available(module: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return proc.returncode == 0


def hnsw_defaults(n: int) -> dict[str, int]:
    """memcore's HNSW defaults at this size (raw faiss is built and searched with them)."""
    sys.path.insert(0, str(REPO / "plugins" / "faiss"))
    from memcore_faiss.defaults import DEFAULT_EF_CONSTRUCTION, auto_ef_search

    return {"ef_construction": DEFAULT_EF_CONSTRUCTION, "ef_search": auto_ef_search(K, n)}


def refine_default() -> int:
    """The plugin's default refine_k_factor (raw:ivfpq re-scores as many candidates)."""
    sys.path.insert(0, str(REPO / "plugins" / "faiss"))
    from memcore_faiss.config import DEFAULT_REFINE

    return DEFAULT_REFINE


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--data", choices=["random", "clustered"], default="clustered")
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--reopens", type=int, default=3, help="fresh-process reopens per system (medians reported)")
    p.add_argument("--systems", default=ALL_SYSTEMS)
    p.add_argument("--trees", default="new=.", help="name=path of memcore checkouts, comma separated (memcore systems run once per tree)")
    p.add_argument("--batch", type=int, default=2000, help="records per memcore insert call")
    p.add_argument(
        "--insert",
        choices=["columns", "dicts"],
        default="columns",
        help="how memcore is given each batch: insert_columns (ids, texts, metadata columns, a matrix) or insert (a dict per record)",
    )
    p.add_argument("--ivfpq", default="IVF1024,PQ96", help="faiss factory of memcore:ivfpq and raw:ivfpq")
    p.add_argument("--nprobe", type=int, default=32, help="nprobe of memcore:ivfpq and raw:ivfpq")
    p.add_argument("--refine", type=int, default=None, help="refine_k_factor of memcore:ivfpq (default: the plugin's), the same re-scoring for raw:ivfpq")
    p.add_argument("--lance-nprobes", type=int, default=None, help="nprobes of lancedb:ivfpq's queries (default: LanceDB's)")
    p.add_argument("--lance-refine", type=int, default=None, help="refine_factor of lancedb:ivfpq's queries (default: none)")
    p.add_argument("--chroma-max", type=int, default=100_000, help="Chroma is skipped above this size (it inserts ~260 rec/s)")
    p.add_argument("--build-budget", type=float, default=3600.0, help="seconds a build may take before it is stopped")
    p.add_argument("--threads", type=int, default=1, help="BLAS / OpenMP threads per child (0: the libraries' own defaults)")
    p.add_argument("--cache", type=Path, help="keep the data set and its truth here and reuse them")
    p.add_argument("--quick", action="store_true", help="n=10,000, dim=64, 20 queries, 2 reopens, IVF64,PQ16")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.n, args.dim, args.queries, args.reopens, args.ivfpq = 10_000, 64, 20, 2, "IVF64,PQ16"
    result = header("bench_scale", args)
    trees = dict(item.split("=", 1) for item in args.trees.split(",") if item)
    nlist = int(args.ivfpq.split(",")[0][3:]) if args.ivfpq.startswith("IVF") else 1
    opts = {
        "threads": args.threads,
        "batch": args.batch,
        "insert": args.insert,
        "ivfpq": args.ivfpq,
        "nprobe": args.nprobe,
        "refine": refine_default() if args.refine is None else args.refine,
        "lance_nprobes": args.lance_nprobes,
        "lance_refine": args.lance_refine,
        "min_train": 39 * max(nlist, 256),
        **hnsw_defaults(args.n),
    }
    result["options"] = opts
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    systems: dict[str, Any] = {}
    try:
        t = time.perf_counter()
        data = dataset(args.cache, tmp, args.n, args.dim, args.data, args.seed)
        log(f"data ready in {time.perf_counter() - t:.1f} s")
        truth = {"all": np.load(data / "truth.npy"), **{level: np.load(data / f"truth_{field}.npy") for level, (field, _) in LEVELS.items()}}
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
            elif family == "chroma" and args.n > args.chroma_max:
                systems[system] = {"skipped": f"n > --chroma-max {args.chroma_max}: the curve extrapolates it"}
            else:
                runs.append((system, BODIES[family], system, None))
        for label, body, system, pythonpath in runs:
            path = tmp / label.replace(":", "_").replace("@", "_")
            path.mkdir()
            log(f"building {label}")
            entry: dict[str, Any] = {"build": child(body, "build", system, path, data, args.queries, opts, pythonpath, args.build_budget)}
            entry["disk_mib"] = disk_mib(path)
            systems[label] = entry
            log(f"built {label}: {entry['build']}")
        for round_ in range(args.reopens):
            order = runs if round_ % 2 == 0 else runs[::-1]
            for label, body, system, pythonpath in order:
                if "error" in systems[label]["build"]:
                    continue
                path = tmp / label.replace(":", "_").replace("@", "_")
                log(f"reopen {round_ + 1}/{args.reopens} {label}")
                systems[label].setdefault("reopens", []).append(child(body, "reopen", system, path, data, args.queries, opts, pythonpath, args.build_budget))
                found = path / "found.npz"
                if found.exists() and "recall@10" not in systems[label]:
                    with np.load(found) as f:
                        systems[label]["recall@10"] = recall(f["all"], truth["all"], 0)
                        systems[label]["filtered_recall@10"] = {level: recall(f[level], truth[level], 1) for level in LEVELS if level in f}
        for entry in systems.values():
            reopens = [r for r in entry.get("reopens", []) if "error" not in r]
            if reopens:
                entry["median"] = _medians(reopens)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["systems"] = systems
    result["goals"] = goals(systems)
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


def goals(systems: dict[str, Any]) -> dict[str, Any]:
    """Issue 25's query and insert targets as ratios within this run (None where a side is missing)."""

    def get(label: str, *keys: str) -> Any:
        # with several trees (``--trees new=.,old=...``), a memcore system's goals are the first tree's
        first = next((name for name in systems if name.startswith(label + "@")), label)
        value: Any = systems.get(label, systems.get(first, {}))
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def ratio(a: Any, b: Any) -> float | None:
        return round(a / b, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None

    out: dict[str, Any] = {
        "exact_p50_over_numpy (<= 1.5)": ratio(get("memcore:exact", "median", "query_p50_ms"), get("raw:numpy", "median", "query_p50_ms")),
        "hnsw_p50_over_raw_faiss (<= 1.5)": ratio(get("memcore:faiss", "median", "query_p50_ms"), get("raw:faiss", "median", "query_p50_ms")),
        "ivfpq_p50_over_raw_faiss (<= 1.5)": ratio(get("memcore:ivfpq", "median", "query_p50_ms"), get("raw:ivfpq", "median", "query_p50_ms")),
        "hnsw_recall@10 (>= 0.99 on clustered)": get("memcore:faiss", "recall@10"),
        "hnsw_insert_over_chroma (>= 3)": ratio(get("memcore:faiss", "build", "insert_rec_s"), get("chroma", "build", "insert_rec_s")),
        "hnsw_insert_cpu (chroma / memcore CPU s)": ratio(get("chroma", "build", "insert_cpu_s"), get("memcore:faiss", "build", "insert_cpu_s")),
        "exact_insert_over_lancedb (>= 0.5)": ratio(get("memcore:exact", "build", "insert_rec_s"), get("lancedb", "build", "insert_rec_s")),
        "exact_insert_cpu (lancedb / memcore CPU s)": ratio(get("lancedb", "build", "insert_cpu_s"), get("memcore:exact", "build", "insert_cpu_s")),
        "ivfpq": {
            "memcore": {"recall@10": get("memcore:ivfpq", "recall@10"), "p50_ms": get("memcore:ivfpq", "median", "query_p50_ms")},
            "lancedb": {"recall@10": get("lancedb:ivfpq", "recall@10"), "p50_ms": get("lancedb:ivfpq", "median", "query_p50_ms")},
        },
    }
    for level in LEVELS:
        for label in ("memcore:exact", "memcore:faiss"):
            short = label.split(":")[1]
            out[f"{short}_filtered_{level}_p50_over_numpy (<= 1.5)"] = ratio(
                get(label, "median", f"filtered_{level}", "warm_p50_ms"), get("raw:numpy", "median", f"filtered_{level}", "warm_p50_ms")
            )
            out[f"{short}_filtered_{level}_first_over_warm (<= 5)"] = get(label, "median", f"filtered_{level}", "first_over_warm")
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "bench"))
    main()
