#!/usr/bin/env python
"""Graph index benchmark: memcore's ``graph`` index against raw networkx, same process and run.

On a random directed graph (``--nodes`` 100,000 records, ``--edges`` 500,000 links,
uniform endpoints, no self-links, no duplicate pairs) it measures:

build     -- adding the records with their links to ``GraphIndex`` (``Index.add`` in
             batches of ``--batch``; validation, pending-link bookkeeping and node
             attributes included) against building ``networkx.DiGraph`` with
             ``add_edges_from`` (bare, and with the same relation/weight attributes).
             The records go straight to the index, not through a SQLite Collection:
             this measures the index, not the store.
traverse  -- BFS to depth ``--depth`` from ``--queries`` random start nodes:
             ``GraphIndex.search(Query(extras={"graph": {"mode": "traverse", ...}}), k)`` with k
             large enough to return every node reached, against
             ``nx.single_source_shortest_path_length(G, s, cutoff=depth)`` and
             ``nx.bfs_tree(G, s, depth_limit=depth)`` on the same graph. Per query the
             three run back to back (alternating), ``--repeat`` rounds; p50/p95 ms per
             round, medians over rounds, ratios memcore / raw. Every query's node set is
             checked against the raw result. Also ``search_batch``, a k=10 search (stops
             after 10 hits) and an ``expand`` search, memcore only.
persist   -- ``save``/``load`` of the index (node-link JSON, load checks every edge)
             against ``json.dumps(nx.node_link_data(G, edges="edges"))`` written to a
             file and ``nx.node_link_graph(json.loads(...), edges="edges")``; alternating,
             ``--repeat`` rounds, medians; reloaded results compared with the original.

Run from the repository root (networkx and memcore-graph installed)::

    python bench/bench_graph.py --quick
    python bench/bench_graph.py                       # 100k nodes / 500k edges, depth 2

Progress goes to stderr; ONE JSON object goes to stdout. Never a test (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, pct, use_checkout

use_checkout("graph")

import networkx as nx  # noqa: E402

from memcore.plugin import IndexContext
from memcore import Link, Query, Record
from memcore_graph import GraphIndexConfig  # noqa: E402
from memcore_graph.index import GraphIndex  # noqa: E402


def make_edges(nodes: int, edges: int, seed: int) -> np.ndarray:
    """``edges`` distinct (u, v) pairs, u != v, uniform over ``nodes`` (int64 array, rows sorted by u)."""
    rng = np.random.default_rng(seed)
    pairs = np.empty((0, 2), dtype=np.int64)
    while pairs.shape[0] < edges:
        need = int((edges - pairs.shape[0]) * 1.05) + 16
        cand = rng.integers(0, nodes, size=(need, 2), dtype=np.int64)
        cand = cand[cand[:, 0] != cand[:, 1]]
        pairs = np.unique(np.concatenate([pairs, cand]), axis=0)
    keep = rng.choice(pairs.shape[0], size=edges, replace=False)
    pairs = pairs[np.sort(keep)]
    return pairs


def make_records(nodes: int, pairs: np.ndarray) -> list[Record]:
    """One Record per node (id ``n<i>``, a short text), its links from ``pairs``."""
    ids = [f"n{i}" for i in range(nodes)]
    links: list[list[Link]] = [[] for _ in range(nodes)]
    for u, v in pairs.tolist():
        links[u].append(Link(ids[v], "related", 1.0))
    return [Record(id=ids[i], text=f"record {i}", links=tuple(links[i])) for i in range(nodes)]


def build_memcore(records: list[Record], batch: int, directed: bool) -> tuple[GraphIndex, float]:
    config = GraphIndexConfig(directed=directed, entity_extraction="none", entity_nodes=False, max_depth=2, max_nodes=10**9)
    index = GraphIndex(config, IndexContext("bench"))
    gc.collect()
    started = time.perf_counter()
    for i in range(0, len(records), batch):
        index.add(records[i : i + batch])
    return index, time.perf_counter() - started


def build_raw(nodes: int, pairs: np.ndarray, directed: bool, attrs: bool) -> tuple[Any, float]:
    ids = [f"n{i}" for i in range(nodes)]
    gc.collect()
    started = time.perf_counter()
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(ids)
    if attrs:
        graph.add_edges_from((ids[u], ids[v], {"relation": "related", "weight": 1.0}) for u, v in pairs.tolist())
    else:
        graph.add_edges_from((ids[u], ids[v]) for u, v in pairs.tolist())
    return graph, time.perf_counter() - started


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - started) * 1000.0


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(ms, 50), 4), "p95_ms": round(pct(ms, 95), 4), "mean_ms": round(statistics.fmean(ms), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000, help="records / nodes (default 100,000)")
    ap.add_argument("--edges", type=int, default=500_000, help="links / edges (default 500,000)")
    ap.add_argument("--depth", type=int, default=2, help="BFS depth (default 2)")
    ap.add_argument("--queries", type=int, default=300, help="random start nodes (default 300)")
    ap.add_argument("--repeat", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--build-repeat", type=int, default=3, help="builds of each kind, alternating (default 3)")
    ap.add_argument("--batch", type=int, default=10_000, help="records per Index.add call (default 10,000)")
    ap.add_argument("--undirected", action="store_true", help="undirected graphs on both sides")
    ap.add_argument("--skip-persist", action="store_true", help="skip the save/load part")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 10,000 nodes, 50,000 edges, 100 queries, 1 build")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.edges, args.queries, args.build_repeat = 10_000, 50_000, 100, 1
    directed = not args.undirected
    result = header("graph", args, networkx=nx.__version__)
    log(f"graph: {args.nodes:,} nodes, {args.edges:,} edges, directed={directed}, load average {result['environment']['loadavg_at_start']}")

    pairs = make_edges(args.nodes, args.edges, args.seed)
    records = make_records(args.nodes, pairs)
    log(f"records ready ({len(records):,})")

    # -- build ---------------------------------------------------------------------------
    builds: dict[str, list[float]] = {"memcore": [], "raw_bare": [], "raw_attrs": []}
    index = raw = None
    for round_ in range(args.build_repeat):
        index = raw = None
        gc.collect()
        raw_attrs, t = build_raw(args.nodes, pairs, directed, attrs=True)
        builds["raw_attrs"].append(t)
        del raw_attrs
        index, t = build_memcore(records, args.batch, directed)
        builds["memcore"].append(t)
        raw, t = build_raw(args.nodes, pairs, directed, attrs=False)
        builds["raw_bare"].append(t)
        log(f"build round {round_ + 1}: memcore {builds['memcore'][-1]:.2f}s, raw bare {builds['raw_bare'][-1]:.2f}s, raw attrs {builds['raw_attrs'][-1]:.2f}s")
    assert index is not None and raw is not None
    assert index.graph.number_of_edges() == raw.number_of_edges() and index.stats()["pending_links"] == 0
    build = {k: round(statistics.median(v), 3) for k, v in builds.items()}
    build_out = {
        "memcore_s": build["memcore"],
        "raw_bare_s": build["raw_bare"],
        "raw_attrs_s": build["raw_attrs"],
        "ratio_memcore_over_raw_bare": round(build["memcore"] / build["raw_bare"], 3),
        "ratio_memcore_over_raw_attrs": round(build["memcore"] / build["raw_attrs"], 3),
        "records_per_s_memcore": round(args.nodes / build["memcore"]),
        "rounds": args.build_repeat,
        "batch": args.batch,
    }

    # -- traverse ------------------------------------------------------------------------
    rng = np.random.default_rng(args.seed + 1)
    starts = [f"n{i}" for i in rng.integers(0, args.nodes, size=args.queries).tolist()]
    big_k = args.nodes
    queries = [Query(extras={"graph": {"mode": "traverse", "start": [s], "max_depth": args.depth}}) for s in starts]
    k10 = [Query(extras={"graph": {"mode": "traverse", "start": [s], "max_depth": args.depth}}, k=10) for s in starts]
    expand = [Query(extras={"graph": {"mode": "expand", "seeds": {s: 1.0}, "max_depth": args.depth}}) for s in starts]
    visited: list[int] = []
    mismatches = 0
    for q, s in zip(queries, starts):  # correctness + warm-up
        got = {h.id for h in index.search(q, big_k)}
        visited.append(index.last_visited)
        want = set(nx.single_source_shortest_path_length(raw, s, cutoff=args.depth))
        mismatches += got != want or got != set(nx.bfs_tree(raw, s, depth_limit=args.depth))
    rounds: list[dict[str, dict[str, float]]] = []
    for round_ in range(args.repeat):
        ms: dict[str, list[float]] = {"memcore": [], "raw_sspl": [], "raw_bfs_tree": [], "memcore_k10": [], "memcore_expand": []}
        gc.collect()
        gc.disable()
        try:
            for i, (q, s) in enumerate(zip(queries, starts)):
                order = ("raw_sspl", "memcore", "raw_bfs_tree") if (i + round_) % 2 == 0 else ("raw_bfs_tree", "memcore", "raw_sspl")
                for name in order:
                    if name == "memcore":
                        ms[name].append(timed(lambda q=q: index.search(q, big_k))[1])
                    elif name == "raw_sspl":
                        ms[name].append(timed(lambda s=s: nx.single_source_shortest_path_length(raw, s, cutoff=args.depth))[1])
                    else:
                        ms[name].append(timed(lambda s=s: nx.bfs_tree(raw, s, depth_limit=args.depth))[1])
                ms["memcore_k10"].append(timed(lambda i=i: index.search(k10[i], 10))[1])
                ms["memcore_expand"].append(timed(lambda i=i: index.search(expand[i], big_k))[1])
            batch_runs: list[float] = []
            raw_batch_runs: list[float] = []
            for _ in range(3):  # alternating, median of three
                batch_runs.append(timed(lambda: index.search_batch(queries, big_k))[1])
                raw_batch_runs.append(timed(lambda: [nx.single_source_shortest_path_length(raw, s, cutoff=args.depth) for s in starts])[1])
            batch_ms, raw_batch_ms = statistics.median(batch_runs), statistics.median(raw_batch_runs)
        finally:
            gc.enable()
        rounds.append({**{k: summary(v) for k, v in ms.items()}, "batch": {"memcore_ms": batch_ms, "raw_sspl_loop_ms": raw_batch_ms}})
        log(
            f"traverse round {round_ + 1}: memcore p50 {rounds[-1]['memcore']['p50_ms']:.3f} ms, raw sspl p50 {rounds[-1]['raw_sspl']['p50_ms']:.3f} ms, raw bfs_tree p50 {rounds[-1]['raw_bfs_tree']['p50_ms']:.3f} ms"
        )

    def med(path: tuple[str, str]) -> float:
        return round(statistics.median(r[path[0]][path[1]] for r in rounds), 4)  # type: ignore[index]

    def ratio(a: str, b: str, stat: str) -> float:
        return round(statistics.median(r[a][stat] / r[b][stat] for r in rounds), 3)

    traverse = {
        "depth": args.depth,
        "queries": args.queries,
        "rounds": args.repeat,
        "k": big_k,
        "nodes_visited": {"mean": round(statistics.fmean(visited), 1), "p50": pct(visited, 50), "p95": pct(visited, 95), "max": max(visited)},
        "results_match_raw": f"{args.queries - mismatches}/{args.queries}",
        **{
            name: {stat: med((name, stat)) for stat in ("p50_ms", "p95_ms", "mean_ms")}
            for name in ("memcore", "raw_sspl", "raw_bfs_tree", "memcore_k10", "memcore_expand")
        },
        "ratio_p50_memcore_over_raw_sspl": ratio("memcore", "raw_sspl", "p50_ms"),
        "ratio_p95_memcore_over_raw_sspl": ratio("memcore", "raw_sspl", "p95_ms"),
        "ratio_p50_memcore_over_raw_bfs_tree": ratio("memcore", "raw_bfs_tree", "p50_ms"),
        "ratio_p95_memcore_over_raw_bfs_tree": ratio("memcore", "raw_bfs_tree", "p95_ms"),
        "search_batch_ms": med(("batch", "memcore_ms")),
        "raw_sspl_loop_ms": med(("batch", "raw_sspl_loop_ms")),
        "ratio_search_batch_over_raw_loop": round(statistics.median(r["batch"]["memcore_ms"] / r["batch"]["raw_sspl_loop_ms"] for r in rounds), 3),
    }

    # -- persist -------------------------------------------------------------------------
    persist: dict[str, Any] = {"skipped": True}
    if not args.skip_persist:
        runs: dict[str, list[float]] = {"save": [], "load": [], "raw_save": [], "raw_load": []}
        same = True
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            raw_path = directory / "raw.json"
            for round_ in range(args.repeat):  # alternating memcore / raw
                runs["save"].append(timed(lambda: index.save(directory))[1])
                runs["raw_save"].append(timed(lambda: raw_path.write_text(json.dumps(nx.node_link_data(raw, edges="edges"), separators=(",", ":"))))[1])
                fresh = GraphIndex(index.config, IndexContext("bench"))
                runs["load"].append(timed(lambda fresh=fresh: fresh.load(directory))[1])
                runs["raw_load"].append(timed(lambda: nx.node_link_graph(json.loads(raw_path.read_text()), edges="edges"))[1])
                same = same and all([h.id for h in fresh.search(q, big_k)] == [h.id for h in index.search(q, big_k)] for q in queries[:50])
                del fresh
                gc.collect()
                log(
                    f"persist round {round_ + 1}: save {runs['save'][-1] / 1000:.2f}s (raw {runs['raw_save'][-1] / 1000:.2f}s), load {runs['load'][-1] / 1000:.2f}s (raw {runs['raw_load'][-1] / 1000:.2f}s)"
                )
            size = (directory / "graph.json").stat().st_size
        med_s = {key: statistics.median(v) / 1000 for key, v in runs.items()}
        persist = {
            "memcore_save_s": round(med_s["save"], 3),
            "memcore_load_s": round(med_s["load"], 3),
            "raw_node_link_save_s": round(med_s["raw_save"], 3),
            "raw_node_link_load_s": round(med_s["raw_load"], 3),
            "ratio_save_memcore_over_raw": round(med_s["save"] / med_s["raw_save"], 3),
            "ratio_load_memcore_over_raw": round(med_s["load"] / med_s["raw_load"], 3),
            "file_mb": round(size / 2**20, 2),
            "rounds": args.repeat,
            "reloaded_results_identical": same,
        }

    result["graph"] = {"nodes": args.nodes, "edges": args.edges, "directed": directed, "seed": args.seed}
    result.update(build=build_out, traverse=traverse, persist=persist)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
