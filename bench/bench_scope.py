#!/usr/bin/env python
"""The cost of scope enforcement on ``Memory.retrieve`` latency, same memory, same run.

One memory (``memcore.open``: SQLite store, one ``hashing`` space of ``--dim`` dimensions,
the ``exact`` index, the ``default`` service and its ``basic`` pipeline) holds ``--n``
records split round-robin across ``--users`` users (``scope={"user_id": "u<j>",
"agent_id": "agent"}``: one agent serves every user), each
with a seeded standard-normal vector given at insert (nothing is embedded, so the figures
are the retrieval path's, not the embedder's). ``--queries`` query vectors (a stored
vector plus noise) are then timed through ``Memory.retrieve(vector=q, k=K)`` in two
variants, interleaved query by query (alternating which goes first) so that drift and
noise hit them alike:

- ``unscoped``: no scope, the whole memory is searched;
- ``scoped``: ``scope={"user_id": u}`` for a random user ``u`` (1/``--users`` of the
  records are allowed); every hit is checked to be that user's;
- ``scoped_all``: ``scope={"agent_id": "agent"}``, a scope that covers every record: the
  same search as ``unscoped`` plus everything scope enforcement adds (binding the scope,
  resolving and applying the allowed set), i.e. its cost at full size.

Reported: p50/p95/mean ms of each variant, ``ratio_p50`` / ``ratio_p95`` (scoped over
unscoped) and ``ratio_all_p50`` / ``ratio_all_p95`` (scoped_all over unscoped). The script uses only what every memcore since the first release has
(``memcore.open``, ``Memory.insert``, ``Memory.retrieve(..., scope=)``), so the same file
measures an older tree: run it with ``PYTHONPATH=<old tree>/core`` and compare the two
ratios (``memcore_file`` and ``memcore_commit`` in the JSON say which tree ran).

    PYTHONPATH=core python bench/bench_scope.py --quick
    PYTHONPATH=core python bench/bench_scope.py --out scope.json
    PYTHONPATH=/tmp/old/core python bench/bench_scope.py --out scope-old.json
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, log, pct, use_checkout

use_checkout()

import memcore  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000, help="records (default 20000)")
    p.add_argument("--users", type=int, default=100, help="users the records are split across (default 100)")
    p.add_argument("--dim", type=int, default=256, help="vector dimension (default 256)")
    p.add_argument("--queries", type=int, default=300, help="timed queries per variant (default 300)")
    p.add_argument("--warmup", type=int, default=20, help="untimed queries per variant first (default 20)")
    p.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    p.add_argument("--batch", type=int, default=2_000, help="records per insert (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="n=5000, 100 queries")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.warmup = 5_000, 100, 10
    return args


def memcore_commit() -> str | None:
    """The commit of the tree ``memcore`` was imported from (None outside git)."""
    folder = Path(memcore.__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def build(directory: Path, args: argparse.Namespace, vectors: np.ndarray) -> Any:
    settings = {
        "store": {"kind": "sqlite"},
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": args.dim}}},
        "indexes": {"vector": {"kind": "exact", "space": "default"}},
        "service": {"kind": "default"},
    }
    memory = memcore.open(settings, path=directory)
    for start in range(0, args.n, args.batch):
        memory.insert(
            [
                {
                    "id": f"u{i % args.users}-{i}",
                    "text": f"memory {i}",
                    "vectors": {"default": vectors[i]},
                    "scope": {"user_id": f"u{i % args.users}", "agent_id": "agent"},
                }
                for i in range(start, min(start + args.batch, args.n))
            ]
        )
    return memory


def stats(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(pct(ms, 50), 4), "p95_ms": round(pct(ms, 95), 4), "mean_ms": round(float(np.mean(ms)), 4)}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = header("bench_scope", args)
    result["memcore_file"] = str(Path(memcore.__file__).resolve())
    result["memcore_commit"] = memcore_commit()
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    total = args.warmup + args.queries
    picks = rng.integers(0, args.n, total)
    queries = vectors[picks] + 0.3 * rng.standard_normal((total, args.dim)).astype(np.float32)
    users = rng.integers(0, args.users, total)
    tmp = Path(tempfile.mkdtemp(prefix="bench-scope-"))
    try:
        log(f"building {args.n} records across {args.users} users (dim {args.dim})")
        started = time.perf_counter()
        memory = build(tmp / "mem", args, vectors)
        result["build_seconds"] = round(time.perf_counter() - started, 2)
        times: dict[str, list[float]] = {"unscoped": [], "scoped": [], "scoped_all": []}
        everything = {"agent_id": "agent"}
        foreign = 0
        log(f"timing {args.queries} queries per variant (after {args.warmup} warm-up)")
        with memory:
            for i, (q, u) in enumerate(zip(queries, users)):
                scopes = {"unscoped": None, "scoped": {"user_id": f"u{int(u)}"}, "scoped_all": everything}
                order = list(scopes)[i % 3 :] + list(scopes)[: i % 3]  # each variant first as often
                for variant in order:
                    options = {"scope": scopes[variant]} if scopes[variant] is not None else {}
                    t = time.perf_counter()
                    hits = memory.retrieve(vector=q, k=args.k, **options)
                    dt = time.perf_counter() - t
                    if variant == "scoped":
                        foreign += sum(1 for h in hits if not h["id"].startswith(f"u{int(u)}-"))
                    if i >= args.warmup:
                        times[variant].append(dt)
        result["variants"] = {name: stats(values) for name, values in times.items()}
        unscoped, scoped, scoped_all = (result["variants"][name] for name in ("unscoped", "scoped", "scoped_all"))
        result["ratio_p50"] = round(scoped["p50_ms"] / unscoped["p50_ms"], 3)
        result["ratio_p95"] = round(scoped["p95_ms"] / unscoped["p95_ms"], 3)
        result["ratio_all_p50"] = round(scoped_all["p50_ms"] / unscoped["p50_ms"], 3)
        result["ratio_all_p95"] = round(scoped_all["p95_ms"] / unscoped["p95_ms"], 3)
        result["scoped_hits_of_another_user"] = foreign
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)
    if foreign:
        sys.exit(f"{foreign} scoped hit(s) belonged to another user")


if __name__ == "__main__":
    main()
