#!/usr/bin/env python
"""What the colbert residual codecs lose: exhaustive MaxSim over decompressed vectors vs fp32.

One k-means (the index's sampling and settings), then for each ``--transforms`` x
``--nbits`` codec (``none``: ColBERTv2's buckets; ``pca``: the transform coder of
``residual_transform = "pca"``; ``pca-vq``: its layout with a k-means codebook per byte): train it on the index's held-out vectors, compress every
token, and score every query exhaustively (MaxSim over all passages) against the
decompressed vectors. Recall@10 against exhaustive fp32 MaxSim isolates the compression
(PLAID over the same compressed vectors finds the same top 10: bench_colbert.py's
``exhaustive_compressed``). Also: mean cosine of decompressed to original token vectors,
bytes per token, codec training and compression seconds, nDCG@10.

Token vectors come from bench_colbert.py's cache (``--cache``; missing texts are encoded).
The exhaustive fp32 top-k of each query is cached in ``--cache`` too, as ``.npy`` keyed by
the token cache folder, the documents, the queries and k, so later runs skip it.
Batched: every query's tokens against a block of document tokens in one matrix product.

    OMP_NUM_THREADS=1 python bench/bench_colbert_codecs.py --data ../shared/data/scifact --docs 1790 --queries 100 --ncentroids 4096

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from _common import emit, finish_environment, header, log, use_checkout

use_checkout("colbert", "embed", "fifo-kv")

import memcore  # noqa: E402
from memcore.eval import evaluate_run  # noqa: E402
from memcore_colbert import ColbertIndexConfig  # noqa: E402
from memcore_colbert.codec import nearest_centroids  # noqa: E402
from memcore_colbert.train import kmeans_centroids, sample_for_training, train_codec  # noqa: E402

from bench_colbert import DATA, TokenCache, all_maxsim, doc_text, fp32_reference, load_selection, topk  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=None, help="Documents (as bench_colbert.py; default: all 5,183).")
    parser.add_argument("--queries", type=int, default=None, help="First N judged train queries (default: all).")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--split", default="train")
    parser.add_argument("--nbits", type=int, nargs="+", default=[1, 2, 4], choices=(1, 2, 4))
    parser.add_argument("--transforms", nargs="+", default=["none", "pca", "pca-vq"], choices=("none", "pca", "pca-vq"))
    parser.add_argument("--ncentroids", type=int, default=None, help="k-means centroids (default: the index's rule).")
    parser.add_argument("--doc-maxlen", type=int, default=180)
    parser.add_argument("--query-maxlen", type=int, default=32)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/memcore_colbert_bench"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = header("colbert_codecs", args)
    loaded = load_selection(args, result)
    if loaded is None:
        return
    data, docs, queries = loaded
    doc_cache = TokenCache(args.cache, memcore.plugin.build_embedder({"kind": "minilm", "max_seq_length": args.doc_maxlen}), args.doc_maxlen, "doc")
    query_cache = TokenCache(args.cache, memcore.plugin.build_embedder({"kind": "minilm", "max_seq_length": args.query_maxlen}), args.query_maxlen, "query")
    doc_cache.ensure([doc_text(d) for d in docs])
    query_cache.ensure([t for _, t in queries])
    pids = [d["_id"] for d in docs]
    matrices = [doc_cache.get(doc_text(d)) for d in docs]
    flat = np.ascontiguousarray(np.concatenate(matrices))
    doclens = np.array([len(m) for m in matrices], dtype=np.int64)
    qmats = [query_cache.get(t) for _, t in queries]
    qflat = np.ascontiguousarray(np.concatenate(qmats))
    qlens = np.array([len(q) for q in qmats], dtype=np.int64)
    k = args.k
    log(f"{len(docs)} documents, {len(flat)} tokens; {len(queries)} queries")

    reference, _ = fp32_reference(args.cache, [doc_cache.folder.name, query_cache.folder.name, *pids, "--", *(q for q, _ in queries)], flat, doclens, qmats, k)
    qrels = {q: data.qrels[q] for q, _ in queries}

    def quality(top: np.ndarray) -> dict[str, float]:
        run = {qid: {pids[s]: float(k - r) for r, s in enumerate(row.tolist())} for (qid, _), row in zip(queries, top)}
        return {m: round(v, 4) for m, v in evaluate_run(run, qrels, k=10, recall_k=k).items()}

    config = ColbertIndexConfig(embedder={"kind": "minilm"}, train_min_tokens=16, **({"ncentroids": args.ncentroids} if args.ncentroids else {}))
    started = time.perf_counter()
    ncentroids, sample, heldout, fit = sample_for_training(flat, config)
    centroids = kmeans_centroids(fit, ncentroids, config)
    codes = nearest_centroids(flat, centroids)
    kmeans_seconds = time.perf_counter() - started
    log(f"{ncentroids} centroids in {kmeans_seconds:.1f}s")
    result["corpus"] = {"documents": len(docs), "queries": len(queries), "document_tokens": int(len(flat)), "query_tokens": int(len(qflat))}
    result["centroids"] = {"count": ncentroids, "kmeans_and_assign_seconds": round(kmeans_seconds, 1), "codes_bytes_per_token": int(codes.dtype.itemsize)}
    result["exhaustive_fp32"] = quality(reference)
    rows = []
    for transform in args.transforms:
        for nbits in args.nbits:
            cfg = config.model_copy(update={"nbits": nbits, "residual_transform": transform})
            started = time.perf_counter()
            codec = train_codec(sample, heldout, centroids, cfg)
            train_seconds = time.perf_counter() - started
            started = time.perf_counter()
            _, residuals = codec.compress(flat, centroids, codes)
            compress_seconds = time.perf_counter() - started
            decoded = codec.decompress_scoring(codes, residuals, centroids)
            cosine = float(np.einsum("ij,ij->i", decoded, codec.rotate_query(flat)).mean())
            top, _ = topk(all_maxsim(decoded, doclens, codec.rotate_query(qflat), qlens), k)
            per_query = np.array([len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(top, reference)])
            recall = float(per_query.mean())
            row = {
                "transform": transform,
                "nbits": nbits,
                f"recall@{k}_exhaustive_compressed_vs_fp32": round(recall, 4),
                "mean_cosine": round(cosine, 4),
                "bytes_per_token_codes_residuals": int(codes.dtype.itemsize + residuals.shape[1]),
                "train_seconds": round(train_seconds, 1),
                "compress_seconds": round(compress_seconds, 1),
                "quality": quality(top),
            }
            if transform != "none":
                widths = codec.widths.tolist()
                row["component_widths"] = {str(w): widths.count(w) for w in sorted(set(widths), reverse=True)}
            log(row)
            row[f"recall@{k}_exhaustive_compressed_vs_fp32_halves"] = [
                round(float(np.mean(part)), 4) for part in np.array_split(per_query, [(len(per_query) + 1) // 2])
            ]
            rows.append(row)
            del decoded
    result["codecs"] = rows
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
