#!/usr/bin/env python
"""MMR on BEIR SciFact: nDCG@10 change vs intra-list diversity gain at lambda 0.5 / 0.7 / 0.9.

Reuses :mod:`_scifact` (the in-memory collection of ``bench_presets.py``, built from the
precomputed all-MiniLM-L6-v2 vectors of ``../shared/data/scifact/minilm``, ``exact``
cosine index ``vector``). ``tests/test_docs_beir.py`` recomputes the table of
docs/plugins/mmr.md with :func:`settings` and :func:`run_setting`. Settings, each run through ``Pipeline.run`` with query k = 10:

- ``no_mmr``: recall vector (depth 100) -> limit
- ``mmr_L``:  recall vector (depth 100) -> mmr (lambda L, top_n 10, space default,
  relevance "similarity" = cosine(query, doc), the plugin default) -> limit

Per setting: nDCG@10 and recall@10 (:mod:`memcore.eval.metrics`), and the intra-list
diversity of the top 10 = mean over the 45 pairs of returned docs of (1 - cosine) of their
MiniLM vectors, averaged over queries; plus the deltas vs ``no_mmr``.

    python bench/bench_mmr_tradeoff.py --quick     # 200 queries
    python bench/bench_mmr_tradeoff.py             # all 809 train queries

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

use_checkout("mmr", "fifo-kv")

from _scifact import DATA, hybrid_memory  # noqa: E402
from memcore.eval import evaluate_run  # noqa: E402
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore import Query

K = 10
DEPTH = 100
LAMBDAS = (0.5, 0.7, 0.9)


def settings() -> dict[str, list[dict]]:
    recall = {"kind": "recall", "index": "vector", "k": DEPTH}
    out = {"no_mmr": [recall, {"kind": "limit"}]}
    for lam in LAMBDAS:
        out[f"mmr_{lam}"] = [recall, {"kind": "mmr", "lambda": lam, "top_n": K, "space": "default"}, {"kind": "limit"}]
    return out


def intra_list_diversity(ids: list[str], unit: np.ndarray, row: dict[str, int]) -> float:
    """Mean (1 - cosine) over the pairs of ``ids`` (unit-norm rows of ``unit``)."""
    m = unit[[row[i] for i in ids]]
    n = len(ids)
    if n < 2:
        return 0.0
    sims = m @ m.T
    iu = np.triu_indices(n, k=1)
    return float(np.mean(1.0 - sims[iu]))


def run_setting(memory, pipeline: Pipeline, queries, qrels, unit, row) -> dict[str, float]:
    run, ild, sizes = {}, [], []
    t0 = time.perf_counter()
    for qid, text, vec in queries:
        hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": vec}, k=K), with_records=False)
        ids = [h.id for h in hits][:K]
        # scores by rank, so the metrics see exactly the pipeline's order
        run[qid] = {d: float(K - r) for r, d in enumerate(ids)}
        ild.append(intra_list_diversity(ids, unit, row))
        sizes.append(len(ids))
    seconds = time.perf_counter() - t0
    m = evaluate_run(run, {q: qrels[q] for q, _, _ in queries}, k=K, recall_k=K)
    return {
        "ndcg@10": m["ndcg@10"],
        "recall@10": m["recall@10"],
        "ild@10": float(np.mean(ild)),
        "mean_hits": float(np.mean(sizes)),
        "qps": len(queries) / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="train")
    parser.add_argument("--queries", type=int, default=None, help="Use only the first N judged queries.")
    parser.add_argument("--quick", action="store_true", help="200 queries.")
    args = parser.parse_args()
    if args.quick:
        args.queries = args.queries or 200
    result = header("mmr_tradeoff", args)
    if not (DATA / "minilm" / "corpus.npy").is_file():
        result["skipped"] = f"no SciFact data with precomputed MiniLM vectors at {DATA}"
        log(f"skipped: {result['skipped']}")
        emit(result)
        return
    registry = get_registry()
    log("building the collection (precomputed MiniLM vectors)...")
    started = time.perf_counter()
    memory, queries, qrels = hybrid_memory(args.split)
    build_seconds = time.perf_counter() - started
    queries = queries[: args.queries] if args.queries else queries

    ids = json.loads((DATA / "minilm" / "corpus_ids.json").read_text())
    vectors = np.load(DATA / "minilm" / "corpus.npy", allow_pickle=False).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    row = {d: i for i, d in enumerate(ids)}

    configs = settings()
    results: dict[str, dict[str, float]] = {}
    for name, stages in configs.items():
        pipeline = Pipeline.from_config(stages, registry)
        pipeline.check(memory.collection)
        results[name] = run_setting(memory, pipeline, queries, qrels, unit, row)
        r = results[name]
        log(f"{name:<8} ndcg@10 {r['ndcg@10']:.4f}  recall@10 {r['recall@10']:.4f}  ild@10 {r['ild@10']:.4f}")
    memory.close()

    base = results["no_mmr"]
    for name, r in results.items():
        if name != "no_mmr":
            r["delta_ndcg@10"] = r["ndcg@10"] - base["ndcg@10"]
            r["delta_recall@10"] = r["recall@10"] - base["recall@10"]
            r["delta_ild@10"] = r["ild@10"] - base["ild@10"]
            r["delta_ndcg@10_rel"] = r["delta_ndcg@10"] / base["ndcg@10"] if base["ndcg@10"] else 0.0
            r["delta_ild@10_rel"] = r["delta_ild@10"] / base["ild@10"] if base["ild@10"] else 0.0
    result.update(
        {
            "split": args.split,
            "queries": len(queries),
            "k": K,
            "recall_depth": DEPTH,
            "build_seconds": round(build_seconds, 2),
            "diversity": "ild@10 = mean over the 45 pairs of the top 10 of (1 - cosine) of the MiniLM doc vectors, averaged over queries",
            "settings": {n: {k: round(v, 4) for k, v in r.items()} for n, r in results.items()},
            "pipelines": configs,
        }
    )
    finish_environment(result["environment"])
    emit(result)


if __name__ == "__main__":
    main()
