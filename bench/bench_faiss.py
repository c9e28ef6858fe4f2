#!/usr/bin/env python
"""faiss plugin benchmark: memcore's ``faiss`` index against raw faiss, same process, same run.

For each dataset and configuration (Flat; HNSW32 at efSearch 16/64/128) it measures,
at ``Index.search`` (one query at a time) and ``Index.search_batch`` (``--batch`` queries
per call), the queries per second of the memcore index and of a raw faiss index built
identically (``faiss.index_factory(d, factory, METRIC_INNER_PRODUCT)`` + ``add``), and
reports ``ratio = memcore_qps / raw_qps`` (target >= 0.9) plus recall@k of both against
exact numpy search.

Datasets:

- ``scifact``: SciFact MiniLM embeddings (corpus 5,183 x 384 as the base, the 809 query
  embeddings as queries) from the ``shared`` folder beside the repository; skipped with a
  message when absent;
- ``synthetic``: ``--n`` (100,000) vectors of ``--dim`` (384) drawn around ``--clusters``
  (1,000) Gaussian centres, normalised; queries drawn the same way.

Raw and memcore calls are interleaved query by query (batch by batch), the order flipped
each time, so load changes hit both alike; ``--repeat`` (3) rounds, medians. The load
average is recorded because other jobs share the machine.
The memcore HNSW index is built once per dataset (efSearch 16), saved, and loaded into
indexes configured with efSearch 64 and 128 (``load`` applies the configured efSearch).

    python bench/bench_faiss.py --quick              # ~1 min: SciFact + 20k synthetic
    python bench/bench_faiss.py                      # full: SciFact + 100k synthetic
    python bench/bench_faiss.py --datasets synthetic --n 50000 --omp-threads 1

Never run as a test: timings belong here (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("faiss")

import faiss  # noqa: E402

from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_faiss import FaissIndexConfig  # noqa: E402
from memcore_faiss.index import FaissIndex  # noqa: E402


# -- data ------------------------------------------------------------------------------------


def scifact() -> tuple[np.ndarray, np.ndarray] | str:
    """(corpus, queries) or the reason they are missing."""
    folder = SHARED / "data" / "scifact" / "minilm"
    corpus, queries = folder / "corpus.npy", folder / "queries.npy"
    if not (corpus.is_file() and queries.is_file()):
        return f"SciFact MiniLM embeddings not found in {folder.resolve()}"
    return np.load(corpus, allow_pickle=False).astype(np.float32), np.load(queries, allow_pickle=False).astype(np.float32)


def synthetic(n: int, n_queries: int, dim: int, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised vectors around ``clusters`` Gaussian centres, and queries drawn alike."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)

    def draw(m: int) -> np.ndarray:
        x = centres[rng.integers(0, clusters, m)] + 0.6 * rng.standard_normal((m, dim)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return draw(n), draw(n_queries)


def ground_truth(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k rows by inner product (numpy, in blocks)."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for i in range(0, len(queries), 256):
        scores = queries[i : i + 256] @ base.T
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1)
        out[i : i + 256] = np.take_along_axis(part, order, axis=1)
    return out


def recall(found: list[list[int]], truth: np.ndarray, k: int) -> float:
    """Mean |found ∩ true top-k| / k."""
    return float(np.mean([len(set(f[:k]) & set(t.tolist())) / k for f, t in zip(found, truth)]))


# -- timing -----------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def compare(raw_units: list[Callable[[], Any]], mem_units: list[Callable[[], Any]], count: int, repeat: int) -> dict[str, Any]:
    """Time raw and memcore unit by unit, interleaved (order flipped every unit), so that
    load changes hit both sides alike; ``repeat`` rounds, median q/s of the rounds."""
    clock = time.perf_counter
    raw_qps, mem_qps, ratios = [], [], []
    for _ in range(repeat):
        raw_t = mem_t = 0.0
        for i, (raw_fn, mem_fn) in enumerate(zip(raw_units, mem_units)):
            if i % 2:
                t0 = clock()
                mem_fn()
                t1 = clock()
                raw_fn()
                t2 = clock()  # noqa: E702
                mem_t += t1 - t0
                raw_t += t2 - t1
            else:
                t0 = clock()
                raw_fn()
                t1 = clock()
                mem_fn()
                t2 = clock()  # noqa: E702
                raw_t += t1 - t0
                mem_t += t2 - t1
        raw_qps.append(count / raw_t)
        mem_qps.append(count / mem_t)
        ratios.append(raw_t / mem_t)
    return {
        "raw_qps": round(statistics.median(raw_qps), 1),
        "memcore_qps": round(statistics.median(mem_qps), 1),
        "ratio": round(statistics.median(mem_qps) / statistics.median(raw_qps), 3),
        "overhead_us_per_query": round(1e6 / statistics.median(mem_qps) - 1e6 / statistics.median(raw_qps), 2),
        "ratio_per_round": [round(x, 3) for x in ratios],
    }


# -- one dataset --------------------------------------------------------------------------------


def memcore_index(dim: int, **options: Any) -> FaissIndex:
    context = IndexContext(name="bench", spaces={"default": SpaceInfo("default", dim, "bench")})
    return FaissIndex(FaissIndexConfig(metric="ip", **options), context)


def run_dataset(name: str, base: np.ndarray, queries: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    k, dim = args.k, base.shape[1]
    log(f"{name}: {base.shape[0]} x {dim} base, {len(queries)} queries; exact ground truth")
    truth = ground_truth(base, queries, k)
    one = queries[: args.single_queries]
    q_objs = [Query(vectors={"default": q}) for q in queries]
    one_objs = q_objs[: len(one)]
    records = [Record(id=str(i), text="-", vectors={"default": v}) for i, v in enumerate(base)]
    threads = {"omp_threads": args.omp_threads} if args.omp_threads else {}
    out: dict[str, Any] = {"n": int(base.shape[0]), "dim": int(dim), "queries": int(len(queries)), "single_queries": int(len(one)), "configs": {}}

    def measure(label: str, raw: Any, mem: FaissIndex) -> None:
        log(f"{name} {label}: one-by-one")
        single = compare(
            [lambda q=q: raw.search(q[None, :], k) for q in one],
            [lambda q=q: mem.search(q, k) for q in one_objs],
            len(one),
            args.repeat,
        )
        log(f"{name} {label}: batched ({args.batch} per call)")
        chunks = [(queries[i : i + args.batch], q_objs[i : i + args.batch]) for i in range(0, len(queries), args.batch)]
        batched = compare(
            [lambda a=a: raw.search(a, k) for a, _ in chunks],
            [lambda b=b: mem.search_batch(b, k) for _, b in chunks],
            len(queries),
            args.repeat,
        )
        raw_found = [row.tolist() for a, _ in chunks for row in raw.search(a, k)[1]]
        mem_found = [[int(h.id) for h in hits] for _, b in chunks for hits in mem.search_batch(b, k)]
        entry = {
            "single": single,
            "batched": batched,
            f"recall@{k}_raw": round(recall(raw_found, truth, k), 4),
            f"recall@{k}_memcore": round(recall(mem_found, truth, k), 4),
        }
        if label == "Flat":  # raw faiss with memcore's BLAS threshold: how much of the batched gain is the setting
            tuned = mem._blas
            previous = faiss.cvar.distance_compute_blas_threshold

            def raw_tuned(a: np.ndarray) -> Any:  # the same settings memcore uses: BLAS, one thread
                threads = faiss.omp_get_max_threads()
                faiss.cvar.distance_compute_blas_threshold = tuned
                faiss.omp_set_num_threads(args.omp_threads or 1)
                try:
                    return raw.search(a, k)
                finally:
                    faiss.cvar.distance_compute_blas_threshold = previous
                    faiss.omp_set_num_threads(threads)

            entry["batched_vs_raw_with_same_settings"] = compare(
                [lambda a=a: raw_tuned(a) for a, _ in chunks], [lambda b=b: mem.search_batch(b, k) for _, b in chunks], len(queries), args.repeat
            )
            entry["blas_threshold"] = {"faiss_default": previous, "memcore": tuned}
        out["configs"][label] = entry
        log(
            f"{name} {label}: single ratio {single['ratio']}, batched ratio {batched['ratio']}, recall raw {entry[f'recall@{k}_raw']} memcore {entry[f'recall@{k}_memcore']}"
        )

    # Flat
    log(f"{name}: building Flat")
    raw_flat = faiss.index_factory(dim, "Flat", faiss.METRIC_INNER_PRODUCT)
    raw_s, _ = timed(lambda raw_flat=raw_flat: raw_flat.add(base))
    mem_flat = memcore_index(dim, factory="Flat", **threads)
    mem_s, _ = timed(lambda mem_flat=mem_flat: mem_flat.add(records))
    out["build_flat_seconds"] = {"raw": round(raw_s, 3), "memcore": round(mem_s, 3)}
    measure("Flat", raw_flat, mem_flat)
    del raw_flat, mem_flat

    # HNSW32: one build each, efSearch varied (raw: attribute; memcore: save + load with the new config)
    log(f"{name}: building HNSW32 (raw)")
    raw_hnsw = faiss.index_factory(dim, "HNSW32", faiss.METRIC_INNER_PRODUCT)
    raw_s, _ = timed(lambda: raw_hnsw.add(base))
    log(f"{name}: building HNSW32 (memcore)")
    mem_hnsw = memcore_index(dim, factory="HNSW32", ef_search=args.ef[0], **threads)
    mem_s, _ = timed(lambda: mem_hnsw.add(records))
    out["build_hnsw_seconds"] = {"raw": round(raw_s, 2), "memcore": round(mem_s, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        save_s, _ = timed(lambda: mem_hnsw.save(Path(tmp)))
        out["hnsw_save_seconds"] = round(save_s, 3)
        for ef in args.ef:
            raw_hnsw.hnsw.efSearch = ef
            if ef != args.ef[0]:
                mem_hnsw = memcore_index(dim, factory="HNSW32", ef_search=ef, **threads)
                load_s, _ = timed(lambda mem_hnsw=mem_hnsw: mem_hnsw.load(Path(tmp)))
                out.setdefault("hnsw_load_seconds", round(load_s, 3))
            measure(f"HNSW32,efSearch={ef}", raw_hnsw, mem_hnsw)
    return out


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller synthetic set (20k), 1 repeat fewer, fewer single queries")
    parser.add_argument("--datasets", default="scifact,synthetic", help="comma list of scifact, synthetic")
    parser.add_argument("--n", type=int, default=100_000, help="synthetic base size")
    parser.add_argument("--dim", type=int, default=384, help="synthetic dimension")
    parser.add_argument("--clusters", type=int, default=1000, help="synthetic Gaussian clusters")
    parser.add_argument("--queries", type=int, default=1000, help="synthetic queries")
    parser.add_argument("--single-queries", type=int, default=300, help="queries timed one by one (a prefix of the queries)")
    parser.add_argument("--batch", type=int, default=100, help="queries per search_batch call")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--ef", default="16,64,128", help="HNSW efSearch values")
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds per measurement (median)")
    parser.add_argument("--omp-threads", type=int, default=None, help="faiss OpenMP threads for both sides (default: faiss' own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    args.ef = [int(x) for x in args.ef.split(",")]
    if args.quick:
        args.n = min(args.n, 20_000)
        args.queries = min(args.queries, 500)
        args.single_queries = min(args.single_queries, 200)
    if args.omp_threads:
        faiss.omp_set_num_threads(args.omp_threads)

    result = header("faiss", args, faiss=faiss.__version__, faiss_omp_threads=faiss.omp_get_max_threads())
    result["datasets"] = {}
    wanted = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if "scifact" in wanted:
        data = scifact()
        if isinstance(data, str):
            log(f"scifact skipped: {data}")
            result["datasets"]["scifact"] = {"skipped": data}
        else:
            result["datasets"]["scifact"] = run_dataset("scifact", data[0], data[1], args)
    if "synthetic" in wanted:
        log(f"synthetic: generating {args.n} x {args.dim}, {args.clusters} clusters")
        base, queries = synthetic(args.n, args.queries, args.dim, args.clusters, args.seed)
        result["datasets"]["synthetic"] = run_dataset("synthetic", base, queries, args)
    result["seconds"] = finish_environment(result["environment"])["seconds"]
    summary = {}
    for dname, d in result["datasets"].items():
        for cname, c in d.get("configs", {}).items():
            summary[f"{dname}/{cname}"] = {
                "single": c["single"]["ratio"],
                "batched": c["batched"]["ratio"],
                "recall_memcore": c[f"recall@{args.k}_memcore"],
                "recall_raw": c[f"recall@{args.k}_raw"],
            }
    result["ratios"] = summary
    emit(result, args.out)


if __name__ == "__main__":
    main()
