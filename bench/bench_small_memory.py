#!/usr/bin/env python
"""Small memories: the fixed per-query cost of a pipeline recall on ~600 items, vs raw.

An agent's memory is often a few hundred items (one LoCoMo conversation is ~600 turns).
There a query's own work is tiny, so what memcore adds per query (query object, filter
and scope handling, Hit and provenance objects, records attached) shows. Per query:

- ``bm25``: a one-stage pipeline ``recall(bm25)`` through ``Pipeline.run`` (records
  attached, as ``Memory.query`` returns them) against raw ``bm25s`` (``bm25s.tokenize`` of
  the query with the same stopwords and stemmer + ``BM25.retrieve``, then the texts of
  the top ids looked up in a list);
- ``dense``: ``recall(vector)`` over an ``exact`` index with the query's vector given
  against raw numpy (``matrix @ q`` + ``argpartition`` + sort of the top k + their texts);
- both also through ``Collection.search_index`` (no pipeline, no records) to split the cost.

``same_top_k_of_50``: of the first 50 queries, how many give the raw side's ranked list up
to the order of tied scores (memcore breaks ties by id, the raw libraries by position:
:func:`same_ranking`); ``same_order_of_50`` counts identical order, ties included.

Data: the first LoCoMo conversation (``../shared/data/locomo/locomo_dev.json``: turns as
``speaker: text``, its questions as queries) when present, else ``--n`` synthetic turns
and questions (seeded). Vectors: memcore's ``hashing`` embedder (256-d), computed once
for both sides. By default each side runs whole passes over the queries, the sides
interleaved pass by pass, ``--repeat`` rounds, medians. ``--chunk-ms 0.3`` times chunks of
about 0.3 ms (for the slowest side) instead, interleaved and rotated chunk by chunk, a
side's time being the sum of each chunk's median: on a loaded machine a whole pass of a
few ms waits for a core once or twice and the wall-clock ratio jumps by +-0.15 between
runs, while most 0.3 ms timings see no wait. Chunks also run each side with caches the
other side just used (memcore's former bm25 path read 0.75x raw bm25s in passes, 0.9x in
chunks), so compare trees in the same mode. Each timing reads both clocks (wall, and this
thread's CPU time); ``--clock`` picks the headline, the other is under ``<clock>_clock``.
``bm25_after_write``: the bm25 pipeline with a record rewritten (untimed) before every
query, so the index's kept per-word scores never serve twice (``--after-write`` passes).

    PYTHONPATH=core python bench/bench_small_memory.py --quick
    PYTHONPATH=core python bench/bench_small_memory.py --store sqlite --profile --profile-side dense
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("fifo-kv")

from memcore import Collection
from memcore.default_plugins.embedders import HashingEmbedder  # noqa: E402
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore import Query
from memcore.embedders._embedder import Space
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore

LOCOMO = SHARED / "data" / "locomo" / "locomo_dev.json"
WORDS = (
    "trip flight paris lisbon dog puppy beagle chess piano guitar sister brother mom dad job interview office "
    "painting museum concert book novel recipe cake garden tomato hike mountain beach camping photo camera "
    "birthday party gift wedding school class exam project friend coffee tea movie series game soccer yoga"
).split()


def load(n: int, seed: int) -> tuple[list[str], list[str], str]:
    if LOCOMO.is_file():
        sample = json.loads(LOCOMO.read_text())[0]
        conv = sample["conversation"]
        turns = [
            f"{t['speaker']}: {t['text']}" for key in sorted(conv, key=str) if key.startswith("session_") and isinstance(conv[key], list) for t in conv[key]
        ]
        questions = [str(qa["question"]) for qa in sample["qa"]]
        return turns, questions, f"LoCoMo {sample.get('sample_id', 0)}"
    rng = np.random.default_rng(seed)
    speakers = ["Alice", "Bob"]
    turns = [f"{speakers[i % 2]}: " + " ".join(rng.choice(WORDS, rng.integers(6, 16))) for i in range(n)]
    questions = ["what " + " ".join(rng.choice(WORDS, rng.integers(3, 7))) + "?" for _ in range(200)]
    return turns, questions, "synthetic (LoCoMo not found at ../shared/data/locomo)"


class RawBM25:
    def __init__(self, texts: list[str]):
        import bm25s
        import Stemmer

        self.bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        self.texts = texts
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        self.retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False), show_progress=False)

    def __call__(self, text: str, k: int) -> list[tuple[int, float, str]]:
        tokens = self.bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, show_progress=False)
        docs, scores = self.retriever.retrieve(tokens, k=min(k, len(self.texts)), show_progress=False)
        return [(d, s, self.texts[d]) for d, s in zip(docs[0].tolist(), scores[0].tolist()) if s > 0]


class RawDense:
    def __init__(self, matrix: np.ndarray, texts: list[str]):
        self.matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        self.texts = texts

    def __call__(self, q: np.ndarray, k: int) -> list[tuple[int, float, str]]:
        scores = self.matrix @ (q / max(float(np.linalg.norm(q)), 1e-12))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(i, s, self.texts[i]) for i, s in zip(top.tolist(), scores[top].tolist())]


def same_ranking(mine: list[tuple[str, float]], raw: list[tuple[str, float]]) -> bool:
    """The same ranked list up to the order of tied scores: memcore breaks ties by id, the raw
    libraries by position. Same length and scores (relative 1e-5), the same ids in each run of
    tied scores; in a tie run cut by ``k`` any of its members may have made it in."""
    if len(mine) != len(raw) or not all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for (_, a), (_, b) in zip(mine, raw)):
        return False
    last = raw[-1][1] if raw else 0.0

    def tie_runs(pairs: list[tuple[str, float]]) -> list[set[str]]:
        out: list[set[str]] = []
        for i, (rid, score) in enumerate(pairs):
            if math.isclose(score, last, rel_tol=1e-5, abs_tol=1e-6):
                break  # the run the cut at k goes through: its members may differ
            if i and math.isclose(score, pairs[i - 1][1], rel_tol=1e-5, abs_tol=1e-6):
                out[-1].add(rid)
            else:
                out.append({rid})
        return out

    return tie_runs(mine) == tie_runs(raw)


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
"""``--clock``: wall time, or this thread's CPU time (on a loaded machine the time the
process waits for a core is not counted: both sides are measured alike, in one thread)."""


def one_pass(fn: Callable[[Any], Any], items: list[Any], before: Callable[[Any], Any] | None = None) -> dict[str, float]:
    """Queries per second of one pass over ``items``, by both clocks (the same pass);
    ``before(item)`` runs untimed ahead of each query (a write)."""
    wall, cpu = CLOCKS["wall"], CLOCKS["cpu"]
    if before is None:
        w, c = wall(), cpu()
        for item in items:
            fn(item)
        return {"wall": len(items) / (wall() - w), "cpu": len(items) / (cpu() - c)}
    spent = {"wall": 0.0, "cpu": 0.0}
    for item in items:
        before(item)
        w, c = wall(), cpu()
        fn(item)
        spent["cpu"] += cpu() - c
        spent["wall"] += wall() - w
    return {name: len(items) / seconds for name, seconds in spent.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=600, help="synthetic turns when LoCoMo is absent")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=31, help="rounds: each times every chunk of queries (a whole pass by default) once per side")
    p.add_argument(
        "--chunk-ms",
        type=float,
        default=0.0,
        help="milliseconds of queries per timing (e.g. 0.3: most timings see no wait for a core on a loaded machine); 0: whole passes",
    )
    p.add_argument(
        "--after-write", type=int, default=3, metavar="PASSES", help="passes of the bm25 pipeline with a record rewritten before every query (untimed); 0: skip"
    )
    p.add_argument("--store", choices=["memory", "sqlite"], default="sqlite")
    p.add_argument("--quick", action="store_true", help="2 repeats")
    p.add_argument("--profile", action="store_true", help="cProfile the memcore pipeline of --profile-side (top 25 on stderr)")
    p.add_argument("--profile-side", choices=["bm25", "dense"], default="bm25", help="which pipeline --profile runs")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall time, or the thread's CPU time (steadier on a loaded machine)")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.repeat = 2
        args.after_write = min(args.after_write, 1)
    result = header("bench_small_memory", args)
    turns, questions, source = load(args.n, args.seed)
    result["data"] = {"source": source, "items": len(turns), "queries": len(questions)}
    emb = HashingEmbedder()
    vectors = emb.embed_documents(turns)
    qvecs = emb.embed_queries(questions)
    tmp = Path(tempfile.mkdtemp(prefix="bench_small_"))
    try:
        store = SQLiteStore(tmp) if args.store == "sqlite" else MemoryStore()
        col = Collection(store, {"default": Space("default", emb.dim, emb, "hashing")}, get_registry(), tmp if args.store == "sqlite" else None)
        col.create_index("bm25", "bm25", stopwords="en", stemmer="english")
        col.create_index("vector", "exact", space="default")
        col.insert([{"id": f"t{i}", "text": t, "vectors": {"default": vectors[i]}, "metadata": {"turn": i}} for i, t in enumerate(turns)])
        reg = get_registry()
        pipes = {
            "bm25": Pipeline.from_config([{"kind": "recall", "index": "bm25"}], reg),
            "dense": Pipeline.from_config([{"kind": "recall", "index": "vector"}], reg),
        }
        for pipe in pipes.values():
            pipe.check(col)
        raw_bm25, raw_dense = RawBM25(turns), RawDense(vectors, turns)
        k = args.k
        sides: dict[str, dict[str, Callable[[Any], Any]]] = {
            "bm25": {
                "raw": lambda i: raw_bm25(questions[i], k),
                "pipeline": lambda i: pipes["bm25"].run(col, Query(text=questions[i], k=k)),
                "search_index": lambda i: col.search_index("bm25", Query(text=questions[i], k=k), k),
            },
            "dense": {
                "raw": lambda i: raw_dense(qvecs[i], k),
                "pipeline": lambda i: pipes["dense"].run(col, Query(vectors={"default": qvecs[i]}, k=k)),
                "search_index": lambda i: col.search_index("vector", Query(vectors={"default": qvecs[i]}, k=k), k),
            },
        }
        items = list(range(len(questions)))
        other = "cpu" if args.clock == "wall" else "wall"
        for name, fns in sides.items():
            for fn in fns.values():
                fn(0)  # warm-up
            # chunks of about --chunk-ms by the slowest side (timed over the first 20 queries)
            slowest = max(20 / one_pass(fn, items[:20])["cpu"] for fn in fns.values())
            size = max(1, int(args.chunk_ms / 1000 / slowest)) if args.chunk_ms > 0 else len(items)  # 0: whole passes
            chunks = [items[i : i + size] for i in range(0, len(items), size)]
            # seconds[side][clock][chunk]: one timing per round, sides interleaved chunk by chunk
            seconds: dict[str, dict[str, list[list[float]]]] = {side: {"wall": [[] for _ in chunks], "cpu": [[] for _ in chunks]} for side in fns}
            order = list(fns)
            for r in range(args.repeat):
                for c, chunk in enumerate(chunks):
                    shift = (r + c) % len(order)  # each side goes first as often as the others (warm caches favour followers)
                    for side in order[shift:] + order[:shift]:
                        for clock, rate in one_pass(fns[side], chunk).items():
                            seconds[side][clock][c].append(len(chunk) / rate)
            # a pass over every query = the sum of each chunk's median time
            med = {
                side: {clock: len(items) / sum(float(np.median(t)) for t in per_chunk) for clock, per_chunk in by_clock.items()}
                for side, by_clock in seconds.items()
            }
            pairs = [([(h.id, h.score) for h in fns["pipeline"](i)], [(f"t{d}", s) for d, s, _ in fns["raw"](i)]) for i in items[:50]]
            strict = sum([m for m, _ in mine] == [r for r, _ in raw][: len(mine)] for mine, raw in pairs)
            same = sum(same_ranking(mine, raw) for mine, raw in pairs)
            result[name] = {
                **{f"{side}_qps": round(v[args.clock], 1) for side, v in med.items()},
                "ratio_pipeline_over_raw": round(med["pipeline"][args.clock] / med["raw"][args.clock], 3),
                "ratio_search_index_over_raw": round(med["search_index"][args.clock] / med["raw"][args.clock], 3),
                f"{other}_clock": {
                    "ratio_pipeline_over_raw": round(med["pipeline"][other] / med["raw"][other], 3),
                    "ratio_search_index_over_raw": round(med["search_index"][other] / med["raw"][other], 3),
                },
                "same_top_k_of_50": int(same),
                "same_order_of_50": int(strict),
            }
            log(name, result[name])
        if args.after_write:
            # the bm25 pipeline when a record is rewritten before every query (untimed): the
            # index keeps each query word's scores only until the next write
            def rewrite(i: int) -> None:
                col.upsert([{"id": "t0", "text": turns[i % len(turns)], "vectors": {"default": vectors[i % len(turns)]}, "metadata": {"turn": 0}}])

            fns = sides["bm25"]
            aw: dict[str, dict[str, list[float]]] = {side: {"wall": [], "cpu": []} for side in ("raw", "pipeline")}
            for _ in range(args.after_write):
                for side in aw:
                    for clock, rate in one_pass(fns[side], items, rewrite if side == "pipeline" else None).items():
                        aw[side][clock].append(rate)
            result["bm25_after_write"] = {
                f"ratio_pipeline_over_raw_{clock}": round(float(np.median(aw["pipeline"][clock])) / float(np.median(aw["raw"][clock])), 3)
                for clock in ("wall", "cpu")
            }
            log("bm25_after_write", result["bm25_after_write"])
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for i in items * 3:
                sides[args.profile_side]["pipeline"](i)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
            print(out.getvalue(), file=sys.stderr)
        col.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
