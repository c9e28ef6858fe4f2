#!/usr/bin/env python
"""ColBERT-style late interaction on BEIR SciFact: PLAID (compressed) vs exhaustive MaxSim.

Token vectors: all-MiniLM-L6-v2 token embeddings (memcore-embed's ``minilm``, through
``memcore.plugin.build_embedder``), per-token normalised, ``--doc-maxlen`` / ``--query-maxlen``
tokens. Encoding the corpus takes minutes on a loaded 2-core machine, so the vectors are
cached as float16 ``.npy`` under ``--cache`` (default /tmp/memcore_colbert_bench) and
reused by later runs; only missing documents are encoded.

Measured in one process, on the same token vectors and queries:

- ``exhaustive_fp32``: exact MaxSim of every query against every passage (numpy, float32,
  uncompressed): the accuracy reference and the latency baseline;
- ``plaid``: the memcore ``colbert`` engine (faiss k-means centroids, residuals at
  ``--nbits``, PLAID stages with ColBERT's defaults for k);
- ``exhaustive_compressed`` (first ``--compressed-queries`` queries): exact MaxSim over the
  decompressed residuals (the index's ``exhaustive`` query mode), which separates what the
  compression loses (its recall against fp32) from what the PLAID stages lose (PLAID's
  recall against it);
- latency ratio exhaustive_fp32 / plaid, recall@10 of PLAID against the exhaustive
  top-10, nDCG@10 (qrels) of both, stored bytes per token vs float32, build time;
- with ``--advanced``: the ``advanced`` preset (dense MiniLM + BM25, RRF k 10, keyword
  rerank) with and without a third recall list from a colbert index, nDCG@10 / recall@100,
  on the same documents and queries.

    python bench/bench_colbert.py --docs 1000 --queries 200     # quick (--data DIR when ../shared is elsewhere)
    python bench/bench_colbert.py                               # full corpus, all 809 train queries
    python bench/bench_colbert.py --advanced

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import SHARED, emit, finish_environment, header, log, pct, use_checkout

use_checkout("colbert", "embed", "fifo-kv")

import memcore  # noqa: E402
from memcore.eval import evaluate_run, load_beir  # noqa: E402
from memcore_colbert import ColbertIndexConfig  # noqa: E402
from memcore_colbert.config import resolve_params  # noqa: E402
from memcore_colbert.engine import Engine  # noqa: E402
from memcore_colbert import plaid  # noqa: E402

DATA = SHARED / "data" / "scifact"


# -- token vectors, cached ---------------------------------------------------------------------


class TokenCache:
    """Per-text token matrices of one (model, max length), in float16 ``.npy`` files."""

    def __init__(self, folder: Path, embedder: Any, max_length: int, kind: str):
        self.folder = folder / f"{hashlib.sha1(embedder.model_id.encode()).hexdigest()[:10]}_{kind}{max_length}_input{max_length}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.embedder, self.max_length, self.kind = embedder, max_length, kind
        self.keys: list[str] = []
        self.flat = np.zeros((0, embedder.dim), dtype=np.float16)
        self.lens = np.zeros(0, dtype=np.int64)
        if (self.folder / "keys.json").is_file():
            keys = json.loads((self.folder / "keys.json").read_text())
            flat = np.load(self.folder / "tokens.npy", allow_pickle=False, mmap_mode="r")
            lens = np.load(self.folder / "lens.npy", allow_pickle=False)
            n = min(len(keys), len(lens))  # another run may be appending: keep the consistent prefix
            while n and int(lens[:n].sum()) > len(flat):
                n -= 1
            self.keys, self.lens = keys[:n], lens[:n]
            self.flat = np.asarray(flat[: int(self.lens.sum())])
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.offsets = np.concatenate(([0], np.cumsum(self.lens)))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def ensure(self, texts: list[str], batch: int = 64) -> float:
        """Encode the texts not cached yet; returns the seconds spent encoding."""
        todo = list(dict.fromkeys(t for t in texts if self.key(t) not in self.row))
        if not todo:
            return 0.0
        started = time.perf_counter()
        fn = self.embedder.embed_document_tokens if self.kind == "doc" else self.embedder.embed_query_tokens
        # sorted by length within blocks of 512 (less padding), the blocks in the given order
        todo = [t for block in range(0, len(todo), 512) for t in sorted(todo[block : block + 512], key=len)]
        parts, lens = [], []
        for start in range(0, len(todo), batch):
            out = fn(todo[start : start + batch], max_length=self.max_length)
            parts += [m.astype(np.float16) for m in out]
            lens += [len(m) for m in out]
            if (start // batch) % 10 == 0:
                log(f"encoded {start + len(out)}/{len(todo)} {self.kind} texts")
            if len(parts) >= 256:  # save as we go: an interrupted run keeps what it encoded
                self._append(todo[start + len(out) - len(parts) : start + len(out)], parts, lens)
                parts, lens = [], []
        self._append(todo[len(todo) - len(parts) :] if parts else [], parts, lens)
        return time.perf_counter() - started

    def _append(self, texts: list[str], parts: list[np.ndarray], lens: list[int]) -> None:
        if not parts:
            return
        self.keys += [self.key(t) for t in texts]
        self.flat = np.concatenate([self.flat, *parts])
        self.lens = np.concatenate([self.lens, np.asarray(lens, dtype=np.int64)])
        np.save(self.folder / "tokens.npy", self.flat, allow_pickle=False)
        np.save(self.folder / "lens.npy", self.lens, allow_pickle=False)
        (self.folder / "keys.json").write_text(json.dumps(self.keys))
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.offsets = np.concatenate(([0], np.cumsum(self.lens)))

    def get(self, text: str) -> np.ndarray:
        i = self.row[self.key(text)]
        m = self.flat[self.offsets[i] : self.offsets[i + 1]].astype(np.float32)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # float16 rounding


# -- data ----------------------------------------------------------------------------------------


def select(data: Any, n_docs: int | None, n_queries: int | None) -> tuple[list[dict], list[tuple[str, str]]]:
    """The first ``n_queries`` judged queries, and the documents: every document the split
    judges, then the rest of the corpus in order, up to ``n_docs`` (all when None). The
    document list does not depend on ``n_queries``, so smaller runs reuse a prefix of the
    cache a larger run filled."""
    queries = list(data.judged_queries())[: n_queries or None]
    if n_docs is None:
        return data.corpus, queries
    wanted = {d for q in data.qrels for d in data.qrels[q]}
    docs = [d for d in data.corpus if d["_id"] in wanted]
    for d in data.corpus:
        if len(docs) >= max(n_docs, len(wanted)):
            break
        if d["_id"] not in wanted:
            docs.append(d)
    return docs, queries


def load_selection(args: argparse.Namespace, result: dict) -> tuple[Any, list[dict], list[tuple[str, str]]] | None:
    """SciFact (``args.data``, ``args.split``) and its selected documents and queries
    (``args.docs``, ``args.queries``); None after printing ``result`` as skipped when the
    data is missing."""
    if not args.data.is_dir():
        result["skipped"] = f"no SciFact data at {args.data}"
        emit(result, args.out)
        return None
    data = load_beir(args.data, args.split)
    return (data, *select(data, args.docs, args.queries))


def doc_text(d: dict) -> str:
    return f"{d['title']} {d['text']}".strip()


# -- measurement ---------------------------------------------------------------------------------


def exhaustive_fp32(q: np.ndarray, flat: np.ndarray, offsets: np.ndarray, doclens: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim over every passage: one matmul per chunk + segment maxima."""
    slots = np.arange(len(doclens))
    scores = plaid.maxsim(q, slots, offsets, doclens, lambda rows: flat[rows])
    best = plaid.top(scores, k)
    return slots[best], scores[best]


_BLOCK = 8192  # document tokens per matrix product of all_maxsim


def all_maxsim(vectors: np.ndarray, doclens: np.ndarray, queries: np.ndarray, qlens: np.ndarray) -> np.ndarray:
    """MaxSim ``(passages, queries)`` of every query (their tokens stacked in ``queries``)
    against every passage, whose token rows are ``vectors`` (in passage order): one matrix
    product per block of about 8,192 document tokens."""
    offsets = np.concatenate(([0], np.cumsum(doclens, dtype=np.int64)))
    qstarts = np.concatenate(([0], np.cumsum(qlens)))[:-1]
    out = np.empty((len(doclens), len(qlens)), dtype=np.float32)
    first = 0
    while first < len(doclens):
        last = min(max(first + 1, int(np.searchsorted(offsets, offsets[first] + _BLOCK, side="right")) - 1), len(doclens))
        lo, hi = int(offsets[first]), int(offsets[last])
        best = np.maximum.reduceat(vectors[lo:hi] @ queries.T, (offsets[first:last] - lo).astype(np.int64), axis=0)
        out[first:last] = np.add.reduceat(best, qstarts, axis=1)
        first = last
    return out


def topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query (column of ``scores``) the k best passages, best first: ``(slots (queries, k), scores)``."""
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1, axis=0)[:k].T
    order = np.argsort(-np.take_along_axis(scores.T, part, axis=1), axis=1, kind="stable")
    slots = np.take_along_axis(part, order, axis=1)
    return slots, np.take_along_axis(scores.T, slots, axis=1)


def fp32_reference(cache: Path, key_parts: list[str], flat: np.ndarray, doclens: np.ndarray, qmats: list[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exhaustive fp32 MaxSim top-k of every query, batched; cached in ``cache`` as two
    ``.npy`` (slots, scores) keyed by a hash of ``key_parts`` (token cache, passages, queries, k)."""
    key = hashlib.sha1("\n".join([*key_parts, str(k)]).encode()).hexdigest()[:16]
    files = cache / f"exhaustive_fp32_top{k}_{key}.slots.npy", cache / f"exhaustive_fp32_top{k}_{key}.scores.npy"
    if all(f.is_file() for f in files):
        log(f"exhaustive fp32 top-{k} of {len(qmats)} queries from {files[0]}")
        return np.load(files[0], allow_pickle=False), np.load(files[1], allow_pickle=False)
    started = time.perf_counter()
    slots, scores = [], []
    for start in range(0, len(qmats), 100):  # bounds the (tokens, query tokens) product
        part = qmats[start : start + 100]
        a, b = topk(all_maxsim(flat, doclens, np.ascontiguousarray(np.concatenate(part)), np.array([len(q) for q in part])), k)
        slots.append(a)
        scores.append(b)
        log(f"exhaustive fp32 reference: {start + len(part)}/{len(qmats)} queries")
    out = np.concatenate(slots), np.concatenate(scores)
    for f, a in zip(files, out):
        np.save(f, a, allow_pickle=False)
    log(f"exhaustive fp32 top-{k} in {time.perf_counter() - started:.1f}s, saved to {files[0]}")
    return out


def timed(fn, *args) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def halves(values: list[float]) -> list[float]:
    """Mean of the first and of the second half of per-query values (the first ``ceil(n / 2)``, as ``--queries``
    of that many measures them, and the rest): the spread a default must hold on queries it was not chosen on."""
    middle = (len(values) + 1) // 2
    return [round(float(np.mean(part)), 4) if len(part) else float("nan") for part in (values[:middle], values[middle:])]


def summary(seconds: list[float]) -> dict[str, float]:
    return {"median_ms": round(1000 * pct(seconds, 50), 3), "p95_ms": round(1000 * pct(seconds, 95), 3), "mean_ms": round(1000 * float(np.mean(seconds)), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--docs", type=int, default=None, help="Documents: the judged ones of the chosen queries plus the corpus in order up to N (default: all 5,183)."
    )
    parser.add_argument("--queries", type=int, default=None, help="First N judged train queries (default: all).")
    parser.add_argument("--data", type=Path, default=DATA, help="SciFact folder (BEIR layout + minilm/ vectors); default ../shared/data/scifact.")
    parser.add_argument("--split", default="train")
    parser.add_argument("--nbits", type=int, default=2, choices=(1, 2, 4))
    parser.add_argument(
        "--also-nbits",
        type=int,
        nargs="*",
        default=[],
        choices=(1, 2, 4),
        help="Also measure these nbits on the same centroids and codes (buckets trained again; no second k-means).",
    )
    parser.add_argument("--buckets", default=None, choices=("per_dim", "pooled"), help="Residual buckets (default: the index's default).")
    parser.add_argument(
        "--residual-transform", default=None, choices=("none", "pca", "pca-vq"), help="Residual coding (default: the index's default residual_transform)."
    )
    parser.add_argument("--ncentroids", type=int, default=None, help="k-means centroids (default: the index's rule).")
    parser.add_argument("--max-centroids", type=int, default=None, help="Cap of the default number of centroids (default: the index's).")
    parser.add_argument("--ndocs", type=int, default=None, help="PLAID ndocs (default: ColBERT's by k).")
    parser.add_argument("--ncells", type=int, default=None, help="PLAID ncells (default: ColBERT's by k).")
    parser.add_argument("--also-ncells", type=int, nargs="*", default=[], help="Also measure the main index (PLAID recall and latency) with these ncells.")
    parser.add_argument("--also-ndocs", type=int, nargs="*", default=[], help="Also measure the main index (PLAID recall and latency) with these ndocs.")
    parser.add_argument("--centroid-score-threshold", type=float, default=None, help="PLAID pruning threshold (default: ColBERT's by k).")
    parser.add_argument("--doc-maxlen", type=int, default=180)
    parser.add_argument("--query-maxlen", type=int, default=32)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument(
        "--fp32-timed-queries",
        type=int,
        default=None,
        help="Time exhaustive fp32 MaxSim on the first N queries only (default: all); its results for every query come from "
        "one batched pass, cached in --cache.",
    )
    parser.add_argument(
        "--also-transforms",
        nargs="*",
        default=[],
        choices=("none", "pca", "pca-vq"),
        help="Also measure these residual transforms (at --nbits and every --also-nbits) on the same centroids and codes.",
    )
    parser.add_argument("--compressed-queries", type=int, default=20, help="Queries of the exhaustive-over-decompressed measurement (slow).")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/memcore_colbert_bench"))
    parser.add_argument("--advanced", action="store_true", help="Also: the advanced preset with colbert as a third recall list.")
    parser.add_argument(
        "--advanced-populate",
        action="store_true",
        help="Build the advanced preset's colbert index by populating it from the store (batches of 512, re-trainings) "
        "instead of loading the index measured above into it (Index.load).",
    )
    parser.add_argument(
        "--add-batch",
        type=int,
        default=None,
        help="Fill the index in batches of N passages, as a collection populates it (512), with the index's train_min_tokens "
        "(so the first batch trains and later ones may re-train), instead of one add.",
    )
    parser.add_argument(
        "--defer-training",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="The index's defer_training (default: the index's): with --add-batch, train once at the end instead of at the first batch.",
    )
    parser.add_argument("--retrain-growth", type=float, default=None, help="The index's retrain_growth (default: the index's).")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = header("colbert", args)
    loaded = load_selection(args, result)
    if loaded is None:
        return
    data, docs, queries = loaded
    log(f"{len(docs)} documents, {len(queries)} queries")
    # the model reads at most max_length input tokens (ColBERT truncates the input the same way)
    doc_cache = TokenCache(args.cache, memcore.plugin.build_embedder({"kind": "minilm", "max_seq_length": args.doc_maxlen}), args.doc_maxlen, "doc")
    query_cache = TokenCache(args.cache, memcore.plugin.build_embedder({"kind": "minilm", "max_seq_length": args.query_maxlen}), args.query_maxlen, "query")
    encode_seconds = doc_cache.ensure([doc_text(d) for d in docs]) + query_cache.ensure([t for _, t in queries])
    pids = [d["_id"] for d in docs]
    matrices = [doc_cache.get(doc_text(d)) for d in docs]
    qmats = [query_cache.get(t) for _, t in queries]
    flat = np.ascontiguousarray(np.concatenate(matrices))
    doclens = np.array([len(m) for m in matrices], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum(doclens, dtype=np.int64)))
    log(f"{len(flat)} document tokens ({flat.nbytes / 1e6:.0f} MB fp32), {sum(len(q) for q in qmats)} query tokens")

    # -- build ---------------------------------------------------------------------------
    overrides = {
        key: value
        for key, value in {
            "buckets": args.buckets,
            "residual_transform": args.residual_transform,
            "ncentroids": args.ncentroids,
            "max_centroids": args.max_centroids,
            "ndocs": args.ndocs,
            "ncells": args.ncells,
            "centroid_score_threshold": args.centroid_score_threshold,
            "retrain_growth": args.retrain_growth,
            "defer_training": args.defer_training,
        }.items()
        if value is not None
    }
    config = ColbertIndexConfig(
        embedder={"kind": "minilm"},
        nbits=args.nbits,
        doc_maxlen=args.doc_maxlen,
        query_maxlen=args.query_maxlen,
        train_min_tokens=16 if args.add_batch is None else ColbertIndexConfig.model_fields["train_min_tokens"].default,
        exhaustive_below=0,
        **overrides,
    )
    engine = Engine(config, flat.shape[1], "bench")
    started = time.perf_counter()
    batch = args.add_batch or len(pids)
    trainings = []
    for start in range(0, len(pids), batch):
        before = engine.trained_tokens
        engine.add(pids[start : start + batch], matrices[start : start + batch])
        if engine.trained_tokens != before:
            trainings.append(
                {"after_passages": start + len(pids[start : start + batch]), "trained_tokens": engine.trained_tokens, "centroids": len(engine.centroids)}
            )
    if engine.train_pending:  # deferred (defer_training): what the first search or save does
        engine.ensure_trained()
        trainings.append({"after_passages": len(pids), "trained_tokens": engine.trained_tokens, "centroids": len(engine.centroids), "deferred": True})
    build_seconds = time.perf_counter() - started
    sizes = engine.nbytes()
    per_token = {
        "fp32": flat.shape[1] * 4,
        "stored_codes_residuals": (engine.codes.nbytes + engine.residuals.nbytes) / len(engine.codes),
        "stored_with_centroids": sizes["stored_bytes"] / sizes["tokens"],
    }
    log(f"built in {build_seconds:.1f}s: {len(engine.centroids)} centroids, {per_token['stored_with_centroids']:.1f} bytes/token")

    # -- search --------------------------------------------------------------------------
    k = args.k
    params = resolve_params(config, k, None)
    ref_slots, ref_scores = fp32_reference(
        args.cache, [doc_cache.folder.name, query_cache.folder.name, *pids, "--", *(q for q, _ in queries)], flat, doclens, qmats, k
    )
    t_plaid, t_exact, recall, run_plaid, run_exact, exact_slots = [], [], [], {}, {}, {}
    timed_fp32 = len(queries) if args.fp32_timed_queries is None else args.fp32_timed_queries
    for i, ((qid, _), q) in enumerate(zip(queries, qmats)):
        (slots_p, scores_p), sp = timed(engine.search, q, k, params)
        slots_e, scores_e = ref_slots[i], ref_scores[i]
        if i < timed_fp32:  # the latency baseline (the cached reference gives the results)
            _, se = timed(exhaustive_fp32, q, flat, offsets, doclens, k)
            t_exact.append(se)
        t_plaid.append(sp)
        recall.append(len(set(slots_p.tolist()) & set(slots_e.tolist())) / max(1, min(k, len(slots_e))))
        run_plaid[qid] = {pids[s]: float(v) for s, v in zip(slots_p.tolist(), scores_p.tolist())}
        run_exact[qid] = {pids[s]: float(v) for s, v in zip(slots_e.tolist(), scores_e.tolist())}
        exact_slots[qid] = set(slots_e.tolist())
    t_comp, recall_comp, plaid_vs_comp = [], [], []
    for (qid, _), q in list(zip(queries, qmats))[: args.compressed_queries]:
        (slots_c, _), sc = timed(engine.search, q, k, resolve_params(config, k, None).model_copy(update={"exhaustive": True}))
        t_comp.append(sc)
        recall_comp.append(len(set(slots_c.tolist()) & exact_slots[qid]) / k)
        plaid_vs_comp.append(len(set(slots_c.tolist()) & {pids.index(p) for p in run_plaid[qid]}) / k)
    qrels = {q: data.qrels[q] for q, _ in queries}
    quality_plaid = evaluate_run(run_plaid, qrels, k=10, recall_k=k)
    quality_exact = evaluate_run(run_exact, qrels, k=10, recall_k=k)
    result.update(
        {
            "corpus": {
                "documents": len(docs),
                "queries": len(queries),
                "document_tokens": int(len(flat)),
                "avg_doclen": round(float(doclens.mean()), 1),
                "encode_seconds_uncached": round(encode_seconds, 1),
            },
            "index": {
                "nbits": args.nbits,
                "buckets": config.buckets,
                "residual_transform": config.residual_transform,
                "codes_dtype": engine.codes.dtype.name,
                "centroids": int(len(engine.centroids)),
                "build_seconds": round(build_seconds, 2),
                "add_batch": args.add_batch,
                "defer_training": config.defer_training,
                "trainings": trainings,
                "bytes_per_token": {k2: round(v, 2) for k2, v in per_token.items()},
                "compression_vs_fp32": round(per_token["fp32"] / per_token["stored_with_centroids"], 2),
                "compression_vs_fp32_codes_residuals_only": round(per_token["fp32"] / per_token["stored_codes_residuals"], 2),
            },
            "search": {
                "k": k,
                "plaid_params": params.model_dump(),
                "plaid": summary(t_plaid),
                "exhaustive_fp32": summary(t_exact),
                "exhaustive_compressed": {
                    **summary(t_comp),
                    "queries": len(t_comp),
                    f"recall@{k}_vs_exhaustive_fp32": round(float(np.mean(recall_comp)), 4),
                    f"recall@{k}_plaid_vs_exhaustive_compressed": round(float(np.mean(plaid_vs_comp)), 4),
                }
                if t_comp
                else None,
                "latency_ratio_exhaustive_over_plaid_median": round(pct(t_exact, 50) / pct(t_plaid, 50), 2),
                "latency_ratio_exhaustive_over_plaid_mean": round(float(np.mean(t_exact) / np.mean(t_plaid)), 2),
                "fp32_timed_queries": len(t_exact),
                f"recall@{k}_plaid_vs_exhaustive": round(float(np.mean(recall)), 4),
                f"recall@{k}_plaid_vs_exhaustive_halves": halves(recall),
            },
            "quality": {"plaid": {m: round(v, 4) for m, v in quality_plaid.items()}, "exhaustive_fp32": {m: round(v, 4) for m, v in quality_exact.items()}},
        }
    )
    if args.also_nbits:
        result["also_nbits"] = {
            str(b): other_codec(b, config.residual_transform, engine, flat, queries, qmats, pids, exact_slots, t_exact, qrels, args)
            for b in args.also_nbits
            if b != args.nbits
        }
    for name, values in (("ncells", args.also_ncells), ("ndocs", args.also_ndocs)):
        for value in values:
            other_params = params.model_copy(update={name: max(value, k) if name == "ndocs" else value})
            times, hits = [], []
            for (qid, _), q in zip(queries, qmats):
                (slots, _), seconds = timed(engine.search, q, k, other_params)
                times.append(seconds)
                hits.append(len(set(slots.tolist()) & exact_slots[qid]) / max(1, min(k, len(exact_slots[qid]))))
            result.setdefault(f"also_{name}", {})[str(value)] = {
                "plaid": summary(times),
                "latency_ratio_exhaustive_over_plaid_median": round(pct(t_exact, 50) / pct(times, 50), 2),
                f"recall@{k}_plaid_vs_exhaustive": round(float(np.mean(hits)), 4),
                f"recall@{k}_plaid_vs_exhaustive_halves": halves(hits),
            }
    for transform in args.also_transforms:
        if transform != config.residual_transform:
            result[f"also_{transform}"] = {
                str(b): other_codec(b, transform, engine, flat, queries, qmats, pids, exact_slots, t_exact, qrels, args)
                for b in dict.fromkeys([args.nbits, *args.also_nbits])
            }
    if args.advanced:
        if args.out is not None:  # the main figures survive a failure of the advanced part
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        result["advanced"] = advanced(args, data, docs, queries, doc_cache, query_cache, config, None if args.advanced_populate else engine)
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


def other_codec(
    nbits: int,
    transform: str,
    engine: Engine,
    flat: np.ndarray,
    queries: list[tuple[str, str]],
    qmats: list[np.ndarray],
    pids: list[str],
    exact_slots: dict[str, set[int]],
    t_exact: list[float],
    qrels: dict,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The main measurement at another ``nbits`` / residual ``transform``, on ``engine``'s
    centroids and codes: the codec is trained on 50,000 sampled token vectors (as the index
    holds out), every residual is encoded again. The exhaustive fp32 timings are those of
    the main loop."""
    from memcore_colbert.train import train_codec

    config = engine.config.model_copy(update={"nbits": nbits, "residual_transform": transform})
    other = Engine(config, engine.dim, f"bench-{transform}-nbits{nbits}")
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    heldout = flat[np.sort(rng.choice(len(flat), size=min(len(flat), 50_000), replace=False))]
    codec = train_codec(heldout, heldout, engine.centroids, config)
    _, residuals = codec.compress(flat, engine.centroids, engine.codes)
    other.pids, other.slot_of, other.alive, other.doclens = list(engine.pids), dict(engine.slot_of), engine.alive.copy(), engine.doclens.copy()
    other.centroids, other.codec, other.codes, other.residuals, other.raw = engine.centroids, codec, engine.codes, residuals, None
    other.trained_tokens = engine.trained_tokens
    other._derived()
    other._ivf = engine.ivf()
    encode_seconds = time.perf_counter() - started
    log(f"{transform} nbits {nbits}: codec and residuals in {encode_seconds:.1f}s")
    k = args.k
    params = resolve_params(config, k, None)
    times, recall, run = [], [], {}
    for (qid, _), q in zip(queries, qmats):
        (slots, scores), seconds = timed(other.search, q, k, params)
        times.append(seconds)
        recall.append(len(set(slots.tolist()) & exact_slots[qid]) / max(1, min(k, len(exact_slots[qid]))))
        run[qid] = {pids[s]: float(v) for s, v in zip(slots.tolist(), scores.tolist())}
    recall_comp = []
    for (qid, _), q in list(zip(queries, qmats))[: args.compressed_queries]:
        slots, _ = other.search(q, k, params.model_copy(update={"exhaustive": True}))
        recall_comp.append(len(set(slots.tolist()) & exact_slots[qid]) / k)
    stored = other.codes.nbytes + other.residuals.nbytes
    tables = codec.tables_nbytes()  # the rotation (and codebooks) are stored with the centroids
    return {
        "buckets_and_residuals_seconds": round(encode_seconds, 2),
        "bytes_per_token": {
            "stored_codes_residuals": round(stored / len(other.codes), 2),
            "stored_with_centroids": round((stored + other.centroids.nbytes + tables) / len(other.codes), 2),
        },
        "compression_vs_fp32": round(flat.shape[1] * 4 * len(other.codes) / (stored + other.centroids.nbytes + tables), 2),
        "plaid": summary(times),
        "latency_ratio_exhaustive_over_plaid_median": round(pct(t_exact, 50) / pct(times, 50), 2),
        f"recall@{k}_plaid_vs_exhaustive": round(float(np.mean(recall)), 4),
        f"recall@{k}_plaid_vs_exhaustive_halves": halves(recall),
        f"recall@{k}_exhaustive_compressed_vs_fp32": round(float(np.mean(recall_comp)), 4) if recall_comp else None,
        "quality_plaid": {m: round(v, 4) for m, v in evaluate_run(run, qrels, k=10, recall_k=k).items()},
    }


def subset_memory(args: argparse.Namespace, data: Any, docs: list[dict], pipeline: Any) -> tuple[Any, list[tuple[str, str, np.ndarray]], dict]:
    """An in-memory hybrid memory over ``docs`` as bench/_scifact.py builds it for the whole
    corpus: precomputed MiniLM vectors in space ``default``, ``exact`` cosine index
    ``vector``, ``bm25`` index ``bm25`` (k1 1.2, b 0.75, English stopwords and stemmer)."""
    folder = args.data / "minilm"
    ids = json.loads((folder / "corpus_ids.json").read_text())
    vectors = np.load(folder / "corpus.npy", allow_pickle=False)
    qids = json.loads((folder / "query_ids.json").read_text())
    qvecs = np.load(folder / "queries.npy", allow_pickle=False)
    row, qrow = {d: i for i, d in enumerate(ids)}, {q: i for i, q in enumerate(qids)}
    memory = memcore.open(
        {
            "store": {"kind": "memory"},
            "spaces": {"default": {"dim": int(vectors.shape[1])}},
            "indexes": {
                "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
                "bm25": {"kind": "bm25", "k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
            },
            "pipeline": pipeline,
        }
    )
    records = [{"id": d["_id"], "text": doc_text(d), "metadata": {"title": d["title"]}, "vectors": {"default": vectors[row[d["_id"]]]}} for d in docs]
    for start in range(0, len(records), 1000):
        memory.collection.insert(records[start : start + 1000])
    return memory, qrow, qvecs


def advanced(
    args: argparse.Namespace,
    data: Any,
    docs: list[dict],
    queries: list[tuple[str, str]],
    doc_cache: TokenCache,
    query_cache: TokenCache,
    config: ColbertIndexConfig,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """nDCG@10 / recall@100 of the advanced preset (dense + BM25, RRF k 10, keyword rerank)
    with and without a third recall list from a colbert index, on the same documents and
    queries as the main measurement.

    The colbert index gets its token vectors from the caches through an embedder registered
    for this run only (``bench_cached_tokens``), so nothing is re-encoded. With ``engine``
    (the index measured above) the memory's colbert index is created empty and loads it
    (saved with the storage module, read back through ``Index.load``): no second k-means;
    without, it is populated from the store as a collection builds it."""
    from types import SimpleNamespace

    from memcore.plugin import Embedder
    from memcore import Query, hookimpl
    from memcore.retrieval._pipeline import PRESETS
    from memcore import Pipeline
    from memcore._plugins._host import get_registry
    from memcore.testing import register_plugin

    class Cached(Embedder):
        dim = doc_cache.embedder.dim
        model_id = doc_cache.embedder.model_id

        def __init__(self, _config: Any = None):
            pass

        def embed_documents(self, texts):
            raise NotImplementedError("token vectors only")

        def embed_document_tokens(self, texts, *, max_length=None):
            doc_cache.ensure(list(texts))
            return [doc_cache.get(t) for t in texts]

        def embed_query_tokens(self, texts, *, max_length=None):
            query_cache.ensure(list(texts))
            return [query_cache.get(t) for t in texts]

    @hookimpl
    def register_embedders(register):
        register("bench_cached_tokens", Cached, None)

    out: dict[str, Any] = {}
    with register_plugin(SimpleNamespace(register_embedders=register_embedders), name="bench_cached_tokens"):
        memory, qrow, qvecs = subset_memory(args, data, docs, "advanced")
        log("adding the colbert index...")
        started = time.perf_counter()
        options = {**config.model_dump(exclude={"kind"}), "embedder": {"kind": "bench_cached_tokens"}, "train_min_tokens": 4096, "exhaustive_below": 256}
        if engine is None:
            memory.collection.create_index("colbert", "colbert", populate=True, **options)
            out["colbert_index"] = "populated from the store (batches of 512)"
        else:
            import tempfile

            from memcore_colbert.storage import save_engine

            memory.collection.create_index("colbert", "colbert", populate=False, **options)
            with tempfile.TemporaryDirectory(prefix="bench-colbert-") as folder:
                save_engine(engine, Path(folder), doc_cache.embedder.model_id)
                memory.collection.index("colbert").load(Path(folder))
            out["colbert_index"] = "the index measured above, loaded with Index.load (its build time: index.build_seconds)"
        out["colbert_index_seconds"] = round(time.perf_counter() - started, 1)
        variants = {
            "advanced": PRESETS["advanced"],
            "advanced+colbert": [*PRESETS["advanced"][:2], {"kind": "recall", "index": "colbert", "over_fetch": 2.0}, *PRESETS["advanced"][2:]],
            "colbert_only": [{"kind": "recall", "index": "colbert"}, {"kind": "limit"}],
            "dense_only": [{"kind": "recall", "index": "vector"}, {"kind": "limit"}],
        }
        registry = get_registry()
        judged = [(q, t) for q, t in queries if q in qrow]
        for name, spec in variants.items():
            pipeline = Pipeline.from_config(spec, registry)
            pipeline.check(memory.collection)
            run = {}
            started = time.perf_counter()
            for qid, text in judged:
                hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": qvecs[qrow[qid]]}, k=100), with_records=False)
                run[qid] = {h.id: h.score for h in hits}
            metrics = evaluate_run(run, {q: data.qrels[q] for q, _ in judged}, k=10, recall_k=100)
            out[name] = {**{m: round(v, 4) for m, v in metrics.items()}, "qps": round(len(judged) / (time.perf_counter() - started), 1)}
            log(name, out[name])
    return out


if __name__ == "__main__":
    main()
