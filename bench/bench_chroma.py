#!/usr/bin/env python
"""memcore-chroma benchmark: the ``chroma`` index against raw chromadb on the same vectors,
same process, same run.

- **insert**: ``ChromaIndex.add`` (validation, normalisation, ``upsert`` batches of
  ``get_max_batch_size()``) vs raw ``collection.upsert`` (the same semantics: re-adding
  replaces) and raw ``collection.add``, the same batches, both in a ``PersistentClient``
  on disk (the memcore index in its own folder, ``IndexContext.directory``, where a new
  embedded index lives from its first write; raw chromadb in a folder beside it);
  the three interleaved batch by batch (rotating order) into three fresh collections;
  ``ratio = memcore points/s / raw points/s`` (target >= 0.9), ``memcore_own_s`` the time
  of memcore's own work (validation, normalisation) on those batches;
- **query**: ``ChromaIndex.search`` (on a ``Query`` built beforehand) vs raw
  ``collection.query(n_results=k, include=["distances"])``, one query at a time,
  interleaved (the order cycles through all permutations so load hits all alike); p50 ms, QPS ratio,
  the same raw call on the memcore index's own collection (``memcore_overhead_p50_ms``:
  memcore's p50 minus that call's p50, a difference of two medians that load swings by a
  millisecond or more either way), and ``memcore_own_p50_ms``: memcore's own share measured
  inside each ``ChromaIndex.search`` call, its time minus the time of the Chroma ``query``
  it makes (a timing wrapper around the index's collection), p50 over the queries,
  recall@k of both against exact numpy search; and with an ``allowed`` set of 10% of the
  ids passed as ``ids=`` by both;
- **save**: the first ``save`` of the embedded index (only ``state.json``: the collection
  already lives in the index folder);
- **server**: the same against a ``chroma run`` server on 127.0.0.1 (``--server-n``
  points): insert and query ratio to raw ``HttpClient``, and server over embedded latency.

Data: ``--n`` (100,000; ``--quick`` 20,000) vectors of ``--dim`` (384) around 1,000
Gaussian centres, normalised; ``--queries`` (200) drawn the same way.

    python bench/bench_chroma.py --quick
    python bench/bench_chroma.py --n 100000 --server-n 100000

Never run as a test: timings belong here (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, pct, use_checkout

use_checkout("chroma", "chroma-support")

from memcore_chroma_support import chroma_server  # noqa: E402
from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_chroma import ChromaIndexConfig  # noqa: E402
from memcore_chroma.index import ChromaIndex  # noqa: E402


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim)).astype(np.float32)
    x = centres[rng.integers(0, 1000, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def insert_part(make_raw: Callable[[str], Any], index: ChromaIndex, x: np.ndarray, records: list[Record], batch: int) -> dict[str, Any]:
    """Raw upsert, raw add and memcore add of the same vectors, each into a fresh collection,
    interleaved batch by batch (the order rotates): drifting load and the server's growing
    state hit the three alike. ``memcore_own_s``: memcore's share (validation, normalisation,
    stacking), timed apart on the same batches."""
    ids = [r.id for r in records]
    n = len(ids)
    out: dict[str, Any] = {"n": n, "batch": batch}
    cols = {kind: make_raw(kind) for kind in ("upsert", "add")}
    spent = {"upsert": 0.0, "memcore": 0.0, "add": 0.0}
    own = 0.0
    for b, s in enumerate(range(0, n, batch)):
        order = ORDERS3[b % len(ORDERS3)]
        for who in order:
            if who == "memcore":
                spent[who] += timed(lambda s=s: index.add(records[s : s + batch]))
            else:
                fn = cols[who].upsert if who == "upsert" else cols[who].add
                spent[who] += timed(lambda s=s, fn=fn: fn(ids=ids[s : s + batch], embeddings=x[s : s + batch]))
        part = records[s : s + batch]
        own += timed(lambda part=part: index._matrix(part))  # what add does before Chroma: checks + normalisation
        if b % 5 == 0:
            log(f"  {min(s + batch, n)}/{n}")
    out["raw_upsert_points_per_s"] = round(n / spent["upsert"])
    out["memcore_points_per_s"] = round(n / spent["memcore"])
    out["raw_add_points_per_s"] = round(n / spent["add"])
    out["memcore_own_s"] = round(own, 2)
    out["memcore_s"] = round(spent["memcore"], 1)
    out["ratio_vs_raw_upsert"] = round(out["memcore_points_per_s"] / out["raw_upsert_points_per_s"], 3)
    out["ratio_vs_raw_add"] = round(out["memcore_points_per_s"] / out["raw_add_points_per_s"], 3)
    return out


ORDERS3 = list(itertools.permutations(("upsert", "memcore", "add")))


def exact_top(x: np.ndarray, q: np.ndarray, k: int, allowed_rows: np.ndarray | None) -> set[str]:
    """The true top-k ids by numpy (cosine on normalised vectors)."""
    rows = allowed_rows if allowed_rows is not None else np.arange(len(x))
    scores = x[rows] @ q
    best = rows[np.argsort(-scores, kind="stable")[:k]]
    return {f"r{i}" for i in best}


ORDERS = list(itertools.permutations(("raw", "memcore", "own")))


class TimedCollection:
    """The index's Chroma collection with its ``query`` calls timed (``inside``: seconds
    spent in them since the last reset); everything else passes through."""

    def __init__(self, collection: Any):
        self.collection, self.inside = collection, 0.0

    def query(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.collection.query(*args, **kwargs)
        finally:
            self.inside += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collection, name)


def query_part(raw_col: Any, index: ChromaIndex, x: np.ndarray, queries: np.ndarray, k: int, allowed: set[str] | None) -> dict[str, Any]:
    """Interleaved one-by-one queries; p50 ms, QPS ratio, recall@k of both against exact search."""
    lat: dict[str, list[float]] = {"raw": [], "memcore": [], "own": []}
    memcore_own: list[float] = []  # per memcore call: its time minus its Chroma query's
    timed_collection = TimedCollection(index.home.collection)
    recall: dict[str, list[float]] = {"raw": [], "memcore": []}
    allowed_list = sorted(allowed) if allowed is not None else None
    allowed_rows = np.array(sorted(int(i[1:]) for i in allowed)) if allowed is not None else None
    built = [Query(vectors={"default": q}) for q in queries]  # the caller's Query, made before timing
    for i, q in enumerate(queries):
        got: dict[str, list[str]] = {}
        for who in ORDERS[i % len(ORDERS)]:  # every position as often: no side gains from going first or last
            t0 = time.perf_counter()
            if who == "raw":
                res = raw_col.query(query_embeddings=q[None, :], n_results=k, ids=allowed_list, include=["distances"])
                got[who] = res["ids"][0]
            elif who == "own":  # the raw call on the memcore index's own collection: Chroma's share of memcore's time
                index.home.collection.query(query_embeddings=q[None, :], n_results=k, ids=allowed_list, include=["distances"])
            else:
                real, index.home._collection = index.home._collection, timed_collection
                timed_collection.inside = 0.0
                t0 = time.perf_counter()
                try:
                    got[who] = [h.id for h in index.search(built[i], k, allowed)]
                finally:
                    index.home._collection = real
                memcore_own.append(time.perf_counter() - t0 - timed_collection.inside)
            lat[who].append(time.perf_counter() - t0)
        truth = exact_top(x, q, k, allowed_rows)
        for who in got:
            recall[who].append(len(truth & set(got[who])) / k)
    raw_p50, mc_p50 = statistics.median(lat["raw"]), statistics.median(lat["memcore"])
    return {
        "queries": len(queries),
        "k": k,
        "allowed": None if allowed is None else len(allowed),
        "raw_p50_ms": round(raw_p50 * 1000, 3),
        "memcore_p50_ms": round(mc_p50 * 1000, 3),
        "raw_p95_ms": round(pct(lat["raw"], 95) * 1000, 3),
        "memcore_p95_ms": round(pct(lat["memcore"], 95) * 1000, 3),
        "qps_ratio": round(raw_p50 / mc_p50, 3),
        # the same raw call on memcore's own collection: what of the gap is memcore's code
        "raw_on_memcore_collection_p50_ms": round(statistics.median(lat["own"]) * 1000, 3),
        "memcore_overhead_p50_ms": round((mc_p50 - statistics.median(lat["own"])) * 1000, 3),
        "memcore_own_p50_ms": round(statistics.median(memcore_own) * 1000, 3),
        "memcore_own_p95_ms": round(pct(memcore_own, 95) * 1000, 3),
        "raw_recall_at_k": round(float(np.mean(recall["raw"])), 4),
        "memcore_recall_at_k": round(float(np.mean(recall["memcore"])), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--server-n", type=int, default=None, help="points on the server (default --n)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="--n 20000 --queries 100")
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.queries = 20_000, 100
    server_n = args.server_n or args.n
    import chromadb
    from chromadb.config import Settings

    result = header("chroma", args, chromadb=chromadb.__version__)
    x = clustered(args.n, args.dim, args.seed)
    queries = clustered(args.queries, args.dim, args.seed + 1)
    records = [Record(id=f"r{i}", text="", vectors={"default": x[i]}) for i in range(args.n)]
    spaces = {"default": SpaceInfo("default", args.dim, "bench")}
    context = IndexContext(name="bench", spaces=spaces)
    rng = np.random.default_rng(args.seed + 2)
    allowed = {f"r{i}" for i in rng.choice(args.n, args.n // 10, replace=False)}
    config = {"hnsw": {"space": "cosine"}}

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "index"
        client = chromadb.PersistentClient(path=str(Path(tmp) / "raw"), settings=Settings(anonymized_telemetry=False, allow_reset=False))
        batch = int(client.get_max_batch_size())
        made: dict[str, Any] = {}

        def make_raw(kind: str) -> Any:
            made[kind] = client.create_collection(f"raw-{kind}", configuration=config, embedding_function=None)
            return made[kind]

        index = ChromaIndex(ChromaIndexConfig(), IndexContext(name="bench", spaces=spaces, directory=folder))
        log("embedded insert")
        result["embedded_insert"] = insert_part(make_raw, index, x, records, batch)
        log("embedded query")
        result["embedded_query"] = query_part(made["upsert"], index, x, queries, args.k, None)
        log("embedded query, 10% allowed")
        result["embedded_query_allowed"] = query_part(made["upsert"], index, x, queries[: max(20, args.queries // 4)], args.k, allowed)
        folder.mkdir(exist_ok=True)
        result["embedded_first_save_s"] = round(timed(lambda: index.save(folder)), 2)
        log("persistent query after save")
        result["persistent_query"] = query_part(made["upsert"], index, x, queries[: max(20, args.queries // 4)], args.k, None)

        if not args.no_server:
            with chroma_server(Path(tmp)) as (host, port):
                http = chromadb.HttpClient(host=host, port=port, settings=Settings(anonymized_telemetry=False))  # a Settings of its own: HttpClient mutates it
                hmade: dict[str, Any] = {}

                def make_http(kind: str) -> Any:
                    hmade[kind] = http.create_collection(f"raw-{kind}", configuration=config, embedding_function=None)
                    return hmade[kind]

                remote = ChromaIndex(ChromaIndexConfig(connection={"mode": "http", "host": host, "port": port}), context)
                log(f"server insert {server_n}")
                result["server_insert"] = insert_part(make_http, remote, x[:server_n], records[:server_n], batch)
                log("server query")
                result["server_query"] = query_part(hmade["upsert"], remote, x[:server_n], queries, args.k, None)
                small = index
                if server_n != args.n:
                    small = ChromaIndex(ChromaIndexConfig(), IndexContext(name="bench", spaces=spaces, directory=Path(tmp) / "small"))
                    small.add(records[:server_n])
                lat: dict[str, list[float]] = {"embedded": [], "server": []}
                for i, q in enumerate(queries):
                    for who in [("embedded", "server"), ("server", "embedded")][i % 2]:
                        target = small if who == "embedded" else remote
                        lat[who].append(timed(lambda target=target, q=q: target.search(Query(vectors={"default": q}), args.k)))
                result["server_vs_embedded"] = {
                    "n": server_n,
                    "embedded_p50_ms": round(statistics.median(lat["embedded"]) * 1000, 3),
                    "server_p50_ms": round(statistics.median(lat["server"]) * 1000, 3),
                    "server_over_embedded": round(statistics.median(lat["server"]) / statistics.median(lat["embedded"]), 2),
                }
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
