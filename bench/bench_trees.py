#!/usr/bin/env python
"""Two source trees of memcore, timed in the same run: insert and retrieve, new over old.

A refactoring of the core must not slow the paths every application runs. This script
times them on two trees (``--old`` and ``--new``: checkouts whose ``core/`` holds the
``memcore`` package), each measurement in a fresh child process with
``PYTHONPATH=<tree>/core`` (the tree's package comes first on ``sys.path``), the two trees
alternating round by round (``--rounds``; which tree goes first alternates too) so that
drift and noise of a shared machine hit both alike. Medians over rounds; ``ratio`` is
new/old of the median (time per operation: below 1.0 the new tree is faster).

Workloads (``memcore.open`` with default settings: SQLite store, ``hashing`` embedder,
``exact`` index, ``default`` service and its ``basic`` pipeline; only the API every tree
has, ``memcore.open``, ``Memory.insert``, ``Memory.retrieve``, is used):

- ``insert_batch``: ``Memory.insert`` of ``--insert-n`` texts in batches of 500 (seconds per
  1,000 records, embedding included);
- ``insert_one``: ``Memory.insert`` of 300 texts one by one (ms per record: a commit each);
- ``retrieve_small``: ``Memory.retrieve(text, k=10)`` on a memory of 600 texts (ms per
  query, median of ``--queries`` queries after 20 warm-up queries);
- ``retrieve_large``: the same on ``--large-n`` texts.

    python bench/bench_trees.py --old /tmp/old --new . --rounds 5
    python bench/bench_trees.py --old /tmp/old --new . --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, random, sys, tempfile, time
import memcore

workload, n, queries, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
WORDS = [w for w in "alice bob carol dave moved paris berlin tokyo likes green tea coffee met "
         "friend sister brother job school city park music guitar piano dog cat trip summer winter "
         "book film garden river mountain sea lake bread cheese apple run swim walk read write".split()]


def text(i):
    return f"{i} " + " ".join(rng.choice(WORDS) for _ in range(12))


with tempfile.TemporaryDirectory() as d:
    mem = memcore.open(path=d)
    try:
        if workload == "insert_batch":
            items = [text(i) for i in range(n)]
            t = time.perf_counter()
            for s in range(0, n, 500):
                mem.insert(items[s : s + 500])
            value = (time.perf_counter() - t) / n * 1000  # s per 1,000 records
        elif workload == "insert_one":
            items = [text(i) for i in range(n)]
            t = time.perf_counter()
            for item in items:
                mem.insert(item)
            value = (time.perf_counter() - t) / n * 1000  # ms per record
        else:
            items = [text(i) for i in range(n)]
            for s in range(0, n, 1000):
                mem.insert(items[s : s + 1000])
            qs = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(queries + 20)]
            for q in qs[:20]:
                mem.retrieve(q, k=10)
            times = []
            for q in qs[20:]:
                t = time.perf_counter()
                mem.retrieve(q, k=10)
                times.append(time.perf_counter() - t)
            times.sort()
            value = times[len(times) // 2] * 1000  # ms per query (median)
    finally:
        mem.close()
print(json.dumps({"value": value, "memcore_file": memcore.__file__}))
"""

UNITS = {"insert_batch": "s per 1,000 records", "insert_one": "ms per record", "retrieve_small": "ms per query (p50)", "retrieve_large": "ms per query (p50)"}


def run_child(tree: Path, workload: str, n: int, queries: int, seed: int) -> tuple[float, str]:
    """One measurement in a fresh interpreter importing ``tree``'s memcore."""
    env = {**os.environ, "PYTHONPATH": str(tree / "core"), "HF_HUB_OFFLINE": "1", "MEMCORE_LOG": "off"}
    out = subprocess.run([sys.executable, "-c", CHILD, workload, str(n), str(queries), str(seed)], env=env, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return float(data["value"]), str(data["memcore_file"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", type=Path, required=True, help="the old tree (its core/ holds memcore)")
    p.add_argument("--new", type=Path, default=Path("."), help="the new tree (default: this checkout)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per workload; medians are reported")
    p.add_argument("--insert-n", type=int, default=5000, help="texts of insert_batch")
    p.add_argument("--large-n", type=int, default=20000, help="texts of retrieve_large")
    p.add_argument("--queries", type=int, default=300, help="timed queries per retrieve measurement")
    p.add_argument("--workloads", default="insert_batch,insert_one,retrieve_small,retrieve_large", help="comma-separated subset")
    p.add_argument("--quick", action="store_true", help="2 rounds, smaller sizes (a smoke run)")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.insert_n, a.large_n, a.queries = 2, 1000, 3000, 100
    sizes = {"insert_batch": a.insert_n, "insert_one": 300, "retrieve_small": 600, "retrieve_large": a.large_n}
    trees = {"old": a.old.resolve(), "new": a.new.resolve()}
    result: dict[str, object] = {
        "bench": "trees",
        "python": platform.python_version(),
        "load_before": os.getloadavg(),
        "trees": {k: str(v) for k, v in trees.items()},
        "rounds": a.rounds,
        "workloads": {},
    }
    files: dict[str, str] = {}
    started = time.time()
    for workload in a.workloads.split(","):
        values: dict[str, list[float]] = {"old": [], "new": []}
        for r in range(a.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for side in order:
                value, files[side] = run_child(trees[side], workload, sizes[workload], a.queries, seed=r)
                values[side].append(value)
        old, new = statistics.median(values["old"]), statistics.median(values["new"])
        result["workloads"][workload] = {  # type: ignore[index]
            "unit": UNITS[workload],
            "n": sizes[workload],
            "old": round(old, 4),
            "new": round(new, 4),
            "ratio": round(new / old, 3),
            "old_runs": [round(v, 4) for v in values["old"]],
            "new_runs": [round(v, 4) for v in values["new"]],
        }
        print(f"{workload}: old {old:.4f} new {new:.4f} {UNITS[workload]} ratio {new / old:.3f}", file=sys.stderr)
    result["memcore_files"] = files
    result["load_after"] = os.getloadavg()
    result["seconds"] = round(time.time() - started, 1)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
