#!/usr/bin/env python
"""Collection benchmarks: memcore against the raw libraries, in the same process and run.

Three parts (``--parts a,b,c``), each reported as one section of a single JSON object on
stdout (progress goes to stderr):

a. insert   -- records/s inserting ``--n`` records with caller-given vectors into a
               SQLite-backed Collection with an ``exact`` index, against plain sqlite3
               ``executemany`` + a numpy matrix append of the same rows.
b. query    -- per-query latency of the exact index at ``--nq`` records through
               ``Collection.retrieve`` (with records) and ``Collection.search_index``,
               against raw numpy (normalised matrix @ q + argpartition) on the same data.
d. secure   -- the cost of the store's ``PRAGMA secure_delete=ON`` (forgetting leaves no
               bytes on disk): the insert of (a), then a delete of every tenth record and
               the close (WAL checkpoint), with the pragma on (as shipped) and switched off
               on the same store connection, alternating; ratios off/on.
c. cli      -- wall time of ``python -m memcore.cli query ...`` on a ``--cli-n`` record
               collection built with the hashing embedder, next to the in-process
               ``Memory.query`` latency and the ``memcore.open`` time (skipped, with the
               reason, when ``memcore.cli`` is not there yet).

Run from the repository root::

    PYTHONPATH=core python bench/bench_collection.py --quick
    PYTHONPATH=core python bench/bench_collection.py --out bench/results.json

Never run as a test: timings belong here, not in the suite (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import os
import pstats
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import REPO, emit, finish_environment, header, log, pct, use_checkout

use_checkout()  # without PYTHONPATH=core and without an install: the checkout's core

import memcore  # noqa: E402
from memcore import Collection
from memcore._plugins._host import get_registry
from memcore import Query
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore

CORE = REPO / "core"


# -- data ------------------------------------------------------------------------------

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "ti",
    "vo",
    "ze",
    "pa",
    "do",
    "gu",
    "he",
    "ji",
    "ba",
    "fe",
    "co",
    "xi",
    "wu",
    "yo",
    "an",
    "el",
    "is",
    "or",
    "um",
    "qua",
    "tre",
    "spo",
    "gli",
    "bra",
]


def vocabulary(size: int, seed: int) -> list[str]:
    """``size`` distinct pseudo-words of 2-4 syllables."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words["".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n))] = None
    return list(words)


class Corpus:
    """Deterministic short synthetic sentences, small metadata dicts and float32 vectors."""

    def __init__(self, seed: int, dim: int):
        self.seed = seed
        self.dim = dim
        self.words = vocabulary(4000, seed)
        self.rng = np.random.default_rng(seed + 1)

    def texts(self, n: int) -> list[str]:
        lengths = self.rng.integers(6, 15, n)
        picks = self.rng.integers(0, len(self.words), int(lengths.sum()))
        out, pos, w = [], 0, self.words
        for length in lengths.tolist():
            out.append(" ".join(w[i] for i in picks[pos : pos + length].tolist()) + ".")
            pos += length
        return out

    @staticmethod
    def metadata(i: int) -> dict[str, Any]:
        return {"source": f"doc{i % 97}", "n": i, "tag": ("news", "chat", "note")[i % 3]}

    def vectors(self, n: int) -> np.ndarray:
        return self.rng.standard_normal((n, self.dim), dtype=np.float32)


def ms_stats(seconds: list[float]) -> dict[str, float]:
    """p50 / p95 / mean in ms and queries per second (1 / mean) of per-call timings."""
    mean = float(np.mean(seconds))
    return {
        "p50_ms": round(pct(seconds, 50) * 1e3, 4),
        "p95_ms": round(pct(seconds, 95) * 1e3, 4),
        "mean_ms": round(mean * 1e3, 4),
        "qps": round(1.0 / mean, 1) if mean > 0 else None,
    }


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def dense_collection(directory: Path, dim: int) -> Collection:
    """A SQLite collection with one caller-vector space ``dense`` and an exact index ``vec``."""
    col = Collection(SQLiteStore(directory), {"dense": Space("dense", dim)}, get_registry(), directory)
    col.create_index("vec", "exact", space="dense")
    return col


def items_for(ids: range, texts: list[str], vectors: np.ndarray) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": t, "metadata": Corpus.metadata(i), "vectors": {"dense": v}} for i, t, v in zip(ids, texts, vectors)]


def profiled(enabled: bool, fn: Callable[[], Any], top: int = 25) -> tuple[Any, list[str] | None]:
    """Run ``fn``; with ``enabled``, under cProfile, returning the top cumulative-time lines."""
    if not enabled:
        return fn(), None
    prof = cProfile.Profile()
    result = prof.runcall(fn)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime")
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:  # type: ignore[attr-defined]
        rows.append(f"{tt:8.3f}s self {ct:8.3f}s cum {nc:>9} calls  {Path(file).name}:{line}({func})")
    for row in rows:
        log("  profile: " + row)
    return result, rows


# -- a. insert throughput --------------------------------------------------------------


def bench_insert(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    n, batch, dim = args.n, args.batch, args.dim
    log(f"[a] insert: generating {n} records ({dim}-d)")
    corpus = Corpus(args.seed, dim)
    texts = corpus.texts(n)
    vectors = corpus.vectors(n)
    batches = [range(s, min(s + batch, n)) for s in range(0, n, batch)]
    item_batches = [items_for(b, texts[b.start : b.stop], vectors[b.start : b.stop]) for b in batches]

    def memcore_once(directory: Path, profile: bool) -> dict[str, Any]:
        col = dense_collection(directory, dim)

        def run() -> tuple[float, float]:
            t, c = time.perf_counter(), time.process_time()
            for items in item_batches:
                col.insert(items)
            return time.perf_counter() - t, time.process_time() - c

        (seconds, cpu), rows = profiled(profile, run)
        assert col.count() == n
        t = time.perf_counter()
        col.close()
        return {"s": seconds, "cpu_s": cpu, "flush_s": time.perf_counter() - t, "bytes": dir_bytes(directory), "profile": rows}

    def raw_once(directory: Path) -> dict[str, Any]:
        """sqlite3 executemany (one transaction per batch, same pragmas as memcore) + numpy append."""
        directory.mkdir()
        db = sqlite3.connect(directory / "raw.sqlite3", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE records (id TEXT PRIMARY KEY, text TEXT NOT NULL, metadata TEXT NOT NULL, vector BLOB NOT NULL)")
        chunks: list[np.ndarray] = []
        t, c = time.perf_counter(), time.process_time()
        for b in batches:
            vec = vectors[b.start : b.stop]
            rows = [(f"r{i}", texts[i], json.dumps(Corpus.metadata(i)), vec[i - b.start].tobytes()) for i in b]
            db.execute("BEGIN")
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?)", rows)
            db.execute("COMMIT")
            chunks.append(vec / np.linalg.norm(vec, axis=1, keepdims=True))
        matrix = np.concatenate(chunks)
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
        count = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        db.close()
        assert count == n and matrix.shape == (n, dim)
        return {"s": seconds, "cpu_s": cpu, "bytes": dir_bytes(directory)}

    mem_runs: list[dict[str, Any]] = []
    raw_runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        order = ("memcore", "raw") if rep % 2 == 0 else ("raw", "memcore")  # alternate to spread drift
        for which in order:
            directory = root / f"{which}-{rep}"
            if which == "memcore":
                log(f"[a] repeat {rep + 1}/{args.repeat}: memcore inserting {n} in batches of {batch}")
                mem_runs.append(memcore_once(directory, args.profile and rep == 0))
            else:
                log(f"[a] repeat {rep + 1}/{args.repeat}: raw sqlite3 executemany + numpy append")
                raw_runs.append(raw_once(directory))
            shutil.rmtree(directory, ignore_errors=True)

    memcore_s = float(np.median([r["s"] for r in mem_runs]))
    raw_s = float(np.median([r["s"] for r in raw_runs]))
    out = {
        "n": n,
        "dim": dim,
        "batch": batch,
        "repeat": args.repeat,
        "memcore_s": round(memcore_s, 3),
        "memcore_records_per_s": round(n / memcore_s, 1),
        "memcore_records_per_s_runs": [round(n / r["s"], 1) for r in mem_runs],
        "memcore_close_flush_s": round(float(np.median([r["flush_s"] for r in mem_runs])), 3),
        "raw_s": round(raw_s, 3),
        "raw_records_per_s": round(n / raw_s, 1),
        "raw_records_per_s_runs": [round(n / r["s"], 1) for r in raw_runs],
        "ratio": round(raw_s / memcore_s, 4),
        "ratio_note": "memcore_records_per_s / raw_records_per_s, medians over the repeats (1.0 = as fast as raw)",
        "memcore_cpu_s": round(float(np.median([r["cpu_s"] for r in mem_runs])), 3),
        "raw_cpu_s": round(float(np.median([r["cpu_s"] for r in raw_runs])), 3),
        "cpu_ratio": round(float(np.median([r["cpu_s"] for r in raw_runs]) / np.median([r["cpu_s"] for r in mem_runs])), 4),
        "cpu_ratio_note": "the same ratio from process CPU time (steadier than wall time on a loaded machine)",
        "memcore_disk_bytes": mem_runs[0]["bytes"],
        "raw_disk_bytes": raw_runs[0]["bytes"],
    }
    if mem_runs[0]["profile"]:
        out["memcore_profile_top_tottime"] = mem_runs[0]["profile"]
    log(f"[a] memcore {out['memcore_records_per_s']}/s, raw {out['raw_records_per_s']}/s, ratio {out['ratio']} (CPU time: {out['cpu_ratio']})")
    return out


# -- d. secure_delete cost -----------------------------------------------------------


def bench_secure_delete(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Insert, delete a tenth and close with ``secure_delete`` on and off (same items, alternating)."""
    n, batch, dim = args.n, args.batch, args.dim
    corpus = Corpus(args.seed, dim)
    texts = corpus.texts(n)
    vectors = corpus.vectors(n)
    batches = [range(s, min(s + batch, n)) for s in range(0, n, batch)]
    item_batches = [items_for(b, texts[b.start : b.stop], vectors[b.start : b.stop]) for b in batches]
    doomed = [f"r{i}" for i in range(0, n, 10)]

    def once(directory: Path, secure: bool) -> dict[str, float]:
        col = dense_collection(directory, dim)
        if not secure:
            col.store.db.execute("PRAGMA secure_delete=OFF")  # type: ignore[attr-defined]
        t = time.perf_counter()
        for items in item_batches:
            col.insert(items)
        insert_s = time.perf_counter() - t
        t = time.perf_counter()
        for s in range(0, len(doomed), batch):
            col.delete(doomed[s : s + batch])
        delete_s = time.perf_counter() - t
        t = time.perf_counter()
        col.close()
        return {"insert_s": insert_s, "delete_s": delete_s, "close_s": time.perf_counter() - t}

    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for rep in range(args.repeat):
        for secure in (True, False) if rep % 2 == 0 else (False, True):
            directory = root / f"{'on' if secure else 'off'}-{rep}"
            log(f"[d] repeat {rep + 1}/{args.repeat}: secure_delete {'ON' if secure else 'OFF'}")
            runs[secure].append(once(directory, secure))
            shutil.rmtree(directory, ignore_errors=True)
    out: dict[str, Any] = {"n": n, "dim": dim, "batch": batch, "repeat": args.repeat, "deleted": len(doomed)}
    for key in ("insert_s", "delete_s", "close_s"):
        on = float(np.median([r[key] for r in runs[True]]))
        off = float(np.median([r[key] for r in runs[False]]))
        out[key] = {"on": round(on, 4), "off": round(off, 4), "cost_ratio": round(on / off, 4) if off else None}
    out["note"] = "cost_ratio = median seconds with secure_delete ON / OFF (1.0 = free; inserts above it pay for the rows an insert replaces)"
    log(f"[d] insert on/off {out['insert_s']['cost_ratio']}, delete on/off {out['delete_s']['cost_ratio']}")
    return out


# -- b. query latency ------------------------------------------------------------------


def bench_query(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    nq, dim, k, build_batch = args.nq, args.dim, args.k, args.build_batch
    corpus = Corpus(args.seed + 100, dim)
    mdir = root / "b-memcore"
    col = dense_collection(mdir, dim)
    raw = np.empty((nq, dim), dtype=np.float32)
    log(f"[b] query: building a {nq}-record collection in batches of {build_batch}")
    build_s = 0.0
    for s in range(0, nq, build_batch):
        b = range(s, min(s + build_batch, nq))
        vec = corpus.vectors(len(b))
        raw[b.start : b.stop] = vec
        items = items_for(b, corpus.texts(len(b)), vec)
        t = time.perf_counter()
        col.insert(items)
        build_s += time.perf_counter() - t
        log(f"[b]   {b.stop}/{nq}")
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    raw_ids = [f"r{i}" for i in range(nq)]

    def raw_search(q: np.ndarray) -> list[tuple[str, float]]:
        q = q / np.linalg.norm(q)
        scores = raw @ q
        part = np.argpartition(-scores, k - 1)[:k]
        order = part[np.argsort(-scores[part])]
        return [(raw_ids[i], float(scores[i])) for i in order.tolist()]

    def mc_retrieve(q: np.ndarray) -> list[Any]:
        return col.retrieve(Query(vectors={"dense": q}, k=k), index="vec", with_records=True)

    def mc_search(q: np.ndarray) -> list[Any]:
        return col.search_index("vec", Query(vectors={"dense": q}, k=k), k)

    queries = Corpus(args.seed + 200, dim).vectors(args.queries)
    for q in queries[:5]:  # warm-up
        raw_search(q), mc_retrieve(q), mc_search(q)
    times: dict[str, list[float]] = {"raw": [], "retrieve": [], "search_index": []}
    agree = 0
    log(f"[b] timing {args.queries} queries x 3 paths (interleaved)")
    for q in queries:
        t0 = time.perf_counter()
        r = raw_search(q)
        t1 = time.perf_counter()
        hits = mc_retrieve(q)
        t2 = time.perf_counter()
        mc_search(q)
        t3 = time.perf_counter()
        times["raw"].append(t1 - t0)
        times["retrieve"].append(t2 - t1)
        times["search_index"].append(t3 - t2)
        agree += [i for i, _ in r] == [h.id for h in hits] and all(h.record is not None for h in hits)
    col.close()

    stats = {name: ms_stats(v) for name, v in times.items()}
    out: dict[str, Any] = {
        "n": nq,
        "dim": dim,
        "k": k,
        "queries": args.queries,
        "build_batch": build_batch,
        "build_records_per_s": round(nq / build_s, 1),
        "memcore_retrieve_with_records": stats["retrieve"],
        "memcore_search_index": stats["search_index"],
        "raw_numpy": stats["raw"],
        "ratio_p50_raw_over_retrieve": round(stats["raw"]["p50_ms"] / stats["retrieve"]["p50_ms"], 4),
        "ratio_p50_raw_over_search_index": round(stats["raw"]["p50_ms"] / stats["search_index"]["p50_ms"], 4),
        "ratio_qps_retrieve_over_raw": round(stats["retrieve"]["qps"] / stats["raw"]["qps"], 4),
        "ratio_qps_search_index_over_raw": round(stats["search_index"]["qps"] / stats["raw"]["qps"], 4),
        "ratio_note": "raw latency / memcore latency (1.0 = no overhead); qps ratios are memcore / raw",
        "same_top_k_as_raw": f"{agree}/{args.queries}",
    }
    log(
        f"[b] p50 raw {stats['raw']['p50_ms']} ms, retrieve {stats['retrieve']['p50_ms']} ms, "
        f"search_index {stats['search_index']['p50_ms']} ms; agreement {agree}/{args.queries}"
    )
    return out


# -- c. CLI query latency --------------------------------------------------------------

CLI_CONFIG = """\
# memcore defaults, spelled out: hashing space "default", exact index "vector"
pipeline = "basic"

[store]
kind = "sqlite"

[spaces.default]
embedder = "hashing"

[indexes.vector]
kind = "exact"
space = "default"
"""


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CORE), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("MEMCORE_LOG", None)
    return env


def _wall(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - t, proc


def _cli_missing() -> str | None:
    """None when ``python -m memcore.cli`` can be run, else why not."""
    try:
        if importlib.util.find_spec("memcore.cli") is None or importlib.util.find_spec("memcore.cli.__main__") is None:
            return "memcore.cli (core/memcore/cli/__main__.py) does not exist yet"
    except Exception as exc:  # a half-written package raises at import
        return f"memcore.cli is not importable yet: {type(exc).__name__}: {exc}"
    return None


def bench_cli(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    n, runs = args.cli_n, args.cli_runs
    cfg = root / "memcore.toml"
    cfg.write_text(CLI_CONFIG)
    cdir = root / "c-memory"
    corpus = Corpus(args.seed + 300, 1)
    log(f"[c] building a {n}-record hashing-embedder collection via memcore.open")
    t = time.perf_counter()
    memory = memcore.open(cfg, path=cdir)
    ingest_s = 0.0
    for s in range(0, n, args.build_batch):
        b = range(s, min(s + args.build_batch, n))
        items = [{"text": tx, "metadata": Corpus.metadata(i)} for i, tx in zip(b, corpus.texts(len(b)))]
        t1 = time.perf_counter()
        memory.collection.insert(items)
        ingest_s += time.perf_counter() - t1
        log(f"[c]   {b.stop}/{n}")
    count = memory.collection.count()
    memory.close()
    build_s = time.perf_counter() - t
    assert count == n, (count, n)
    query_texts = corpus.texts(max(args.inproc_queries, runs) + 5)

    out: dict[str, Any] = {
        "n": n,
        "k": args.k,
        "embedder": "hashing (256-d)",
        "index": "exact",
        "build_s_incl_embedding": round(build_s, 3),
        "ingest_records_per_s_incl_embedding": round(n / ingest_s, 1),
        "disk_bytes": dir_bytes(cdir),
    }

    # in-process: open() time, then memory.query latency
    open_times = []
    for _ in range(3):
        t = time.perf_counter()
        memory = memcore.open(cfg, path=cdir)
        open_times.append(time.perf_counter() - t)
        if _ < 2:
            memory.close()
    t = time.perf_counter()
    expected = [h.id for h in memory.query(query_texts[0], k=args.k)]
    first_query_s = time.perf_counter() - t
    lat = []
    for text in query_texts[1 : 1 + args.inproc_queries]:
        t = time.perf_counter()
        hits = memory.query(text, k=args.k)
        lat.append(time.perf_counter() - t)
    assert len(hits) == args.k
    memory.close()
    out["open_s"] = {"first": round(open_times[0], 4), "p50": round(pct(open_times, 50), 4), "runs": len(open_times)}
    out["inproc_query"] = {**ms_stats(lat), "queries": len(lat), "first_query_ms": round(first_query_s * 1e3, 3)}
    log(f"[c] open p50 {out['open_s']['p50']} s, in-process query p50 {out['inproc_query']['p50_ms']} ms")

    # interpreter baselines: what a CLI call costs before memcore does any work
    env = _subprocess_env()
    base = {"python_-c_pass": [sys.executable, "-c", "pass"], "python_-c_import_memcore": [sys.executable, "-c", "import memcore"]}
    baselines = {}
    for name, cmd in base.items():
        walls = [_wall(cmd, env)[0] for _ in range(runs)]
        baselines[name] = {"wall_p50_s": round(pct(walls, 50), 4)}
    out["interpreter_baselines"] = baselines

    # the CLI itself (guarded: it may not exist yet)
    reason = _cli_missing()
    if reason is not None:
        out["cli"] = {"skipped": True, "reason": reason}
        log(f"[c] CLI skipped: {reason}")
        return out
    cmd_base = [sys.executable, "-m", "memcore.cli", "query", "--config", str(cfg), "--path", str(cdir), "-k", str(args.k), "--json"]
    walls = []
    for i in range(runs + 1):  # the first run warms the OS file cache and is reported apart
        wall, proc = _wall([*cmd_base, query_texts[i]], env)
        if proc.returncode != 0:
            out["cli"] = {
                "skipped": True,
                "reason": f"`memcore query` exited {proc.returncode}",
                "stderr_tail": proc.stderr[-800:],
            }
            log(f"[c] CLI failed: exit {proc.returncode}: {proc.stderr[-300:]}")
            return out
        try:
            printed = json.loads(proc.stdout)
        except ValueError:
            printed = None
            out["cli_output_not_json"] = proc.stdout[:300]
        if i == 0:  # same text as the in-process first query: the CLI must find the same hits
            same_hits = isinstance(printed, list) and [row.get("id") for row in printed if isinstance(row, dict)] == expected
        walls.append(wall)
    out["cli"] = {
        "command": "python -m memcore.cli query --config CFG --path DIR -k K --json TEXT",
        "runs": runs,
        "first_run_wall_s": round(walls[0], 4),
        "wall_p50_s": round(pct(walls[1:], 50), 4),
        "wall_max_s": round(max(walls[1:]), 4),
        "same_hits_as_inproc": same_hits,
        "ratio_inproc_query_over_cli_wall_p50": round(out["inproc_query"]["p50_ms"] / 1e3 / pct(walls[1:], 50), 6),
        "note": "wall includes interpreter start, imports, open() (index load + checksum) and one query",
    }
    log(f"[c] CLI wall p50 {out['cli']['wall_p50_s']} s")
    return out


# -- environment -----------------------------------------------------------------------


def threadpools() -> Any:
    """threadpoolctl's view of the BLAS / OpenMP thread pools ("not installed" without it)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "not installed"
    return [{k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture", "threading_layer")} for p in threadpool_info()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int, default=None, help="records for the insert benchmark (a); default 20000, --quick 5000")
    p.add_argument("--nq", type=int, default=None, help="records for the query benchmark (b); default 100000, --quick 20000")
    p.add_argument("--cli-n", type=int, default=None, help="records for the CLI benchmark (c); default --nq")
    p.add_argument("--dim", type=int, default=384, help="vector dimension of (a) and (b)")
    p.add_argument("--batch", type=int, default=1000, help="insert batch size of (a)")
    p.add_argument("--build-batch", type=int, default=10000, help="batch size when building the (b) and (c) collections")
    p.add_argument("--queries", type=int, default=None, help="timed queries per path in (b); default 200, --quick 50")
    p.add_argument("--inproc-queries", type=int, default=None, help="in-process queries in (c); default 50, --quick 20")
    p.add_argument("--cli-runs", type=int, default=None, help="timed CLI runs in (c), after one warm-up; default 5, --quick 3")
    p.add_argument("--repeat", type=int, default=3, help="alternating memcore/raw repeats of (a); medians are reported")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--parts", default="a,b,c", help="comma-separated subset of a (insert), b (query), c (cli), d (secure_delete cost; not in the default)")
    p.add_argument("--quick", action="store_true", help="small smoke run (N=5000, N_q=20000)")
    p.add_argument("--profile", action="store_true", help="run the memcore insert of (a) under cProfile and report the top functions")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    args = p.parse_args(argv)
    defaults = {"n": (20000, 5000), "nq": (100000, 20000), "queries": (200, 50), "inproc_queries": (50, 20), "cli_runs": (5, 3)}
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.cli_n is None:
        args.cli_n = args.nq
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = set(args.parts) - {"a", "b", "c", "d"}
    if unknown:
        p.error(f"unknown parts {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = header("bench_collection", args, argv=argv, sqlite=sqlite3.sqlite_version, threadpoolctl=threadpools())
    started = time.perf_counter()
    parts = {"a": ("insert", bench_insert), "b": ("query", bench_query), "c": ("cli", bench_cli), "d": ("secure_delete", bench_secure_delete)}
    with tempfile.TemporaryDirectory(prefix="memcore-bench-") as tmp:
        for key in args.parts:
            name, fn = parts[key]
            root = Path(tmp) / name
            root.mkdir()
            try:
                result[name] = fn(args, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    result["total_s"] = round(time.perf_counter() - started, 2)
    finish_environment(result["environment"])
    emit(result, args.out)
    log(f"done in {result['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
