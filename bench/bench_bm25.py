#!/usr/bin/env python
"""The ``bm25`` index (memcore-bm25) against raw bm25s, in the same process and run.

Two parts (``--parts scifact,interleaved``), reported as sections of ONE JSON object on
stdout (progress on stderr):

scifact      BEIR SciFact train (``../shared/data/scifact`` beside the repository; the
             part is skipped, with the reason, when absent). Text = title + " " + text;
             English stopwords + PyStemmer English stemmer, k1=1.2, b=0.75 on both sides.
             - nDCG@10 (BEIR: graded qrels, log2 discount, ideal from the qrels) of raw
               bm25s (``bm25s.tokenize`` + ``BM25.index`` + ``retrieve``) and of memcore's
               ``BM25Index.search`` after a merge; target: equal within 0.002.
             - QPS one query at a time (raw: tokenize + retrieve(k=10); memcore:
               ``Index.search``) and batched (raw: one ``retrieve`` over all queries;
               memcore: ``Index.search_batch``), ``--repeats`` alternating runs, medians;
               target: memcore/raw >= 0.9.
             - between merges: 90% of the corpus merged, the other 10% inserted one by one,
               1% deleted; nDCG@10 and top-10 overlap against a fresh bm25s index over the
               same live documents (docs/architecture.md §9: within 0.002, overlap >= 0.95).
interleaved  ``--n-base`` synthetic Zipfian documents, then ``--ops`` x (insert one
             document, then query). memcore: per-op latency (insert + search) p50/p95/max.
             Full-rebuild strategy: after each insert ``BM25.index`` over all (already
             tokenized) documents, then retrieve; it is timed for ``--rebuild-samples`` ops
             and extrapolated to ``--ops`` (the JSON says so). The merge memcore does every
             ``merge_threshold`` inserts is timed apart and amortised.

Run from the repository root (with memcore-bm25 installed)::

    python bench/bench_bm25.py --quick              # ~10 s on 2 cores
    python bench/bench_bm25.py                      # 100k base documents, 30-75 s
    python bench/bench_bm25.py --parts scifact --repeats 5

Never run as a test: timings belong here (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("bm25")

from memcore.plugin import IndexContext
from memcore import Query, Record

from memcore_bm25 import BM25Config, BM25Index  # noqa: E402

SCIFACT = SHARED / "data" / "scifact"


# -- metrics --------------------------------------------------------------------------------


def ndcg_at_k(ranking: Sequence[str], qrels: dict[str, int], k: int = 10) -> float:
    """BEIR / trec_eval nDCG@k: gain = graded relevance, discount log2(rank + 1), ideal from qrels."""
    dcg = sum(qrels.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted(qrels.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def mean_ndcg(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], k: int = 10) -> float:
    """Mean nDCG@k over the queries that have judgements."""
    return float(np.mean([ndcg_at_k(rankings.get(q, []), rel, k) for q, rel in qrels.items()]))


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/max/mean of latencies in milliseconds."""
    a = np.asarray(ms, dtype=np.float64)
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 4),
        "p95_ms": round(float(np.percentile(a, 95)), 4),
        "max_ms": round(float(a.max()), 4),
        "mean_ms": round(float(a.mean()), 4),
    }


def alternate(runs: int, **fns: Callable[[], float]) -> dict[str, list[float]]:
    """Run each timing function ``runs`` times, interleaved, to spread machine noise evenly."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            out[name].append(fn())
    return out


# -- the two sides --------------------------------------------------------------------------


class Raw:
    """Raw bm25s, the documented recipe."""

    def __init__(self, texts: Sequence[str]):
        import bm25s
        import Stemmer

        self.bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        self.retriever.index(self.tokenize(texts), show_progress=False)

    def tokenize(self, texts: Sequence[str]):
        return self.bm25s.tokenize(list(texts), stopwords="en", stemmer=self.stemmer, show_progress=False)

    def search(self, text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.retriever.scores["num_docs"])
        docs, scores = self.retriever.retrieve(self.tokenize([text]), k=k, show_progress=False)
        return docs[0], scores[0]

    def search_batch(self, texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.retriever.scores["num_docs"])
        return self.retriever.retrieve(self.tokenize(texts), k=k, show_progress=False)


def raw_ranking(raw: Raw, ids: Sequence[str], text: str, k: int) -> list[str]:
    docs, scores = raw.search(text, k)
    return [ids[d] for d, s in zip(docs.tolist(), scores.tolist()) if s > 0]


def memcore_index(texts: dict[str, str], merge: bool = True, **options) -> BM25Index:
    index = BM25Index(BM25Config(**options), IndexContext("bm25"))
    index.add([Record.create(t, id=i) for i, t in texts.items()])
    if merge:
        index.merge()
    return index


# -- part 1: SciFact -------------------------------------------------------------------------


def load_scifact(directory: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    corpus = {}
    with open(directory / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = (doc.get("title", "") + " " + doc.get("text", "")).strip()
    queries = {}
    with open(directory / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(directory / "qrels" / "train.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {q: t for q, t in queries.items() if q in qrels}
    return corpus, queries, qrels


def part_scifact(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(args.scifact)
    if not (directory / "corpus.jsonl").is_file():
        return {"skipped": f"SciFact not found at {directory} (the shared folder beside the repository)"}
    corpus, queries, qrels = load_scifact(directory)
    ids = list(corpus)
    qids = list(queries)
    if args.quick:
        qids = qids[: max(50, len(qids) // 4)]
    texts = [queries[q] for q in qids]
    log(f"scifact: {len(corpus)} documents, {len(qids)} queries")

    t = time.perf_counter()
    raw = Raw(list(corpus.values()))
    raw_build = time.perf_counter() - t
    t = time.perf_counter()
    index = memcore_index(corpus)
    memcore_build = time.perf_counter() - t

    raw_rank = {q: raw_ranking(raw, ids, queries[q], 10) for q in qids}
    ours_rank = {q: [h.id for h in index.search(Query(text=queries[q]), 10)] for q in qids}
    judged = {q: qrels[q] for q in qids}
    raw_ndcg, ours_ndcg = mean_ndcg(raw_rank, judged), mean_ndcg(ours_rank, judged)
    same_top10 = sum(raw_rank[q] == ours_rank[q] for q in qids)
    log(f"scifact: nDCG@10 raw {raw_ndcg:.4f} memcore {ours_ndcg:.4f}")

    query_objs = [Query(text=t) for t in texts]

    def raw_one() -> float:
        t0 = time.perf_counter()
        for text in texts:
            raw.search(text, 10)
        return len(texts) / (time.perf_counter() - t0)

    def ours_one() -> float:
        t0 = time.perf_counter()
        for q in query_objs:
            index.search(q, 10)
        return len(texts) / (time.perf_counter() - t0)

    def raw_batch() -> float:
        t0 = time.perf_counter()
        raw.search_batch(texts, 10)
        return len(texts) / (time.perf_counter() - t0)

    def ours_batch() -> float:
        t0 = time.perf_counter()
        index.search_batch(query_objs, 10)
        return len(texts) / (time.perf_counter() - t0)

    raw_one(), ours_one()  # warm-up
    qps = alternate(args.repeats, raw_one=raw_one, memcore_one=ours_one, raw_batch=raw_batch, memcore_batch=ours_batch)
    med = {name: statistics.median(v) for name, v in qps.items()}
    log(
        f"scifact: QPS one-by-one raw {med['raw_one']:.0f} memcore {med['memcore_one']:.0f}; batch raw {med['raw_batch']:.0f} memcore {med['memcore_batch']:.0f}"
    )

    between = scifact_between_merges(corpus, queries, qrels, qids, args)
    return {
        "documents": len(corpus),
        "queries": len(qids),
        "recipe": "title + ' ' + text; stopwords='en'; PyStemmer english; k1=1.2 b=0.75 lucene",
        "ndcg@10": {
            "raw_bm25s": round(raw_ndcg, 4),
            "memcore": round(ours_ndcg, 4),
            "abs_diff": round(abs(raw_ndcg - ours_ndcg), 5),
            "target_abs_diff": 0.002,
            "reference_raw_train": 0.696,
        },
        "identical_top10_rankings": f"{same_top10}/{len(qids)}",
        "build_seconds": {"raw_bm25s": round(raw_build, 3), "memcore_add_and_merge": round(memcore_build, 3)},
        "qps": {
            "runs": {name: [round(x, 1) for x in v] for name, v in qps.items()},
            "median": {name: round(v, 1) for name, v in med.items()},
            "ratio_one_by_one": round(med["memcore_one"] / med["raw_one"], 3),
            "ratio_batched": round(med["memcore_batch"] / med["raw_batch"], 3),
            "target_ratio": 0.9,
        },
        "between_merges": between,
    }


def scifact_between_merges(corpus, queries, qrels, qids, args) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    ids = list(corpus)
    order = rng.permutation(len(ids))
    cut = int(len(ids) * 0.9)
    base = {ids[i]: corpus[ids[i]] for i in order[:cut]}
    later = [ids[i] for i in order[cut:]]
    index = memcore_index(base)
    t = time.perf_counter()
    for rid in later:  # one at a time, as an agent inserts
        index.add([Record.create(corpus[rid], id=rid)])
    insert_ms = (time.perf_counter() - t) / len(later) * 1e3
    gone = [str(x) for x in rng.choice(ids, size=len(ids) // 100, replace=False)]
    index.remove(gone)
    live = {rid: corpus[rid] for rid in ids if rid not in set(gone)}
    assert len(index) == len(live)
    stats = index.stats()
    raw = Raw(list(live.values()))
    live_ids = list(live)
    judged = {q: {d: g for d, g in qrels[q].items() if d in live} for q in qids}
    judged = {q: r for q, r in judged.items() if r}
    ours = {q: [h.id for h in index.search(Query(text=queries[q]), 10)] for q in judged}
    theirs = {q: raw_ranking(raw, live_ids, queries[q], 10) for q in judged}
    overlap = float(np.mean([len(set(ours[q]) & set(theirs[q])) / max(1, len(theirs[q])) for q in judged]))
    a, b = mean_ndcg(ours, judged), mean_ndcg(theirs, judged)
    log(f"scifact between merges: nDCG@10 memcore {a:.4f} fresh bm25s {b:.4f}, overlap {overlap:.4f}, merges {index.merges}")
    return {
        "setup": f"{cut} documents merged, {len(later)} inserted one by one, {len(gone)} deleted, no merge in between",
        "segments": {"base": stats["base"], "fresh": stats["fresh"], "pending": stats["pending"], "merges": stats["merges"]},
        "ndcg@10_memcore": round(a, 4),
        "ndcg@10_fresh_bm25s": round(b, 4),
        "abs_diff": round(abs(a - b), 5),
        "top10_overlap": round(overlap, 4),
        "targets": {"abs_diff": 0.002, "top10_overlap": 0.95},
        "insert_one_ms_mean": round(insert_ms, 4),
    }


# -- part 2: interleaved inserts and queries ---------------------------------------------------


def zipf_corpus(n: int, seed: int, vocab: int = 50_000) -> list[str]:
    """``n`` texts of 20-119 pseudo-words drawn from a Zipf(1.07) vocabulary."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}q" for i in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1) ** 1.07
    p /= p.sum()
    lengths = rng.integers(20, 120, size=n)
    flat = rng.choice(vocab, size=int(lengths.sum()), p=p)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(words[flat[offsets[i] : offsets[i + 1]]]) for i in range(n)]


def part_interleaved(args: argparse.Namespace) -> dict[str, Any]:
    import bm25s
    import Stemmer

    n, ops = args.n_base, args.ops
    log(f"interleaved: generating {n + ops} documents")
    texts = zipf_corpus(n + ops, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    query_texts = [" ".join(rng.choice(texts[int(rng.integers(n + i + 1))].split(), size=4)) for i in range(ops)]
    base = {f"d{i}": texts[i] for i in range(n)}
    new_ids = [f"d{i}" for i in range(n, n + ops)]

    log(f"interleaved: memcore base of {n}")
    t = time.perf_counter()
    index = memcore_index(base)
    memcore_build = time.perf_counter() - t
    insert_ms, search_ms, op_ms = [], [], []
    merges_before = index.merges
    for i, rid in enumerate(new_ids):
        record = Record.create(texts[n + i], id=rid)
        query = Query(text=query_texts[i])
        t0 = time.perf_counter()
        index.add([record])
        t1 = time.perf_counter()
        index.search(query, 10)
        t2 = time.perf_counter()
        insert_ms.append((t1 - t0) * 1e3)
        search_ms.append((t2 - t1) * 1e3)
        op_ms.append((t2 - t0) * 1e3)
    merges_during = index.merges - merges_before
    pending = index.pending
    t = time.perf_counter()
    index.merge()
    merge_s = time.perf_counter() - t
    threshold = index.merge_threshold
    log(f"interleaved: memcore p50 {np.percentile(op_ms, 50):.3f} ms/op, merge {merge_s:.2f} s")

    log(f"interleaved: full-rebuild strategy, {args.rebuild_samples} sampled ops")
    stemmer = Stemmer.Stemmer("english")
    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en", stemmer=stemmer)
    t = time.perf_counter()
    token_ids = tokenizer.tokenize(list(base.values()), update_vocab=True, show_progress=False)
    tokenize_base_s = time.perf_counter() - t
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    t = time.perf_counter()
    retriever.index((token_ids, dict(tokenizer.get_vocab_dict())), show_progress=False)
    raw_build = time.perf_counter() - t
    rebuild_ms, rebuild_insert_ms, rebuild_search_ms = [], [], []
    for i in range(args.rebuild_samples):
        t0 = time.perf_counter()
        token_ids += tokenizer.tokenize([texts[n + i]], update_vocab=True, show_progress=False)
        retriever = bm25s.BM25(k1=1.2, b=0.75)
        retriever.index((token_ids, dict(tokenizer.get_vocab_dict())), create_empty_token=False, show_progress=False)
        t1 = time.perf_counter()
        q = tokenizer.tokenize([query_texts[i]], update_vocab=False, show_progress=False, allow_empty=False)[0]
        if q:
            retriever.get_scores_from_ids(q)
            retriever.retrieve([q], k=10, show_progress=False)
        t2 = time.perf_counter()
        rebuild_insert_ms.append((t1 - t0) * 1e3)
        rebuild_search_ms.append((t2 - t1) * 1e3)
        rebuild_ms.append((t2 - t0) * 1e3)
    per_op = percentiles(rebuild_ms)
    ours = percentiles(op_ms)
    amortised = merge_s * 1e3 / threshold
    return {
        "base_documents": n,
        "ops": ops,
        "corpus": "synthetic: 20-119 pseudo-words per text, Zipf(1.07) over 50,000 words; queries: 4 words of a random live text",
        "memcore": {
            "build_seconds_add_and_merge": round(memcore_build, 3),
            "op_insert_then_search": ours,
            "insert": percentiles(insert_ms),
            "search": percentiles(search_ms),
            "merges_during_ops": merges_during,
            "pending_after_ops": pending,
            "merge_threshold": threshold,
            "merge_seconds": round(merge_s, 3),
            "merge_amortised_ms_per_insert": round(amortised, 4),
            "note": "a merge runs on the first search after merge_threshold changes; its time is reported apart and amortised over the threshold",
        },
        "full_rebuild": {
            "strategy": "tokenized corpus kept; after each insert tokenize the new text, BM25.index over all token lists, then retrieve",
            "tokenize_base_seconds": round(tokenize_base_s, 3),
            "index_base_seconds": round(raw_build, 3),
            "measured_ops": args.rebuild_samples,
            "extrapolated": args.rebuild_samples < ops,
            "op_insert_then_search": per_op,
            "insert_rebuild": percentiles(rebuild_insert_ms),
            "search": percentiles(rebuild_search_ms),
            "estimated_total_seconds_for_ops": round(per_op["mean_ms"] * ops / 1e3, 1),
        },
        "memcore_total_seconds_for_ops": round(sum(op_ms) / 1e3 + merge_s * ops / threshold, 3),
        "speedup_p50": round(per_op["p50_ms"] / ours["p50_ms"], 1),
        "speedup_p95": round(per_op["p95_ms"] / ours["p95_ms"], 1),
    }


# -- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small run: 20k base documents, 300 ops, a quarter of the queries")
    parser.add_argument("--parts", default="scifact,interleaved", help="comma-separated: scifact, interleaved")
    parser.add_argument("--n-base", type=int, default=None, help="base documents of the interleaved part (default 100000; quick 20000)")
    parser.add_argument("--ops", type=int, default=None, help="insert+query operations (default 1000; quick 300)")
    parser.add_argument("--rebuild-samples", type=int, default=5, help="full-rebuild ops actually timed (then extrapolated)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating QPS runs (medians reported)")
    parser.add_argument("--scifact", default=str(SCIFACT), help="BEIR SciFact folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.n_base = args.n_base or (20_000 if args.quick else 100_000)
    args.ops = args.ops or (300 if args.quick else 1000)
    args.rebuild_samples = min(args.rebuild_samples, args.ops)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"scifact", "interleaved"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")

    import bm25s

    started = time.perf_counter()
    out = header("bm25", args, argv=argv, bm25s=bm25s.__version__)
    if "scifact" in parts:
        out["scifact"] = part_scifact(args)
    if "interleaved" in parts:
        out["interleaved"] = part_interleaved(args)
    finish_environment(out["environment"])
    out["seconds"] = round(time.perf_counter() - started, 1)
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
