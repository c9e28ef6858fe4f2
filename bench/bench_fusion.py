#!/usr/bin/env python
"""Fusion benchmark: the score fusions of memcore-rrf (and the builtin rrf) against the
same formulas on plain (id, score) tuples, in the same process and run.

memcore side: ``Fusion.fuse(lists, k)`` on ``memcore.Hit`` lists as recall stages make
them (every hit with its provenance), returning hits with merged provenance.
Raw side: the same normalisation and aggregation written directly with numpy and a dict
over ``[(id, score), ...]`` lists, no Hit objects, no provenance -- what an application
would write by hand. Every case is checked to give the same ids and scores.

Run from the repository root (memcore-rrf installed, e.g. ``pip install -e ./plugins/rrf``)::

    python bench/bench_fusion.py --quick
    python bench/bench_fusion.py --depth 200 --lists 3 --out fusion.json

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

use_checkout("rrf")

import memcore  # noqa: E402
from memcore import Collection, Contribution, Hit  # noqa: E402

Pairs = list[tuple[str, float]]


# -- data ------------------------------------------------------------------------------------


def make_case(rng: np.random.Generator, n_lists: int, depth: int, pool: int) -> dict[str, Pairs]:
    """Named lists over a shared id pool, each on its own scale, best first, unique ids."""
    scales = [(1.0, 0.0), (3.0, -3.0), (12.0, 0.0), (0.5, 0.0), (7.0, -7.0)]
    out = {}
    for i in range(n_lists):
        ids = rng.choice(pool, size=min(depth, pool), replace=False)
        scale, shift = scales[i % len(scales)]
        scores = np.sort(rng.random(len(ids)))[::-1] * scale + shift
        out[f"list{i}"] = [(f"doc{j:06d}", float(s)) for j, s in zip(ids, scores)]
    return out


def as_hits(case: dict[str, Pairs]) -> dict[str, list[Hit]]:
    return {
        name: [Hit(rid, s, raw=s, source=name, provenance=(Contribution(name, r, s),)) for r, (rid, s) in enumerate(pairs, start=1)]
        for name, pairs in case.items()
    }


# -- raw implementations of the same formulas ------------------------------------------------


def _minmax(s: np.ndarray) -> np.ndarray:
    lo, hi = s.min(), s.max()
    return (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)


def _zscore(s: np.ndarray) -> np.ndarray:
    sd = s.std()
    return (s - s.mean()) / sd if sd > 0 else np.zeros_like(s)


def _dbsf(s: np.ndarray) -> np.ndarray:
    mu, sd = s.mean(), s.std()
    return (s - (mu - 3 * sd)) / (6 * sd) if sd > 0 else np.full_like(s, 0.5)


def raw_score_fusion(norm: Callable[[np.ndarray], np.ndarray], combine: str, normalize_weights: bool) -> Callable[[dict[str, Pairs], int], Pairs]:
    def fuse(lists: dict[str, Pairs], k: int) -> Pairs:
        w = 1.0 / len(lists) if normalize_weights else 1.0
        acc: dict[str, float] = {}
        for pairs in lists.values():
            if not pairs:
                continue
            ids = [p[0] for p in pairs]
            values = norm(np.array([p[1] for p in pairs])) * w
            if combine == "sum":
                for rid, v in zip(ids, values.tolist()):
                    acc[rid] = acc.get(rid, 0.0) + v
            else:
                for rid, v in zip(ids, values.tolist()):
                    if v > acc.get(rid, -math.inf):
                        acc[rid] = v
        return sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    return fuse


def raw_rrf(lists: dict[str, Pairs], k: int) -> Pairs:
    acc: dict[str, float] = {}
    for pairs in lists.values():
        for rank, (rid, _) in enumerate(pairs, start=1):
            acc[rid] = acc.get(rid, 0.0) + 1.0 / (60.0 + rank)
    return sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


FUSIONS: dict[str, tuple[Any, Callable[[dict[str, Pairs], int], Pairs]]] = {
    "weighted_minmax": ({"kind": "weighted"}, raw_score_fusion(_minmax, "sum", True)),
    "weighted_zscore": ({"kind": "weighted", "normalization": "zscore"}, raw_score_fusion(_zscore, "sum", True)),
    "dbsf": ({"kind": "dbsf"}, raw_score_fusion(_dbsf, "sum", False)),
    "union_minmax": ({"kind": "union"}, raw_score_fusion(_minmax, "max", False)),
    "rrf_builtin": ({"kind": "rrf"}, raw_rrf),
}


# -- timing ----------------------------------------------------------------------------------


def timed_pair(
    mem: Callable[[Any, int], Any], raw: Callable[[Any, int], Any], hit_cases: list[Any], cases: list[Any], k: int, loops: int
) -> tuple[float, float]:
    """Seconds per call of each side, the two interleaved call by call so that noise from
    other processes hits both alike."""
    clock = time.perf_counter
    mem_s = raw_s = 0.0
    for _ in range(loops):
        for hits, pairs in zip(hit_cases, cases):
            t0 = clock()
            mem(hits, k)
            t1 = clock()
            raw(pairs, k)
            t2 = clock()
            mem_s += t1 - t0
            raw_s += t2 - t1
    calls = loops * len(cases)
    return mem_s / calls, raw_s / calls


def bench(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    cases = [make_case(rng, args.lists, args.depth, args.pool) for _ in range(args.cases)]
    hit_cases = [as_hits(c) for c in cases]
    collection = Collection.create()
    out: dict[str, Any] = {}
    try:
        for name, (entry, raw) in FUSIONS.items():
            try:
                fusion = collection.build_fusion(entry)
            except memcore.UnknownComponentError as exc:
                out[name] = {"skipped": True, "reason": str(exc).splitlines()[0]}
                log(f"{name}: skipped ({exc})")
                continue
            agree = 0
            for pairs, hits in zip(cases, hit_cases):
                mine = [(h.id, h.score) for h in fusion.fuse(hits, args.k)]
                theirs = raw(pairs, args.k)
                agree += [m[0] for m in mine] == [t[0] for t in theirs] and np.allclose([m[1] for m in mine], [t[1] for t in theirs], rtol=1e-12, atol=1e-12)
            mem_runs, raw_runs = [], []
            for _ in range(args.repeat):
                m, r = timed_pair(fusion.fuse, raw, hit_cases, cases, args.k, args.loops)
                mem_runs.append(m)
                raw_runs.append(r)
            mem, rw = float(np.median(mem_runs)), float(np.median(raw_runs))
            out[name] = {
                "settings": entry,
                "memcore_us_per_call": round(mem * 1e6, 2),
                "raw_us_per_call": round(rw * 1e6, 2),
                "ratio_raw_over_memcore": round(rw / mem, 3),
                "memcore_runs_us": [round(x * 1e6, 2) for x in mem_runs],
                "raw_runs_us": [round(x * 1e6, 2) for x in raw_runs],
                "same_result_cases": f"{agree}/{len(cases)}",
            }
            log(f"{name}: memcore {mem * 1e6:.1f} us, raw {rw * 1e6:.1f} us, ratio raw/memcore {rw / mem:.2f}, same {agree}/{len(cases)}")
    finally:
        collection.close()
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--lists", type=int, default=3, help="ranked lists per fusion call")
    p.add_argument("--depth", type=int, default=None, help="hits per list; default 100, --quick 50")
    p.add_argument("--pool", type=int, default=None, help="distinct ids the lists draw from; default 2 x depth")
    p.add_argument("--cases", type=int, default=None, help="distinct random inputs; default 200, --quick 50")
    p.add_argument("--loops", type=int, default=None, help="passes over the cases per timed run; default 5, --quick 2")
    p.add_argument("--repeat", type=int, default=3, help="timed runs (memcore and raw interleaved call by call); medians are reported")
    p.add_argument("--k", type=int, default=10, help="fused hits returned per call")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--quick", action="store_true", help="small smoke run")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    args = p.parse_args(argv)
    for name, (full, quick) in {"depth": (100, 50), "cases": (200, 50), "loops": (5, 2)}.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.pool is None:
        args.pool = 2 * args.depth
    if min(args.lists, args.depth, args.pool, args.cases, args.loops, args.repeat, args.k) <= 0:
        p.error("sizes must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = header("bench_fusion", args, argv=argv)
    result["ratio_note"] = "raw seconds per call / memcore seconds per call, medians of --repeat runs interleaving the two call by call (1.0 = no overhead)"
    started = time.perf_counter()
    result["fusions"] = bench(args)
    finish_environment(result["environment"])
    result["seconds"] = round(time.perf_counter() - started, 2)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
