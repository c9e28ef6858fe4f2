#!/usr/bin/env python
"""LSH benchmark: memcore's ``lsh`` index against ``faiss.IndexLSH``, same process and run.

For each dataset, every memcore configuration is compared with ``faiss.IndexLSH(d, nbits)``
at the same total number of bits (``tables * bits``) and at the same bits per table:

- recall@k against exact cosine top-k (numpy, computed once);
- query throughput of one batched call for all queries (``LSHIndex.search_batch`` vs
  ``IndexLSH.search``), wall clock and process CPU time, and the p50 latency of single
  queries (``LSHIndex.search`` vs ``IndexLSH.search`` of one row);
- build throughput and memory per vector.

faiss runs with 1 OpenMP thread (the memcore index is single-threaded numpy) and with its
default thread count. Timings alternate memcore and faiss runs ``--repeat`` times and keep
medians, so noise from other work on the machine hits both sides alike.

Datasets:

- ``scifact``: the all-MiniLM-L6-v2 vectors of BEIR SciFact (5,183 abstracts, 809 train
  queries) from ``../shared/data/scifact/minilm`` next to the repository; skipped with a
  message when absent;
- ``synthetic``: ``--n`` (100,000) clustered ``--dim`` (384) unit vectors. Each point is
  ``normalise(c + s * sub + e * noise)``: ``c`` one of ``--clusters`` centres, ``sub``
  one of ``--subclusters`` sub-centres of that cluster, all standard normal; queries are
  fresh points drawn the same way.

Run from the repository root (progress on stderr, one JSON object on stdout)::

    python bench/bench_lsh.py --quick
    python bench/bench_lsh.py --out bench/lsh_results.json

Never run as a test: timings belong here, not in the suite (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("lsh")

from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_lsh import LSHIndex, LSHIndexConfig  # noqa: E402

SCIFACT = SHARED / "data" / "scifact" / "minilm"

DEFAULT_CONFIGS: list[dict[str, Any]] = [
    {"tables": 8, "bits": 16, "multi_probe": 0},  # 128 bits: TiM-style "same bucket only"
    {"tables": 8, "bits": 16, "multi_probe": 1},  # 128 bits + Hamming-1 probes
    {"tables": 8, "bits": 8, "multi_probe": 1, "max_candidates": 64},  # 64 bits
    {"tables": 16, "bits": 8, "multi_probe": 0, "max_candidates": 64},  # 128 bits
    {"tables": 16, "bits": 10, "multi_probe": 1},  # 160 bits: the defaults
    {"tables": 16, "bits": 10, "multi_probe": 1, "max_candidates": 128},  # 160 bits
    {"tables": 16, "bits": 16, "multi_probe": 1, "max_candidates": 64},  # 256 bits
    {"tables": 16, "bits": 16, "multi_probe": 2, "probes": 32, "max_candidates": 64},  # 256 bits
    {"tables": 32, "bits": 8, "multi_probe": 0, "max_candidates": 64},  # 256 bits
    {"tables": 16, "bits": 16, "multi_probe": 1, "rerank": False, "store_vectors": False},  # 256 bits, codes only
    # ~100k vectors: 16-bit buckets, a margin-ordered radius-2 probe budget and a small cap
    {"tables": 4, "bits": 16, "multi_probe": 2, "probes": 96, "max_candidates": 24},  # 64 bits
    {"tables": 8, "bits": 16, "multi_probe": 2, "probes": 64, "max_candidates": 24},  # 128 bits
    {"tables": 10, "bits": 16, "multi_probe": 2, "probes": 48, "max_candidates": 32},  # 160 bits
    {"tables": 16, "bits": 16, "multi_probe": 2, "probes": 32, "max_candidates": 24},  # 256 bits
]
QUICK_CONFIGS = [DEFAULT_CONFIGS[i] for i in (1, 4, 7, 8, 9, 11, 13)]
LARGE_CONFIGS: list[dict[str, Any]] = [  # ~1M vectors: wider codes keep the buckets small
    {"tables": 16, "bits": 16, "multi_probe": 2, "probes": 32, "max_candidates": 64},
    {"tables": 16, "bits": 18, "multi_probe": 1, "max_candidates": 64},
    {"tables": 16, "bits": 18, "multi_probe": 2, "probes": 32, "max_candidates": 64},
    {"tables": 16, "bits": 20, "multi_probe": 2, "probes": 32, "max_candidates": 64},
    {"tables": 16, "bits": 16, "multi_probe": 2, "probes": 32, "max_candidates": 24},
]
GRIDS = {"default": DEFAULT_CONFIGS, "quick": QUICK_CONFIGS, "large": LARGE_CONFIGS}

# -- data --------------------------------------------------------------------------------------


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, float32."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def synthetic(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Clustered unit vectors (see the module docstring) and fresh queries from the same law."""
    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.clusters, args.dim), dtype=np.float32)
    subs = rng.standard_normal((args.clusters, args.subclusters, args.dim), dtype=np.float32)

    def draw(m: int) -> np.ndarray:
        c = rng.integers(0, args.clusters, m)
        s = rng.integers(0, args.subclusters, m)
        noise = rng.standard_normal((m, args.dim), dtype=np.float32)
        return normalise(centres[c] + args.sub_spread * subs[c, s] + args.noise * noise)

    corpus = np.concatenate([draw(min(20_000, args.n - i)) for i in range(0, args.n, 20_000)])
    info = {
        "n": args.n,
        "queries": args.queries,
        "dim": args.dim,
        "clusters": args.clusters,
        "subclusters": args.subclusters,
        "sub_spread": args.sub_spread,
        "noise": args.noise,
        "seed": args.seed,
    }
    return corpus, draw(args.queries), info


def scifact(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | str:
    """SciFact MiniLM vectors, or the reason they are unavailable."""
    corpus_file, query_file = SCIFACT / "corpus.npy", SCIFACT / "queries.npy"
    if not (corpus_file.is_file() and query_file.is_file()):
        return f"{SCIFACT.resolve()} not found (the shared data folder beside the repository)"
    corpus = normalise(np.load(corpus_file, allow_pickle=False))
    queries = normalise(np.load(query_file, allow_pickle=False))
    if args.scifact_queries:
        queries = queries[: args.scifact_queries]
    return corpus, queries, {"n": int(corpus.shape[0]), "queries": int(queries.shape[0]), "dim": int(corpus.shape[1]), "source": str(SCIFACT)}


def exact_top_k(corpus: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, dict[str, float]]:
    """Exact cosine top-k rows (ties by row) and the mean similarity of the 1st and k-th."""
    out, first, kth = [], [], []
    for i in range(0, queries.shape[0], 256):
        sims = queries[i : i + 256] @ corpus.T
        top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        out.append(top)
        picked = np.take_along_axis(sims, top, axis=1)
        first.append(picked[:, 0])
        kth.append(picked[:, -1])
    return np.concatenate(out), {
        "mean_top1_cosine": round(float(np.concatenate(first).mean()), 4),
        f"mean_top{k}_cosine": round(float(np.concatenate(kth).mean()), 4),
    }


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    """Mean share of the exact top-k found."""
    k = truth.shape[1]
    return float(np.mean([len(set(f) & set(t.tolist())) / k for f, t in zip(found, truth)]))


# -- timing ------------------------------------------------------------------------------------


class Timer:
    """Collects wall and CPU seconds of repeated runs of one side."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        self.cpu.append(time.process_time() - c)
        self.wall.append(time.perf_counter() - w)
        return out

    def qps(self, count: int) -> dict[str, float]:
        return {"qps": round(count / statistics.median(self.wall), 1), "cpu_qps": round(count / statistics.median(self.cpu), 1)}


def single_latency_us(fn: Callable[[int], Any], count: int) -> float:
    """p50 of one-query calls, in microseconds."""
    times = []
    for i in range(count):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e6, 1)


# -- the two sides -----------------------------------------------------------------------------


class FaissLSH:
    """``faiss.IndexLSH(d, nbits)`` (random rotation, zero thresholds: faiss' defaults)."""

    def __init__(self, faiss: Any, corpus: np.ndarray, nbits: int):
        self.faiss = faiss
        self.nbits = nbits
        started = time.perf_counter()
        self.index = faiss.IndexLSH(corpus.shape[1], nbits)
        self.index.add(corpus)
        self.build_s = time.perf_counter() - started

    def search(self, queries: np.ndarray, k: int, threads: int) -> np.ndarray:
        self.faiss.omp_set_num_threads(threads)
        return self.index.search(queries, k)[1]


def build_lsh(corpus: np.ndarray, config: dict[str, Any], batch: int) -> tuple[LSHIndex, float]:
    """An ``lsh`` index over ``corpus`` (ids are row numbers), added in batches; and the seconds it took."""
    index = LSHIndex(LSHIndexConfig(**config), IndexContext("bench", {"default": SpaceInfo("default", corpus.shape[1], "bench")}))
    records = [Record(id=str(i), text="-", vectors={"default": corpus[i]}) for i in range(corpus.shape[0])]
    started = time.perf_counter()
    for i in range(0, len(records), batch):
        index.add(records[i : i + batch])
    return index, time.perf_counter() - started


def mean_candidates(index: LSHIndex, queries: np.ndarray) -> float:
    """Candidates scored per query (after the cap), from the index's own candidate generator."""
    from memcore_lsh.candidates import bucket_candidates
    from memcore_lsh.hashing import normalize_rows

    planes, mode = index._planes, index._default_mode
    projections = planes.project(normalize_rows(queries))
    codes = planes.codes(projections)
    packed = planes.pack(codes)
    keys = index._plan(mode).keys(codes, projections)
    sizes = [lists.sizes() for _, lists in bucket_candidates(index._tables, keys, packed, index._rows.packed, index._rows.used, None, mode.max_candidates)]
    return round(float(np.concatenate(sizes).mean()), 1)


def describe(config: dict[str, Any]) -> str:
    """A short label: T16xb16 r2 p32 cap64."""
    defaults = LSHIndexConfig()
    parts = [f"T{config.get('tables', defaults.tables)}xb{config.get('bits', defaults.bits)}", f"r{config.get('multi_probe', defaults.multi_probe)}"]
    if config.get("probes"):
        parts.append(f"p{config['probes']}")
    if config.get("max_candidates"):
        parts.append(f"cap{config['max_candidates']}")
    if config.get("rerank") is False:
        parts.append("hamming")
    return " ".join(parts)


def run_dataset(name: str, corpus: np.ndarray, queries: np.ndarray, info: dict[str, Any], args: argparse.Namespace, faiss: Any) -> dict[str, Any]:
    k = args.k
    log(f"{name}: {corpus.shape[0]} vectors, {queries.shape[0]} queries, exact top-{k}")
    truth, sims = exact_top_k(corpus, queries, k)
    query_objects = [Query(vectors={"default": q}) for q in queries]
    singles = min(args.single_queries, len(queries))
    default_threads = os.cpu_count() or 1
    faiss_cache: dict[int, FaissLSH] = {}
    faiss_rows: dict[int, dict[str, Any]] = {}

    def faiss_for(nbits: int) -> FaissLSH:
        if nbits not in faiss_cache:
            faiss_cache[nbits] = FaissLSH(faiss, corpus, nbits)
            found = faiss_cache[nbits].search(queries, k, 1)
            faiss_rows[nbits] = {
                "nbits": nbits,
                "recall": round(recall([row.tolist() for row in found], truth), 4),
                "bytes_per_vector": nbits // 8,
                "build_s": round(faiss_cache[nbits].build_s, 3),
                "single_p50_us_1thread": single_latency_us(lambda i: faiss_cache[nbits].search(queries[i : i + 1], k, 1), singles),
            }
        return faiss_cache[nbits]

    results = []
    configs = args.config_list
    for n_config, config in enumerate(configs, start=1):
        label = describe(config)
        log(f"{name}: [{n_config}/{len(configs)}] {label}: build")
        index, build_s = build_lsh(corpus, config, args.batch)
        total_bits = index.config.tables * index.config.bits
        faiss_for(index.config.bits)  # recall at equal bits per table (not timed)
        compared = {"equal_total_bits": total_bits, **{f"{b}_bits": b for b in args.reference_bits_list}}
        ours = Timer()
        raw = {nbits: Timer() for nbits in sorted(set(compared.values()))}
        raw_default = Timer()
        baselines = {nbits: faiss_for(nbits) for nbits in raw}
        hits = None
        for _ in range(args.repeat):  # alternate the sides: the same noise hits all of them
            hits = ours.run(lambda index=index: index.search_batch(query_objects, k))
            for nbits, timer in raw.items():
                timer.run(lambda baselines=baselines, nbits=nbits: baselines[nbits].search(queries, k, 1))
            raw_default.run(lambda baselines=baselines, total_bits=total_bits: baselines[total_bits].search(queries, k, default_threads))
        ours_recall = recall([[int(h.id) for h in row] for row in hits], truth)
        single = single_latency_us(lambda i, index=index: index.search(query_objects[i], k), singles)
        stats = index.stats()
        row: dict[str, Any] = {
            "label": label,
            "config": {key: value for key, value in index.config.model_dump().items() if key != "kind"},
            "total_bits": total_bits,
            "recall": round(ours_recall, 4),
            **ours.qps(len(queries)),
            "single_p50_us": single,
            "mean_candidates": mean_candidates(index, queries),
            "build_records_per_s": round(corpus.shape[0] / build_s, 1),
            "bytes_per_vector": round(stats["memory_bytes"] / corpus.shape[0], 1),
            "largest_bucket": stats["largest_bucket"],
        }
        for key, nbits in compared.items():
            faiss_recall = faiss_rows[nbits]["recall"]
            faiss1 = raw[nbits].qps(len(queries))
            block = {
                "nbits": nbits,
                "faiss_recall": faiss_recall,
                "faiss_qps_1thread": faiss1["qps"],
                "faiss_cpu_qps_1thread": faiss1["cpu_qps"],
                "recall_ratio": round(ours_recall / faiss_recall, 3) if faiss_recall else None,
                "qps_ratio_1thread": round(row["qps"] / faiss1["qps"], 3),
                "cpu_qps_ratio_1thread": round(row["cpu_qps"] / faiss1["cpu_qps"], 3),
                "single_p50_ratio_faiss_over_ours": round(faiss_rows[nbits]["single_p50_us_1thread"] / single, 3),
                "meets_target_1thread": bool(ours_recall > faiss_recall and row["qps"] >= faiss1["qps"]),
            }
            if key == "equal_total_bits":
                faiss_default = raw_default.qps(len(queries))
                block[f"faiss_qps_{default_threads}threads"] = faiss_default["qps"]
                block[f"qps_ratio_{default_threads}threads"] = round(row["qps"] / faiss_default["qps"], 3)
                block[f"meets_target_{default_threads}threads"] = bool(ours_recall > faiss_recall and row["qps"] >= faiss_default["qps"])
            row[f"vs_index_lsh_{key}"] = block
        table_recall = faiss_rows[index.config.bits]["recall"]
        row["vs_index_lsh_equal_bits_per_table"] = {
            "nbits": index.config.bits,
            "faiss_recall": table_recall,
            "recall_ratio": round(ours_recall / table_recall, 3) if table_recall else None,
        }
        equal = row["vs_index_lsh_equal_total_bits"]
        log(
            f"{name}: {label}: recall {row['recall']:.3f} vs IndexLSH({total_bits}) {equal['faiss_recall']:.3f}; "
            f"qps {row['qps']:.0f} vs {equal['faiss_qps_1thread']:.0f} (1 thread) / "
            f"{equal[f'faiss_qps_{default_threads}threads']:.0f} ({default_threads} threads)"
        )
        results.append(row)
        del index
    keys = ["equal_total_bits", *(f"{b}_bits" for b in args.reference_bits_list)]
    return {
        **info,
        "k": k,
        "exact": sims,
        "faiss_index_lsh": [faiss_rows[b] for b in sorted(faiss_rows)],
        "memcore_lsh": results,
        "meeting_target_1thread": {key: [r["label"] for r in results if r[f"vs_index_lsh_{key}"]["meets_target_1thread"]] for key in keys},
        "higher_recall": {key: [r["label"] for r in results if r["recall"] > r[f"vs_index_lsh_{key}"]["faiss_recall"]] for key in keys},
    }


# -- main ----------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="scifact,synthetic", help="comma-separated: scifact, synthetic")
    p.add_argument("--n", type=int, default=100_000, help="synthetic vectors")
    p.add_argument("--queries", type=int, default=1_000, help="synthetic queries")
    p.add_argument("--scifact-queries", type=int, default=0, help="use only the first N SciFact queries (0 = all 809)")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=1_000)
    p.add_argument("--subclusters", type=int, default=10)
    p.add_argument("--sub-spread", type=float, default=0.8, help="weight of the sub-centre")
    p.add_argument("--noise", type=float, default=0.8, help="weight of the per-point noise")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3, help="alternating timed runs per side (medians)")
    p.add_argument("--single-queries", type=int, default=200, help="one-query calls timed for the p50 latency")
    p.add_argument("--batch", type=int, default=10_000, help="records per add() while building")
    p.add_argument("--configs", help="JSON list of lsh config dicts (overrides --grid)")
    p.add_argument(
        "--grid", choices=sorted(GRIDS), default="default", help="built-in config list: default (14 configs), quick (7), large (bits for ~1M vectors)"
    )
    p.add_argument("--reference-bits", default="128,256", help="IndexLSH sizes every config is also compared with (comma-separated; empty: none)")
    p.add_argument("--quick", action="store_true", help="N=20,000, 200 queries, 200 SciFact queries, the quick grid, 2 repeats")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.repeat, args.single_queries = 20_000, 200, 2, 50
        args.scifact_queries = args.scifact_queries or 200
        if args.grid == "default":
            args.grid = "quick"
    args.config_list = json.loads(args.configs) if args.configs else GRIDS[args.grid]
    args.reference_bits_list = [int(b) for b in args.reference_bits.split(",") if b.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import faiss
    except ImportError:
        print(json.dumps({"benchmark": "lsh", "skipped": "faiss-cpu is not installed: pip install -c constraints.txt 'memcore-lsh[bench] @ ./plugins/lsh'"}))
        return 0
    params = {k: v for k, v in vars(args).items() if k not in ("out", "config_list", "reference_bits_list")} | {"configs": args.config_list}
    result = header("lsh", argv=argv, params=params, faiss=getattr(faiss, "__version__", None))
    result["datasets"] = {}
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        if name == "scifact":
            data = scifact(args)
            if isinstance(data, str):
                log(f"scifact skipped: {data}")
                result["datasets"]["scifact"] = {"skipped": data}
                continue
        elif name == "synthetic":
            log(f"synthetic: generating {args.n} x {args.dim}")
            data = synthetic(args)
        else:
            raise SystemExit(f"unknown dataset {name!r}; use scifact, synthetic")
        result["datasets"][name] = run_dataset(name, *data, args, faiss)
    result["total_s"] = finish_environment(result["environment"])["seconds"]
    emit(result, args.out)
    log(f"done in {result['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
