#!/usr/bin/env python
"""Pipeline presets on BEIR SciFact: quality per preset / variant, and the pipeline overhead.

Uses the precomputed all-MiniLM-L6-v2 vectors of ``../shared/data/scifact/minilm`` (no
model is loaded): the corpus goes into an in-memory collection with a caller-given 384-d
space ``default``, an ``exact`` cosine index ``vector`` and a ``bm25`` index ``bm25``
(memcore-bm25; stopwords en, English stemmer, k1 1.2, b 0.75), and every query carries
its precomputed vector. Each variant (a preset, a preset with overrides, or a stage list)
runs every judged query of the split at depth 100 through ``Pipeline.run`` and is scored
with :mod:`memcore.eval.metrics` (nDCG@10, recall@100, MRR@10).

Overhead (the issue's target: full hybrid query time <= 1.2 x the sum of its recall
stages' times): the ``advanced`` preset is run with ``Pipeline.run_context`` and each
query's total time is compared with the time its two recall stages took inside the same
run (from ``ctx.trace``); medians over ``--repeat`` passes. With precomputed query vectors
the recall stages are only index searches (the worst case for the ratio); with
``--live-query-embedding`` the vector recall embeds each query with MiniLM, as a real
application and ``memcore eval beir`` do.

    python bench/bench_presets.py --quick                 # 200 queries
    python bench/bench_presets.py                         # all 809 train queries
    python bench/bench_presets.py --variants all             # every tuning variant
    python bench/bench_presets.py --variants advanced,rrf20 --repeat 5

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from _common import log, use_checkout

use_checkout("fifo-kv")

from _scifact import DATA, hybrid_memory  # noqa: E402

from memcore.eval import evaluate_run  # noqa: E402
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore import Query


def _single(index: str, kw: float | None = None) -> list[dict[str, Any]]:
    """One recall stage (2 x k deep when re-ranked), an optional keyword rerank, limit."""
    if kw is None:
        return [{"kind": "recall", "index": index}, {"kind": "limit"}]
    return [{"kind": "recall", "index": index, "over_fetch": 2.0}, {"kind": "rerank", "keyword_weight": kw}, {"kind": "limit"}]


def _hybrid(fusion: dict[str, Any], kw: float = 0.0, depth: float | None = None) -> dict[str, Any]:
    """The advanced preset with this fusion, keyword weight (0 = no rerank signal) and
    recall depth (over_fetch; None keeps the preset's 2)."""
    overrides: dict[str, Any] = {"fuse": {"fusion": fusion}, "rerank": {"keyword_weight": kw}}
    if depth is not None:
        overrides.update({"vector": {"over_fetch": depth}, "bm25": {"over_fetch": depth}})
    return {"preset": "advanced", "overrides": overrides}


def RRF(k: float, **more: Any) -> dict[str, Any]:
    """An ``rrf`` fusion table."""
    return {"kind": "rrf", "k": k, **more}


WEIGHTED_MINMAX = {"kind": "weighted", "normalization": "minmax"}

VARIANTS: dict[str, Any] = {
    # the shipped presets, as they are
    "basic": "basic",
    "advanced": "advanced",
    "semantic": "semantic",
    # single retrievers: no rerank, or a keyword rerank of weight w (dense_kw0.5 = basic on `vector`)
    "dense": _single("vector"),
    **{f"dense_kw{w}": _single("vector", w) for w in (0.1, 0.2, 0.3, 0.5)},
    "bm25": _single("bm25"),
    **{f"bm25_kw{w}": _single("bm25", w) for w in (0.3, 0.5)},
    # hybrids: <fusion>[_kw<w>][_depth<d>]; without _kw the rerank has no signal
    **{f"rrf{k}": _hybrid(RRF(k)) for k in (5, 10, 20, 30, 60)},
    **{f"rrf{k}_kw{w}": _hybrid(RRF(k), w) for k in (10, 20, 60) for w in (0.1, 0.2, 0.3, 0.5)},
    "rrf10_depth1": _hybrid(RRF(10), depth=1.0),
    "rrf10_kw0.3_depth1": _hybrid(RRF(10), 0.3, 1.0),
    "rrf10_kw0.3_depth3": _hybrid(RRF(10), 0.3, 3.0),
    "rrf60_depth1": _hybrid(RRF(60), depth=1.0),
    "rrf20_bm25w1.5": _hybrid(RRF(20, weights={"bm25": 1.5})),
    "rrf10_bm25w1.3_kw0.1": _hybrid(RRF(10, weights={"bm25": 1.3}), 0.1),
    "dbsf": _hybrid({"kind": "dbsf"}),
    "dbsf_kw0.3": _hybrid({"kind": "dbsf"}, 0.3),
    "dbsf_bm25w1.5": _hybrid({"kind": "dbsf", "weights": {"bm25": 1.5}}),
    "weighted_minmax": _hybrid(WEIGHTED_MINMAX),
    "weighted_minmax_kw0.3": _hybrid(WEIGHTED_MINMAX, 0.3),
    "weighted_zscore": _hybrid({"kind": "weighted", "normalization": "zscore"}),
    # semantic: the preset has keyword_weight 0.5 and MMR lambda 0.7
    "semantic_kw0": {"preset": "semantic", "overrides": {"rerank": {"keyword_weight": 0.0}}},
    "semantic_kw0.3": {"preset": "semantic", "overrides": {"rerank": {"keyword_weight": 0.3}}},
    "semantic_mmr0.9": {"preset": "semantic", "overrides": {"mmr": {"lambda": 0.9}}},
    "semantic_mmr0.5": {"preset": "semantic", "overrides": {"mmr": {"lambda": 0.5}}},
    "semantic_no_mmr": {"preset": "semantic", "overrides": {"mmr": False}},
}
"""Named pipeline specs: a preset, a preset with overrides, or a stage list."""


DEFAULT_VARIANTS = (
    "dense",
    "bm25",
    "basic",
    "bm25_kw0.5",
    "rrf60",
    "rrf10",
    "advanced",
    "weighted_minmax_kw0.3",
    "dbsf",
    "semantic",
    "semantic_kw0",
    "semantic_mmr0.9",
    "semantic_no_mmr",
)
"""The variants documented in docs/concepts.md (``advanced`` is examples/beir_hybrid.toml)."""


def evaluate(memory, pipeline: Pipeline, queries, qrels) -> dict[str, float]:
    run = {}
    for qid, text, vec in queries:
        hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": vec}, k=100), with_records=False)
        run[qid] = {h.id: h.score for h in hits}
    return evaluate_run(run, {q: qrels[q] for q, _, _ in queries}, k=10, recall_k=100)


def overhead(memory, registry, queries, repeat: int, k: int = 100, live: bool = False, spec: Any = "advanced") -> dict[str, Any]:
    """A hybrid pipeline's (``spec``, default the advanced preset) query time against the time of its two recall stages, at depth k.

    ``ratio_pipeline_over_recalls_median``: per pass, summed pipeline time / summed recall
    time, median over passes; ``per_query_ratio_median``: the median over every query of
    every pass of that query's own ratio (robust to a few slow searches on a loaded machine).
    """
    pipeline = Pipeline.from_config(spec, registry)
    pipeline.check(memory.collection)
    ratios, totals, recalls, per_query = [], [], [], []
    stages: dict[str, list[float]] = {}
    for _ in range(repeat):
        total = recall = 0.0
        per_stage: dict[str, float] = {}
        for _, text, vec in queries:
            q = Query(text=text, k=k) if live else Query(text=text, vectors={"default": vec}, k=k)
            started = time.perf_counter()
            ctx = pipeline.run_context(memory.collection, q)
            hits = ctx.current[: q.k]
            seconds = time.perf_counter() - started
            recall_seconds = sum(t["seconds"] for t in ctx.trace if t["stage"] in ("vector", "bm25"))
            total += seconds
            recall += recall_seconds
            per_query.append(seconds / recall_seconds)
            for t in ctx.trace:
                per_stage[t["stage"]] = per_stage.get(t["stage"], 0.0) + t["seconds"]
            assert hits
        totals.append(total)
        recalls.append(recall)
        ratios.append(total / recall)
        for name, seconds in per_stage.items():
            stages.setdefault(name, []).append(seconds)
    return {
        "k": k,
        "stage_ms_per_query_median": {name: 1000 * statistics.median(v) / len(queries) for name, v in stages.items()},
        "pipeline_seconds_median": statistics.median(totals),
        "recall_stages_seconds_median": statistics.median(recalls),
        "ratio_pipeline_over_recalls_median": statistics.median(ratios),
        "per_query_ratio_median": statistics.median(per_query),
        "ratios": ratios,
        "queries": len(queries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="train")
    parser.add_argument("--queries", type=int, default=None, help="Use only the first N judged queries.")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"Comma-separated variant names, or 'all': {', '.join(VARIANTS)}.")
    parser.add_argument("--repeat", type=int, default=3, help="Passes of the overhead measurement.")
    parser.add_argument("--quick", action="store_true", help="200 queries, 1 overhead pass.")
    parser.add_argument(
        "--overhead-variant", default="advanced", help="The variant whose overhead is measured (its recall stages must be named vector and bm25)."
    )
    parser.add_argument("--overhead-k", default="10,100", help="Comma-separated query depths of the overhead measurement.")
    parser.add_argument(
        "--live-query-embedding",
        action="store_true",
        help="Overhead only: embed each query with MiniLM inside the vector recall (memcore-embed), as `memcore eval beir` does.",
    )
    args = parser.parse_args()
    if not DATA.is_dir():
        print(json.dumps({"skipped": f"no SciFact data at {DATA}"}))
        return
    if args.quick:
        args.queries = args.queries or 200
        args.repeat = 1
    load_start = os.getloadavg()
    registry = get_registry()
    log("building the collection (precomputed MiniLM vectors + bm25)...")
    started = time.perf_counter()
    memory, queries, qrels = hybrid_memory(args.split, live=args.live_query_embedding)
    build_seconds = time.perf_counter() - started
    queries = queries[: args.queries] if args.queries else queries
    results: dict[str, Any] = {}
    names = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    for name in names:
        pipeline = Pipeline.from_config(VARIANTS[name], registry)
        pipeline.check(memory.collection)
        t0 = time.perf_counter()
        metrics = evaluate(memory, pipeline, queries, qrels)
        metrics["qps"] = len(queries) / (time.perf_counter() - t0)
        results[name] = {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}
        log(f"{name:<18} ndcg@10 {metrics['ndcg@10']:.4f}  recall@100 {metrics['recall@100']:.4f}  mrr@10 {metrics['mrr@10']:.4f}")
    log("overhead of the advanced preset...")
    if args.live_query_embedding:
        memory.query("warm up the model", k=1)
    over = {
        f"k={k}": overhead(memory, registry, queries, args.repeat, k=int(k), live=args.live_query_embedding, spec=VARIANTS[args.overhead_variant])
        for k in args.overhead_k.split(",")
    }
    over["live_query_embedding"] = args.live_query_embedding
    over["variant"] = args.overhead_variant
    memory.close()
    print(
        json.dumps(
            {
                "split": args.split,
                "queries": len(queries),
                "build_seconds": round(build_seconds, 2),
                "variants": results,
                "overhead": over,
                "variant_settings": {k: VARIANTS[k] for k in names},
                "loadavg_start": load_start,
                "loadavg_end": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
