#!/usr/bin/env python
"""BM25 index build: memcore's ``bm25`` index (memcore-bm25) vs raw bm25s, same texts, same run.

Corpus: BEIR SciFact (title + text of its 5,183 documents) from ``--scifact`` (default
``../shared/data/scifact``; ``MEMCORE_SHARED`` overrides the shared folder) when present,
else ``--n`` synthetic Zipf texts (the corpus of ``bench_bm25.py``); ``--synthetic`` forces it.

Sides, each timed ``--repeats`` times in alternation (median reported), all with k1 1.2,
b 0.75, English stopwords and the English Snowball stemmer:

- ``raw``: ``bm25s.tokenize(texts, stopwords="en", stemmer=...)`` then
  ``bm25s.BM25(k1=1.2, b=0.75).index(tokens)`` -- the documented recipe;
- ``index``: ``BM25Index.add(records)`` + ``merge()`` (records built before the clock:
  the cost of the index itself, what the Collection calls);
- ``records_and_index``: ``Record.create(text, id=...)`` for every document, then the same;
- ``collection``: ``Collection.insert`` of ``{"id", "text"}`` dicts into an in-memory
  collection with one bm25 index, in batches of ``--batch``, then the first search (which
  merges) -- what a user of memcore pays end to end without a file store.

Ratios are ``side / raw`` (1.0 = as fast as raw bm25s; the goal is <= 1.2 for ``index``).
``--profile SIDE`` prints a cProfile of one run of that side on stderr.

    python bench/bench_bm25_build.py --quick
    python bench/bench_bm25_build.py --repeats 5 --out bm25_build.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from _common import SHARED, emit, finish_environment, header, log, package_version, use_checkout

use_checkout("bm25")

from memcore import Collection, Query, Record
from memcore.plugin import IndexContext
from memcore._plugins._host import get_registry
from memcore.stores._memory import MemoryStore

from memcore_bm25 import BM25Config, BM25Index  # noqa: E402

OPTIONS = {"k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"}


def scifact_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    shared = Path(os.environ["MEMCORE_SHARED"]) if os.environ.get("MEMCORE_SHARED") else SHARED
    return shared / "data" / "scifact"


def load_corpus(args: argparse.Namespace) -> tuple[str, list[str], list[str]]:
    directory = scifact_dir(args.scifact)
    if not args.synthetic and (directory / "corpus.jsonl").is_file():
        ids, texts = [], []
        with open(directory / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                ids.append(str(doc["_id"]))
                texts.append((doc.get("title", "") + " " + doc.get("text", "")).strip())
        return f"scifact ({directory})", ids, texts
    from bench_bm25 import zipf_corpus

    texts = zipf_corpus(args.n, args.seed)
    return f"synthetic zipf n={args.n}", [f"d{i}" for i in range(len(texts))], texts


def raw_build(texts: list[str]) -> Callable[[], Any]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")

    def run() -> Any:
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25(k1=1.2, b=0.75)
        retriever.index(tokens, show_progress=False)
        return retriever

    return run


def index_build(ids: list[str], texts: list[str], with_records: bool) -> Callable[[], Any]:
    prebuilt = [Record.create(t, id=i) for i, t in zip(ids, texts)]

    def run() -> Any:
        records = [Record.create(t, id=i) for i, t in zip(ids, texts)] if with_records else prebuilt
        index = BM25Index(BM25Config(**OPTIONS), IndexContext("bm25"))
        index.add(records)
        index.merge()
        return index

    return run


def collection_build(ids: list[str], texts: list[str], batch: int) -> Callable[[], Any]:
    registry = get_registry()

    def run() -> Any:
        col = Collection(MemoryStore(), {}, registry)
        col.create_index("bm25", "bm25", **OPTIONS)
        for s in range(0, len(ids), batch):
            col.insert([{"id": i, "text": t} for i, t in zip(ids[s : s + batch], texts[s : s + batch])])
        col.search_index("bm25", Query(text=texts[0]), 10)  # the first search merges
        return col

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scifact", help="SciFact folder (BEIR layout)")
    p.add_argument("--synthetic", action="store_true", help="use the synthetic corpus even when SciFact is present")
    p.add_argument("--n", type=int, default=20_000, help="synthetic documents")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=1000, help="Collection.insert batch size")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sides", default="raw,index,records_and_index,collection")
    p.add_argument("--profile", help="cProfile one run of this side (stderr)")
    p.add_argument("--quick", action="store_true", help="2 repeats; synthetic n=5,000 when SciFact is absent")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.quick:
        args.repeats, args.n = 2, min(args.n, 5000)
    result = header("bench_bm25_build", args, bm25s=package_version("bm25s"), pystemmer=package_version("PyStemmer"))
    corpus, ids, texts = load_corpus(args)
    result["corpus"] = {"name": corpus, "documents": len(texts), "characters": sum(map(len, texts))}
    log(result["corpus"])
    runs = {
        "raw": raw_build(texts),
        "index": index_build(ids, texts, with_records=False),
        "records_and_index": index_build(ids, texts, with_records=True),
        "collection": collection_build(ids, texts, args.batch),
    }
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if "raw" not in sides:
        sides.insert(0, "raw")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(runs[args.profile])
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    for side in sides:  # warm-up: imports, stemmer caches
        runs[side]()
    times: dict[str, list[float]] = {s: [] for s in sides}
    for r in range(args.repeats):
        for side in sides if r % 2 == 0 else sides[::-1]:
            started = time.perf_counter()
            runs[side]()
            times[side].append(time.perf_counter() - started)
        log(f"repeat {r + 1}/{args.repeats}", {s: round(t[-1], 3) for s, t in times.items()})
    raw = statistics.median(times["raw"])
    result["seconds"] = {s: round(statistics.median(t), 4) for s, t in times.items()}
    result["runs_seconds"] = {s: [round(x, 4) for x in t] for s, t in times.items()}
    result["ratio_over_raw"] = {s: round(statistics.median(t) / raw, 3) for s, t in times.items() if s != "raw"}
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
