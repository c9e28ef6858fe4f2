#!/usr/bin/env python
"""The first filtered query against a warm one, in fresh processes, per memcore tree.

One memory of the cached ``bench_scale.py`` data set (``--data DIR``: ``x.npy``, ``q.npy``
and the ``u``, ``g``, ``h`` fields of 1%, 10%, 50% selectivity) with an ``exact`` index
(``--kind faiss``: a ``faiss`` index of ``--factory``, the plugin's HNSW default) is
built once into ``--path`` (kept and reused; the three field indexes made by one filtered
query each). Then per round and per tree (``--trees new=.,old=/tmp/old``: checkouts whose
``core/`` holds ``memcore``; alternating) a fresh process opens it, runs one unfiltered
query (the reopen, wall and CPU seconds), then for each field the first and ``--warm``
warm filtered queries (wall and CPU ms of the first and the median warm, and their ratio,
and the recall@10 of those queries against the data set's ``truth_<field>.npy``), then the
unfiltered p50. The build's filtered queries leave the store's saved row sets (the rows of
each filter at the store's last state, ``row_sets.bin``) for the probes; ``--cold-filters``
removes them before each probe (a filter the store never resolved at this state). CPU
figures are what to read on a loaded machine::

    python bench/bench_scale.py --n 100000 --data clustered --cache /tmp/bench_scale_data --systems raw:numpy
    python bench/bench_first_filtered.py --data /tmp/bench_scale_data/clustered_100000_384_s7 --path /tmp/filtered_100k \\
        --trees new=.,old=/tmp/old --rounds 3
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
from _common import REPO, emit, finish_environment, header, log

BUILD = r"""
import sys, numpy as np
from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore
data, path, batch, kind, factory = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
x = np.load(data + "/x.npy", mmap_mode="r")
cols = {f: np.load(data + f"/{f}.npy") for f in "ugh"}
col = Collection(SQLiteStore(path), {"dense": Space("dense", x.shape[1])}, get_registry(), path)
col.create_index(kind, kind, space="dense", **({"factory": factory} if kind == "faiss" else {}))
for s in range(0, x.shape[0], batch):
    e = min(s + batch, x.shape[0])
    meta = {f: c[s:e].tolist() for f, c in cols.items()}
    col.insert([{"id": f"r{i}", "text": f"doc {i}", "vectors": {"dense": x[i]}, "metadata": {f: meta[f][i - s] for f in meta}} for i in range(s, e)])
for f in "ugh":  # the field indexes, made by a writer's first filter on each field
    col.search_index(kind, Query(vectors={"dense": np.asarray(x[0])}, k=10, where={f: 1}), 10)
col.close()
"""

PROBE = r"""
import json, sys, time
import numpy as np
from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore
data, path, warm, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
qs = np.load(data + "/q.npy")
registry = get_registry()
t0, c0 = time.perf_counter(), time.process_time()
col = Collection(SQLiteStore(path), {"dense": Space("dense", qs.shape[1])}, registry, path)
search = lambda q, where=None: col.search_index(kind, Query(vectors={"dense": q}, k=10, where=where), 10)
search(qs[0])
out = {"reopen_s": time.perf_counter() - t0, "reopen_cpu_s": time.process_time() - c0}
for field, level in (("u", "1%"), ("g", "10%"), ("h", "50%")):
    walls, cpus, found = [], [], []
    for q in qs[1 : 2 + warm]:
        t, c = time.perf_counter(), time.process_time()
        hits = search(q, {field: 1})
        walls.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
        found.append({int(h.id[1:]) for h in hits})
    truth = np.load(data + f"/truth_{field}.npy")[1 : 2 + warm]
    wall, cpu = float(np.median(walls[1:])), float(np.median(cpus[1:]))
    out[level] = {"first_ms": walls[0] * 1000, "warm_ms": wall * 1000, "first_cpu_ms": cpus[0] * 1000, "warm_cpu_ms": cpu * 1000,
                  "first_over_warm": walls[0] / wall, "first_over_warm_cpu": cpus[0] / max(cpu, 1e-9),
                  "recall": float(np.mean([len(f & set(t.tolist())) / len(t) for f, t in zip(found, truth)]))}
times = []
for q in qs[1:41]:
    t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
out["query_p50_ms"] = float(np.median(times)) * 1000
col.close()
print(json.dumps(out))
"""


def run(code: str, tree: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "core"), str(tree / "plugins" / "faiss")])}
    proc = subprocess.run(["nice", "-n", "5", sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="a data set folder of bench_scale.py --cache")
    p.add_argument("--path", type=Path, required=True, help="where the memory is built (kept; reused when it exists)")
    p.add_argument("--trees", default="new=.", help="name=path of memcore checkouts, comma separated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warm", type=int, default=19, help="warm queries per filter")
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--kind", choices=("exact", "faiss"), default="exact", help="the vector index built (named after its kind)")
    p.add_argument("--factory", default="HNSW32", help="faiss factory of --kind faiss")
    p.add_argument(
        "--cold-filters",
        action="store_true",
        help="remove the store's saved row sets (row_sets.bin) before each probe: every filter's first query resolves it in SQL",
    )
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = header("bench_first_filtered", args)
    trees = {name: (REPO / path).resolve() for name, path in (item.split("=", 1) for item in args.trees.split(","))}
    first = next(iter(trees.values()))
    if not (args.path / "store.sqlite3").exists():
        log(f"building {args.data} into {args.path}")
        t = time.perf_counter()
        result["build"] = run(BUILD, first, str(args.data), str(args.path), str(args.batch), args.kind, args.factory) or {
            "seconds": round(time.perf_counter() - t, 1)
        }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for i in range(args.rounds):
        for name, tree in trees.items() if i % 2 == 0 else reversed(list(trees.items())):
            log(f"round {i + 1}/{args.rounds} {name}")
            if args.cold_filters:
                (args.path / "row_sets.bin").unlink(missing_ok=True)
            runs[name].append(run(PROBE, tree, str(args.data), str(args.path), str(args.warm), args.kind))
    result["runs"] = runs
    result["median"] = {
        name: {
            key: (
                {k: round(float(np.median([r[key][k] for r in rs])), 3) for k in rs[0][key]}
                if isinstance(rs[0][key], dict)
                else round(float(np.median([r[key] for r in rs])), 4)
            )
            for key in rs[0]
        }
        for name, rs in runs.items()
        if rs and "error" not in rs[0]
    }
    result["load"] = os.getloadavg()
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
