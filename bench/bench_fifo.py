"""Benchmark of the ``fifo`` and ``sorted`` indexes (memcore-fifo-kv) against raw stdlib structures.

There is no third-party library under these two indexes, so the "raw" side of each ratio
is the plain standard-library structure a hand-written version would use, run in the
same process on the same data:

- fifo: ``collections.OrderedDict`` (append, ``move_to_end``, ``popitem(last=False)``,
  ``reversed`` iteration);
- sorted: a ``bisect.insort``-maintained list of ``(value, id)`` tuples plus a dict.

Measured at ``Index.add`` / ``Index.search`` / ``Index.overflow`` + ``Index.remove`` (what
``Collection.evict`` calls). Each measurement alternates memcore and raw ``--repeat``
times and reports medians; ``ratio`` is memcore time / raw time (1.0 = no overhead).

    python bench/bench_fifo.py --quick              # N=10,000
    python bench/bench_fifo.py                      # N=100,000
    python bench/bench_fifo.py --n 300000 --queries 2000

Progress goes to stderr; stdout holds one JSON object.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from bisect import bisect_left, insort
from collections import OrderedDict
from itertools import islice
from typing import Any, Callable

from _common import emit, finish_environment, header, log, use_checkout

use_checkout("fifo-kv")

from memcore.plugin import IndexContext
from memcore import Query, Record
from memcore_fifo_kv import FifoIndex, FifoIndexConfig, SortedIndex, SortedIndexConfig  # noqa: E402


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(repeat: int, memcore_run: Callable[[], float], raw_run: Callable[[], float]) -> dict[str, float]:
    """Alternate the two sides ``repeat`` times (raw first on odd rounds); medians in seconds."""
    ours, raws = [], []
    for i in range(repeat):
        if i % 2:
            raws.append(raw_run())
            ours.append(memcore_run())
        else:
            ours.append(memcore_run())
            raws.append(raw_run())
    m, r = statistics.median(ours), statistics.median(raws)
    return {"memcore_s": round(m, 6), "raw_s": round(r, 6), "ratio": round(m / r, 3) if r > 0 else None}


# -- fifo ---------------------------------------------------------------------------------------


def bench_fifo(n: int, queries: int, capacity: int, repeat: int, seed: int) -> dict[str, Any]:
    records = [Record(id=f"t{i}", text="turn") for i in range(n)]
    rng = random.Random(seed)
    allowed = {f"t{i}" for i in rng.sample(range(n), max(1, n // 100))}
    newest_q, oldest_q = Query(extras={"fifo": {"mode": "newest"}}), Query(extras={"fifo": {"mode": "oldest"}})
    out: dict[str, Any] = {}

    def fill_memcore() -> FifoIndex:
        index = FifoIndex(FifoIndexConfig(), IndexContext("stm"))
        for r in records:
            index.add([r])
        return index

    def fill_raw() -> OrderedDict:
        od: OrderedDict[str, int] = OrderedDict()
        for seq, r in enumerate(records, 1):
            od[r.id] = seq
            od.move_to_end(r.id)
        return od

    log(f"fifo: add {n} turns one by one")
    out["add_one_by_one"] = alternate(repeat, lambda: timed(fill_memcore), lambda: timed(fill_raw))
    out["add_one_by_one"]["n"] = n
    index, od = fill_memcore(), fill_raw()

    def raw_newest(k: int = 10) -> list[str]:
        return list(islice(reversed(od), k))

    def raw_oldest(k: int = 10) -> list[str]:
        return list(islice(od, k))

    def raw_newest_allowed(k: int = 10) -> list[str]:
        return list(islice((i for i in reversed(od) if i in allowed), k))

    assert [h.id for h in index.search(newest_q, 10)] == raw_newest()
    assert [h.id for h in index.search(oldest_q, 10)] == raw_oldest()
    assert [h.id for h in index.search(newest_q, 10, allowed)] == raw_newest_allowed()
    log(f"fifo: {queries} searches of k=10 (newest, oldest, newest among 1% allowed)")
    out["search_newest_k10"] = alternate(
        repeat, lambda: timed(lambda: [index.search(newest_q, 10) for _ in range(queries)]), lambda: timed(lambda: [raw_newest() for _ in range(queries)])
    )
    out["search_oldest_k10"] = alternate(
        repeat, lambda: timed(lambda: [index.search(oldest_q, 10) for _ in range(queries)]), lambda: timed(lambda: [raw_oldest() for _ in range(queries)])
    )
    out["newest_ids_k10"] = alternate(
        repeat, lambda: timed(lambda: [index.newest(10) for _ in range(queries)]), lambda: timed(lambda: [raw_newest() for _ in range(queries)])
    )
    out["search_newest_k10_allowed_1pct"] = alternate(
        repeat,
        lambda: timed(lambda: [index.search(newest_q, 10, allowed) for _ in range(queries)]),
        lambda: timed(lambda: [raw_newest_allowed() for _ in range(queries)]),
    )
    for key in ("search_newest_k10", "search_oldest_k10", "newest_ids_k10", "search_newest_k10_allowed_1pct"):
        out[key]["memcore_us_per_query"] = round(out[key]["memcore_s"] / queries * 1e6, 2)
        out[key]["raw_us_per_query"] = round(out[key]["raw_s"] / queries * 1e6, 2)

    half = n // 2
    log(f"fifo: evict half ({half}) at once: overflow() + remove()")

    def evict_memcore() -> float:
        idx = fill_memcore()
        idx.capacity = n - half
        return timed(lambda: idx.remove(idx.overflow()))

    def evict_raw() -> float:
        d = fill_raw()

        def run() -> None:
            while len(d) > n - half:
                d.popitem(last=False)

        return timed(run)

    out["evict_half_at_once"] = alternate(repeat, evict_memcore, evict_raw)
    out["evict_half_at_once"]["evicted"] = half

    log(f"fifo: steady state, capacity {capacity}: add one turn then evict, {n} turns")

    def steady_memcore() -> float:
        idx = FifoIndex(FifoIndexConfig(capacity=capacity), IndexContext("stm"))

        def run() -> None:
            for r in records:
                idx.add([r])
                over = idx.overflow()
                if over:
                    idx.remove(over)

        return timed(run)

    def steady_raw() -> float:
        d: OrderedDict[str, int] = OrderedDict()

        def run() -> None:
            for seq, r in enumerate(records, 1):
                d[r.id] = seq
                while len(d) > capacity:
                    d.popitem(last=False)

        return timed(run)

    out["steady_add_and_evict"] = alternate(repeat, steady_memcore, steady_raw)
    out["steady_add_and_evict"].update(turns=n, capacity=capacity)
    return out


# -- sorted -------------------------------------------------------------------------------------


def bench_sorted(n: int, queries: int, repeat: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    values = [rng.random() * 1e6 for _ in range(n)]
    records = [Record(id=f"e{i}", text="event", metadata={"ts": v}) for i, v in enumerate(values)]
    out: dict[str, Any] = {}

    def fill_memcore() -> SortedIndex:
        index = SortedIndex(SortedIndexConfig(field="ts"), IndexContext("by_ts"))
        for r in records:
            index.add([r])
        return index

    def fill_raw() -> tuple[list, dict]:
        entries: list[tuple[float, str]] = []
        keys: dict[str, float] = {}
        for r in records:
            v = r.metadata["ts"]
            keys[r.id] = v
            insort(entries, (v, r.id))
        return entries, keys

    log(f"sorted: add {n} records one by one (random values)")
    out["add_one_by_one"] = alternate(repeat, lambda: timed(fill_memcore), lambda: timed(fill_raw))
    out["add_one_by_one"]["n"] = n
    log(f"sorted: add {n} records in one batch")
    out["add_one_batch"] = alternate(
        repeat,
        lambda: timed(lambda: SortedIndex(SortedIndexConfig(field="ts"), IndexContext("b")).add(records)),
        lambda: timed(lambda: sorted((r.metadata["ts"], r.id) for r in records)),
    )
    index = fill_memcore()
    entries, _ = fill_raw()
    top_q = Query(extras={"sorted": {"mode": "top", "order": "desc"}})
    lows = [rng.random() * 0.99e6 for _ in range(queries)]
    range_qs = [Query(extras={"sorted": {"mode": "range", "gte": lo, "lt": lo + 1e4}}) for lo in lows]  # ~1% of the values

    def raw_top(k: int = 10) -> list[tuple[float, str]]:
        return entries[-k:][::-1]

    def raw_range(lo: float, k: int = 100) -> list[tuple[float, str]]:
        i = bisect_left(entries, (lo,))
        j = bisect_left(entries, (lo + 1e4,))
        return entries[i : min(j, i + k)]

    assert [h.id for h in index.search(top_q, 10)] == [rid for _, rid in raw_top()]
    assert [h.id for h in index.search(range_qs[0], 100)] == [rid for _, rid in raw_range(lows[0])]
    log(f"sorted: {queries} top-10 and {queries} range (k=100) searches")
    out["search_top_k10"] = alternate(
        repeat, lambda: timed(lambda: [index.search(top_q, 10) for _ in range(queries)]), lambda: timed(lambda: [raw_top() for _ in range(queries)])
    )
    out["search_range_k100"] = alternate(
        repeat,
        lambda: timed(lambda: [index.search(q, 100) for q in range_qs]),
        lambda: timed(lambda: [raw_range(lo) for lo in lows]),
    )
    for key in ("search_top_k10", "search_range_k100"):
        out[key]["memcore_us_per_query"] = round(out[key]["memcore_s"] / queries * 1e6, 2)
        out[key]["raw_us_per_query"] = round(out[key]["raw_s"] / queries * 1e6, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="records per structure (default 100,000)")
    parser.add_argument("--queries", type=int, default=1_000, help="searches per measurement (default 1,000)")
    parser.add_argument("--capacity", type=int, default=1_000, help="fifo capacity in the steady-state test (default 1,000)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating memcore/raw rounds; medians are reported (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="N=10,000, 200 queries")
    parser.add_argument("--parts", default="fifo,sorted", help="comma-separated: fifo, sorted")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries = 10_000, 200
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    started = time.perf_counter()
    result = header("fifo-kv: fifo and sorted indexes vs stdlib structures", args, argv=argv)
    result["note"] = "ratio = memcore seconds / raw seconds (median of alternating rounds); raw = OrderedDict (fifo), bisect list (sorted)"
    if "fifo" in parts:
        result["fifo"] = bench_fifo(args.n, args.queries, args.capacity, args.repeat, args.seed)
    if "sorted" in parts:
        result["sorted"] = bench_sorted(args.n, args.queries, args.repeat, args.seed)
    finish_environment(result["environment"])
    result["seconds"] = round(time.perf_counter() - started, 2)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
