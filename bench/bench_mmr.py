#!/usr/bin/env python
"""MMR benchmark: the ``mmr`` stage of memcore-mmr against the same greedy MMR written
directly in numpy, in the same process and run.

For each query, the candidates are the ``--candidates`` nearest records of an exact index
over ``--n`` random ``--dim``-d vectors in a SQLite-backed collection. Three paths select
``--top-n`` of them with ``lambda`` = ``--lambda``:

- ``stage``: ``MMRStage.run(ctx)`` on a PipelineContext whose working list is the
  candidates -- the stored vectors are read from the SQLite store in one batch;
- ``select``: the stage's algorithm on the in-memory candidate matrix
  (``CandidateSimilarity`` + ``mmr_select``), the same inputs as raw;
- ``raw``: the candidate rows gathered from an in-memory matrix of all vectors, the full
  candidate similarity matrix, then the greedy loop over it (the usual hand-written MMR,
  with the same redundancy floor at 0).

Picks are compared with raw (and, for information, raw with and without the floor, i.e.
Haystack's formula). Small matrix products on a loaded 2-core machine are much slower
with multi-threaded BLAS: run with ``OPENBLAS_NUM_THREADS=1`` (recorded in the JSON).
Run from the repository root (memcore-mmr installed)::

    OPENBLAS_NUM_THREADS=1 python bench/bench_mmr.py --quick
    OPENBLAS_NUM_THREADS=1 python bench/bench_mmr.py --n 50000 --candidates 200 --out mmr.json

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

use_checkout("mmr")

from memcore import Collection, Query
from memcore.plugin import PipelineContext
from memcore.embedders._embedder import Space


def raw_mmr(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray, top_n: int, lam: float, floor: bool = True) -> list[int]:
    """Greedy MMR over the candidate rows of ``matrix``; positions into ``rows``."""
    v = matrix[rows].astype(np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q)
    rel = v @ qn
    sim = v @ v.T
    selected: list[int] = []
    available = np.ones(len(rows), dtype=bool)
    for _ in range(min(top_n, len(rows))):
        if selected:
            red = sim[:, selected].max(axis=1)
            if floor:
                red = np.maximum(red, 0.0)
            score = lam * rel - (1 - lam) * red
        else:
            score = lam * rel
        score = np.where(available, score, -np.inf)
        pick = int(np.argmax(score))
        available[pick] = False
        selected.append(pick)
    return selected


def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from memcore_mmr import CandidateSimilarity, MMRConfig, MMRStage, mmr_select

    rng = np.random.default_rng(args.seed)
    data = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    base = Collection.create()
    spaces = {**base.spaces, "dense": Space("dense", args.dim, None, "none")}
    base.close()
    collection = Collection.create(root / "coll", spaces=spaces)
    collection.create_index("vec", "exact", space="dense", metric="cosine")
    started = time.perf_counter()
    for start in range(0, args.n, 1000):
        chunk = range(start, min(start + 1000, args.n))
        collection.insert([{"id": f"r{i:07d}", "text": f"record {i}", "vectors": {"dense": data[i]}} for i in chunk])
    log(f"built {args.n} records in {time.perf_counter() - started:.1f} s")
    row_of = {f"r{i:07d}": i for i in range(args.n)}
    stage = MMRStage(MMRConfig(lambda_=args.lambda_, top_n=args.top_n, space="dense"))
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    inputs = []
    for q in queries:
        query = Query(vectors={"dense": q}, k=args.top_n)
        hits = collection.search_index("vec", query, args.candidates)
        inputs.append((query, hits, np.array([row_of[h.id] for h in hits])))

    def run_stage(query, hits):
        ctx = PipelineContext(collection, query)
        ctx.current = hits
        stage.run(ctx)
        return [h.id for h in ctx.current]

    def run_select(rows, q):
        sim = CandidateSimilarity(data[rows], np.ones(len(rows), dtype=bool))
        picks, _ = mmr_select(sim.to_query(q, None), sim.column, args.top_n, args.lambda_)
        return picks

    same_stage = same_select = same_haystack = 0
    for query, hits, rows in inputs:
        q = query.vectors["dense"]
        raw = raw_mmr(data, rows, q, args.top_n, args.lambda_)
        same_stage += run_stage(query, hits) == [hits[i].id for i in raw]
        same_select += run_select(rows, q) == raw
        same_haystack += raw_mmr(data, rows, q, args.top_n, args.lambda_, floor=False) == raw

    clock = time.perf_counter
    runs = {"stage": [], "select": [], "raw": []}
    for _ in range(args.repeat):
        totals = dict.fromkeys(runs, 0.0)
        for query, hits, rows in inputs:  # the three paths interleaved query by query
            q = query.vectors["dense"]
            t0 = clock()
            run_stage(query, hits)
            t1 = clock()
            run_select(rows, q)
            t2 = clock()
            raw_mmr(data, rows, q, args.top_n, args.lambda_)
            t3 = clock()
            totals["stage"] += t1 - t0
            totals["select"] += t2 - t1
            totals["raw"] += t3 - t2
        for name in runs:
            runs[name].append(totals[name] / len(inputs))
    med = {name: float(np.median(v)) for name, v in runs.items()}
    collection.close()
    out = {
        "ms_per_query": {name: round(v * 1e3, 4) for name, v in med.items()},
        "runs_ms": {name: [round(x * 1e3, 4) for x in v] for name, v in runs.items()},
        "ratio_raw_over_select": round(med["raw"] / med["select"], 3),
        "ratio_raw_over_stage": round(med["raw"] / med["stage"], 3),
        "same_picks_as_raw": {"stage": f"{same_stage}/{len(inputs)}", "select": f"{same_select}/{len(inputs)}"},
        "raw_same_picks_with_and_without_floor": f"{same_haystack}/{len(inputs)}",
    }
    log(f"ms/query: {out['ms_per_query']}; raw/select {out['ratio_raw_over_select']}, raw/stage {out['ratio_raw_over_stage']}")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int, default=None, help="records in the collection; default 20000, --quick 5000")
    p.add_argument("--dim", type=int, default=384, help="vector dimension")
    p.add_argument("--candidates", type=int, default=100, help="hits MMR chooses from (recall depth)")
    p.add_argument("--top-n", type=int, default=10, help="hits MMR selects")
    p.add_argument("--lambda", dest="lambda_", type=float, default=0.5, help="MMR trade-off")
    p.add_argument("--queries", type=int, default=None, help="queries; default 100, --quick 30")
    p.add_argument("--repeat", type=int, default=3, help="timed runs (paths interleaved query by query); medians are reported")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--quick", action="store_true", help="small smoke run")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    args = p.parse_args(argv)
    for name, (full, quick) in {"n": (20000, 5000), "queries": (100, 30)}.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if min(args.n, args.dim, args.candidates, args.top_n, args.queries, args.repeat) <= 0 or not 0 <= args.lambda_ <= 1:
        p.error("sizes must be positive and --lambda in [0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = header("bench_mmr", args, argv=argv)
    result["ratio_note"] = "raw ms per query / memcore ms per query, medians (1.0 = no overhead); stage includes reading the candidates' vectors from SQLite"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memcore-bench-mmr-") as tmp:
        result["mmr"] = bench(args, Path(tmp))
    finish_environment(result["environment"])
    result["seconds"] = round(time.perf_counter() - started, 2)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
