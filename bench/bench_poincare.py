#!/usr/bin/env python
"""HyperAmy (memcore-poincare) benchmark: the batched four-step search against the design's
per-candidate loop, same process, same Chroma collection, same run.

The design note's ``HyperAmyRetrieval.search`` (seed 001, section 4.2) is ported as is
(:class:`DesignLoop`): one ``compute_state`` per candidate with torch tensors, one
``_poincare_dist`` call each, the neighbours' scores in a loop too. memcore's
:class:`HyperAmyRetrieval` projects every candidate and computes every distance in one
numpy operation. Both read the same Chroma results, so the comparison is reported twice:

- ``search``: the whole search, p50 ms: memcore's (``search_batched``: the in-memory
  particle mirror answers the cone, exact, and the neighbours; ``search_chroma_cone``: the
  mirror with Chroma's HNSW cone query, ids only, ``cone="chroma"``; ``search_chroma``: the
  mirror off, a Chroma cone query and a neighbour ``get``, as on a server) vs the design's
  loop (Chroma query + one step per candidate); ``--runs`` repeats it (same data), each
  row with the load average;
- ``snapshot``: the mirror snapshot of the storage: first save (the base), its size, the
  reopen that reads it (checked against Chroma's write position), and a second save after
  100 upserts and 10 deletes (a delta segment); ``mirror_build_s`` is the rebuild from
  Chroma it replaces (paid on the first search after a reopen without a valid snapshot);
  ``search_many_p50_ms_per_query``: every query in one ``search_many`` call (one cone
  step for all), :data:`MANY_REPEATS` calls; a query's time is its own cone and steps 2-4
  (each timed per query) plus its share of the rest of the call (checks, preparation),
  p50 over queries and calls (``search_many_mean_ms_per_query``: wall time / queries,
  which any pause of a loaded machine during the call swings);
- ``cone_stats``: the float16 pre-scan of the mirror's cone since the start (cones it
  answered with its exactness certificate, cones it left to the float32 scan);
- ``shell``: steps 2-4 on Chroma results fetched beforehand (still one Chroma ``get`` for
  the neighbours), p50 ms;
- ``score``: step 2 alone, the projection and distance of every cone candidate (what the
  batching replaces: ``cone_width`` Python iterations vs one array operation), p50 ms.

For each ``--cones`` width (50, 100, 500) on ``--n`` points (100,000; ``--quick`` 20,000)
of ``--dim`` (64) dimensions: p50 latencies, ``speedup`` (loop / batched) and whether the
rankings agree (same ids in the same order; the design adds 1e-7 inside its distance, so
exact ties can order differently: ``same_ids`` counts equal id sets too). memcore's cone is
exact, the loop's is Chroma's HNSW query: ``chroma_cone_recall`` is the share of the exact
cone Chroma returns, and ``same_ranking_as_loop_on_exact_cone`` compares memcore with the
design loop fed the exact cone (its payload read from Chroma). Then the
batched search embedded (``PersistentClient``) vs on a ``chroma run`` server on
127.0.0.1 with the same points (``--server-n``, default ``--n``).

    python bench/bench_poincare.py --quick
    python bench/bench_poincare.py                  # 100k points
    python bench/bench_poincare.py --n 100000 --server-n 20000

Never run as a test: timings belong here (docs/architecture.md §8).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit, finish_environment, header, loadavg, log, pct, use_checkout

use_checkout("poincare", "chroma-support")

from memcore_chroma_support import chroma_server  # noqa: E402
from memcore_poincare import ChromaConnection, HyperAmyRetrieval, HyperAmyStorage, ParticleProjector, Point  # noqa: E402
from memcore_poincare.retrieval import Candidates, neighbour_ids, _links  # noqa: E402
from memcore_poincare.storage import SNAPSHOT_DIR  # noqa: E402
from memcore_poincare.types import SearchResult  # noqa: E402


MANY_REPEATS = 7
"""``search_many`` calls over every query per cone width (their per-query time's p50 is reported)."""


# -- the design's per-candidate loop ------------------------------------------------------------


class DesignLoop:
    """The design note's retrieval, step for step (torch per candidate)."""

    def __init__(self, collection: Any, curvature: float = 1.0, scaling_factor: float = 2.0):
        import math

        import torch
        import torch.nn.functional as F

        self.torch, self.F = torch, F
        self.collection = collection
        self.c, self.scaling_factor, self.sqrt_c = curvature, scaling_factor, math.sqrt(curvature)

    def compute_state(self, vec, v, T, born, t_now):
        torch, F = self.torch, self.F
        v_current, T_current = max(0.0, v), max(0.0, T)
        if torch.norm(vec) < 1e-9:
            direction = torch.zeros_like(vec)
        else:
            direction = F.normalize(vec, p=2, dim=-1)
        arg = self.sqrt_c * v_current * self.scaling_factor / 2.0
        r = torch.tanh(torch.tensor(arg, dtype=vec.dtype)) / self.sqrt_c
        return {"current_vector": r * direction, "current_v": v_current, "current_T": T_current}

    def _poincare_dist(self, u, v):
        torch = self.torch
        sq_dist = torch.sum((u - v) ** 2)
        u_sq, v_sq = torch.sum(u**2), torch.sum(v**2)
        denom = (1 - u_sq) * (1 - v_sq) + 1e-7
        arg = torch.clamp(1 + 2 * sq_dist / denom, min=1.0 + 1e-7)
        return torch.acosh(arg).item()

    def _score(self, dq, vec, meta, t_now):
        dc = self.compute_state(self.torch.tensor(vec), meta["v"], meta["T"], meta["born"], t_now)
        return self._poincare_dist(dq["current_vector"], dc["current_vector"])

    def search(self, query_point, top_k=3, cone_width=50, max_neighbors=20, neighbor_penalty=1.1, t_now=None, fetched=None):
        torch = self.torch
        dq = self.compute_state(query_point.emotion_vector, query_point.v, query_point.T, query_point.born, t_now)
        if fetched is None:
            q = self.F.normalize(query_point.emotion_vector, p=2, dim=-1).tolist()
            fetched = self.collection.query(query_embeddings=[q], n_results=cone_width, include=["metadatas", "embeddings"])
        ids, metas, vecs = fetched["ids"][0], fetched["metadatas"][0], fetched["embeddings"][0]
        scored = []
        for pid, meta, vec in zip(ids, metas, vecs):
            scored.append(SearchResult(pid, self._score(dq, vec, meta, t_now), meta, vec, "direct"))
        scored.sort(key=lambda x: x.score)
        top = scored[:top_k]
        neighbor_ids = []
        for cand in top:
            links = json.loads(cand.metadata.get("links", "[]"))
            neighbor_ids.extend(links[:max_neighbors])
        existing = {c.id for c in top}
        neighbor_ids = list(set(neighbor_ids) - existing)[: max_neighbors * top_k]
        if neighbor_ids:
            nb = self.collection.get(ids=neighbor_ids, include=["metadatas", "embeddings"])
            for i, nid in enumerate(nb["ids"]):
                score = self._score(dq, nb["embeddings"][i], nb["metadatas"][i], t_now) * neighbor_penalty
                top.append(SearchResult(nid, score, nb["metadatas"][i], nb["embeddings"][i], "neighbor"))
        top.sort(key=lambda x: x.score)
        del torch
        return top[:top_k]


def batched_shell(retrieval: HyperAmyRetrieval, query_point: Point, fetched: dict, top_k: int, max_neighbors: int, penalty: float, t_now: float):
    """Steps 2-4 of memcore's search on pre-fetched Chroma results (mirrors HyperAmyRetrieval.search)."""
    proj = retrieval.projector
    _, q = retrieval.query_state(query_point, t_now)
    cands = Candidates.from_chroma(fetched["ids"][0], fetched["embeddings"][0], fetched["metadatas"][0])
    dist = proj.distance(q, cands.states(proj, t_now))
    order = np.argsort(dist, kind="stable")[:top_k]
    results = [SearchResult(cands.ids[i], float(dist[i]), cands.metadatas[i], cands.directions[i].tolist(), "direct") for i in order]
    wanted = neighbour_ids([_links(r.metadata) for r in results], max_neighbors, {r.id for r in results})
    if wanted:
        got = retrieval.collection.get(ids=wanted, include=["metadatas", "embeddings"])
        nb = Candidates.from_chroma(got["ids"], got["embeddings"], got["metadatas"])
        nd = proj.distance(q, nb.states(proj, t_now)) * penalty
        results.extend(SearchResult(nb.ids[i], float(nd[i]), nb.metadatas[i], nb.directions[i].tolist(), "neighbor") for i in range(len(nb.ids)))
    results.sort(key=lambda r: r.score)
    return results[:top_k]


# -- data -------------------------------------------------------------------------------------------


def make_points(n: int, dim: int, seed: int, now: float) -> list[Point]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, dim))
    x = centres[rng.integers(0, 64, n)] + 0.5 * rng.standard_normal((n, dim))
    v = rng.uniform(0.05, 2.0, n)
    T = rng.uniform(0.1, 1.0, n)
    born = now - rng.uniform(0, 86_400, n)
    nlinks = rng.integers(0, 6, n)
    return [Point(f"p{i}", x[i], float(v[i]), float(T[i]), float(born[i]), now, [f"p{j}" for j in rng.integers(0, n, nlinks[i]) if j != i]) for i in range(n)]


def fill(storage: HyperAmyStorage, points: list[Point], batch: int = 5000) -> float:
    started = time.perf_counter()
    for s in range(0, len(points), batch):
        storage.upsert_points(points[s : s + batch], unknown_links="keep")  # all targets exist in the end
        log(f"  inserted {min(s + batch, len(points))}/{len(points)}")
    return time.perf_counter() - started


def search_many_p50(retrieval: HyperAmyRetrieval, queries: list[Point], *args: Any, repeats: int = MANY_REPEATS) -> tuple[float, float]:
    """``search_many`` over every query, ``repeats`` times: (p50, mean) ms per query.

    A query's time in one call is its own cone (the mirror's cone step is timed query by
    query: a wrapper calls it once per query direction, as its own loop does) and its own
    steps 2-4 (``_rank``, timed per query), plus its share of the rest of the call (argument
    checks, preparing the queries: what is left of the wall time, divided by the number of
    queries). The mean is the call's wall time over the number of queries."""
    mirror = retrieval.storage.particle_mirror()
    cone_of, rank = mirror.cone, retrieval._rank
    cones: list[float] = []
    ranks: list[float] = []

    def timed_cone(directions: np.ndarray, k: int, rows: Any = None) -> list[np.ndarray]:
        out = []
        for d in directions:
            t0 = time.perf_counter()
            out.extend(cone_of(d[None, :], k, rows))
            cones.append(time.perf_counter() - t0)
        return out

    def timed_rank(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return rank(*a, **kw)
        finally:
            ranks.append(time.perf_counter() - t0)

    per_query: list[float] = []
    walls: list[float] = []
    mirror.cone, retrieval._rank = timed_cone, timed_rank  # type: ignore[method-assign]
    try:
        for _ in range(repeats):
            cones.clear()
            ranks.clear()
            t0 = time.perf_counter()
            retrieval.search_many(queries, *args[:4], t_now=args[4])
            wall = time.perf_counter() - t0
            rest = (wall - sum(cones) - sum(ranks)) / len(queries)
            per_query.extend(rest + c + r for c, r in zip(cones, ranks))
            walls.append(wall / len(queries))
    finally:
        del mirror.cone, retrieval._rank  # back to the classes' methods
    return p50_ms(per_query), round(statistics.mean(walls) * 1000, 3)


def p50_ms(samples: list[float]) -> float:
    return round(pct(samples, 50) * 1000, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--server-n", type=int, default=None, help="points on the server (default --n)")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--cones", default="50,100,500")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--max-neighbors", type=int, default=20)
    parser.add_argument("--penalty", type=float, default=1.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1, help="repeat the timed part (same data) this many times")
    parser.add_argument("--quick", action="store_true", help="--n 20000 --queries 15")
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.queries = 20_000, 15
    server_n = args.server_n or args.n
    import chromadb
    import torch

    result = header("poincare", args, chromadb=chromadb.__version__, torch=torch.__version__)
    now = time.time()
    points = make_points(args.n, args.dim, args.seed, now)
    rng = np.random.default_rng(args.seed + 1)
    qidx = rng.integers(0, args.n, args.queries)
    queries = [Point("Q", points[i].emotion_vector + 0.3 * rng.standard_normal(args.dim), float(rng.uniform(0.05, 2.0)), 0.5, now) for i in qidx]
    t_now = now
    with tempfile.TemporaryDirectory() as tmp:
        storage = HyperAmyStorage(Path(tmp) / "embedded", collection_name="bench")
        log(f"embedded: inserting {args.n} points of {args.dim} dims")
        insert_s = fill(storage, points)
        result["embedded_insert"] = {"n": args.n, "seconds": round(insert_s, 1), "points_per_s": round(args.n / insert_s)}
        folder = Path(tmp) / "embedded" / SNAPSHOT_DIR / "bench"
        t0 = time.perf_counter()
        kind = storage.save_snapshot()  # what close() does: the first save writes the base
        snap: dict[str, Any] = {"first_save": kind, "first_save_s": round(time.perf_counter() - t0, 2)}
        snap["size_mb"] = round(sum(p.stat().st_size for p in folder.iterdir()) / 1e6, 1)
        t0 = time.perf_counter()
        rebuilt = HyperAmyStorage(Path(tmp) / "embedded", collection_name="bench", snapshot=False)  # the mirror rebuilt from Chroma
        rebuilt.particle_mirror()
        result["mirror_build_s"] = round(time.perf_counter() - t0, 2)
        del rebuilt
        t0 = time.perf_counter()
        reopened = HyperAmyStorage(Path(tmp) / "embedded", collection_name="bench")  # as after a restart: the snapshot, checked against Chroma
        reopened.particle_mirror()
        snap["reopen_load_s"] = round(time.perf_counter() - t0, 2)
        extra = make_points(100, args.dim, args.seed + 7, now)
        reopened.upsert_points([Point(f"x{i}", p.emotion_vector, p.v, p.T, p.born, now) for i, p in enumerate(extra)])
        reopened.delete([f"x{i}" for i in range(10)], clean_links=False)
        t0 = time.perf_counter()
        snap["second_save"] = reopened.save_snapshot()  # 100 upserts + 10 deletes since: a delta segment
        snap["second_save_s"] = round(time.perf_counter() - t0, 3)
        reopened.delete([f"x{i}" for i in range(10, 100)], clean_links=False)  # back to the benchmark's points
        reopened.save_snapshot()
        result["snapshot"] = snap
        log(json.dumps({"mirror_build_s": result["mirror_build_s"], **snap}))
        storage = reopened
        retrieval = HyperAmyRetrieval(storage, ParticleProjector(1.0, 2.0))
        retrieval_chroma_cone = HyperAmyRetrieval(storage, ParticleProjector(1.0, 2.0), cone="chroma")
        chroma_only = HyperAmyRetrieval(HyperAmyStorage(Path(tmp) / "embedded", collection_name="bench", mirror=False), ParticleProjector(1.0, 2.0))
        loop = DesignLoop(storage.collection)
        tq = [torch.tensor(q.emotion_vector, dtype=torch.float32) for q in queries]
        rows = []
        for run, cone in [(r, int(c)) for r in range(args.runs) for c in args.cones.split(",")]:
            log(f"run {run} cone_width {cone}")
            fetched = [
                storage.collection.query(query_embeddings=retrieval.query_state(q, t_now)[0], n_results=cone, include=["metadatas", "embeddings"])
                for q in queries
            ]
            times: dict[str, list[float]] = {
                k: []
                for k in ("search_batched", "search_loop", "search_chroma_cone", "search_chroma", "shell_batched", "shell_loop", "score_batched", "score_loop")
            }
            # the exact cone (the mirror's) with its payload read from Chroma: the design loop fed
            # with it is the reference for memcore's ranking; Chroma's HNSW cone's recall of it
            mirror = storage.particle_mirror()
            exact_cones = [[mirror.ids[r] for r in mirror.cone(retrieval.query_state(q, t_now)[0], cone)[0]] for q in queries]
            recall = [len(set(f["ids"][0]) & set(e)) / max(len(e), 1) for f, e in zip(fetched, exact_cones)]
            same_exact = 0
            for i, q in enumerate(queries):
                got = storage.collection.get(ids=exact_cones[i], include=["metadatas", "embeddings"])
                ref = loop.search(
                    Point("Q", tq[i], q.v, q.T, q.born),
                    args.top_k,
                    cone,
                    args.max_neighbors,
                    args.penalty,
                    t_now=t_now,
                    fetched={"ids": [got["ids"]], "embeddings": [got["embeddings"]], "metadatas": [got["metadatas"]]},
                )
                mine = retrieval.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                same_exact += [r.id for r in ref] == [r.id for r in mine]
            same_chroma = 0
            same_order = same_ids = 0
            for i, q in enumerate(queries):
                lq = Point("Q", tq[i], q.v, q.T, q.born)
                order = [("batched", "loop"), ("loop", "batched")][i % 2]  # alternate: load hits both alike
                out: dict[str, Any] = {}
                for who in order:
                    t0 = time.perf_counter()
                    if who == "batched":
                        out["shell_batched"] = batched_shell(retrieval, q, fetched[i], args.top_k, args.max_neighbors, args.penalty, t_now)
                    else:
                        out["shell_loop"] = loop.search(lq, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now, fetched=fetched[i])
                    times[f"shell_{who}"].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    if who == "batched":
                        out["search_batched"] = retrieval.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                    else:
                        out["search_loop"] = loop.search(lq, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                    times[f"search_{who}"].append(time.perf_counter() - t0)
                    f = fetched[i]
                    t0 = time.perf_counter()
                    if who == "batched":
                        proj = retrieval.projector
                        qs = retrieval.query_state(q, t_now)[1]
                        proj.distance(qs, Candidates.from_chroma(f["ids"][0], f["embeddings"][0], f["metadatas"][0]).states(proj, t_now))
                    else:
                        dq = loop.compute_state(lq.emotion_vector, lq.v, lq.T, lq.born, t_now)
                        [loop._score(dq, vec, meta, t_now) for vec, meta in zip(f["embeddings"][0], f["metadatas"][0])]
                    times[f"score_{who}"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                retrieval_chroma_cone.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                times["search_chroma_cone"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                via_chroma = chroma_only.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                times["search_chroma"].append(time.perf_counter() - t0)
                same_chroma += [r.id for r in via_chroma] == [r.id for r in out["search_batched"]]
                a, b = [r.id for r in out["search_batched"]], [r.id for r in out["search_loop"]]
                same_order += a == b
                same_ids += set(a) == set(b)
            many_ms, many_mean_ms = search_many_p50(retrieval, queries, args.top_k, cone, args.max_neighbors, args.penalty, t_now)
            many = retrieval.search_many(queries, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
            same_many = sum(
                [r.id for r in a] == [r.id for r in b]
                for a, b in zip(many, (retrieval.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now) for q in queries))
            )
            row = {"run": run, "cone_width": cone, "loadavg": loadavg(), **{f"{k}_p50_ms": p50_ms(v) for k, v in times.items()}}
            row["cone_stats"] = mirror.cone_stats()  # float16 pre-scan: cones certified / left to the float32 scan, since the start
            row["search_many_p50_ms_per_query"] = round(many_ms, 3)
            row["search_many_mean_ms_per_query"] = round(many_mean_ms, 3)
            row["speedup_search_many"] = round(statistics.median(times["search_loop"]) * 1000 / many_ms, 2)
            row["search_many_same_as_search"] = f"{same_many}/{len(queries)}"
            row["speedup_search"] = round(statistics.median(times["search_loop"]) / statistics.median(times["search_batched"]), 2)
            row["speedup_shell"] = round(statistics.median(times["shell_loop"]) / statistics.median(times["shell_batched"]), 2)
            row["speedup_score"] = round(statistics.median(times["score_loop"]) / statistics.median(times["score_batched"]), 2)
            row["speedup_search_chroma_cone"] = round(statistics.median(times["search_loop"]) / statistics.median(times["search_chroma_cone"]), 2)
            row["speedup_search_mirror_off"] = round(statistics.median(times["search_loop"]) / statistics.median(times["search_chroma"]), 2)
            row["same_ranking"] = f"{same_order}/{len(queries)}"
            row["mirror_same_as_chroma_cone"] = f"{same_chroma}/{len(queries)}"
            row["same_ids"] = f"{same_ids}/{len(queries)}"
            row["same_ranking_as_loop_on_exact_cone"] = f"{same_exact}/{len(queries)}"
            row["chroma_cone_recall"] = round(float(np.mean(recall)), 4)
            rows.append(row)
            log(json.dumps(row))
        result["batched_vs_loop"] = rows
        result["speedup_search_by_cone"] = {c: [r["speedup_search"] for r in rows if r["cone_width"] == int(c)] for c in args.cones.split(",")}

        if not args.no_server:
            cone = 100
            log(f"server: inserting {server_n} points")
            with chroma_server(Path(tmp)) as (host, port):
                remote = HyperAmyStorage(None, connection=ChromaConnection(mode="http", host=host, port=port), collection_name="bench")
                s_insert = fill(remote, points[:server_n])
                local = storage
                if server_n != args.n:
                    local = HyperAmyStorage(Path(tmp) / "embedded-small", collection_name="bench")
                    fill(local, points[:server_n])
                lat: dict[str, list[float]] = {"embedded": [], "server": []}
                r_local, r_remote = HyperAmyRetrieval(local), HyperAmyRetrieval(remote)
                for i, q in enumerate(queries):
                    for who in [("embedded", "server"), ("server", "embedded")][i % 2]:
                        r = r_local if who == "embedded" else r_remote
                        t0 = time.perf_counter()
                        r.search(q, args.top_k, cone, args.max_neighbors, args.penalty, t_now=t_now)
                        lat[who].append(time.perf_counter() - t0)
                result["embedded_vs_server"] = {
                    "n": server_n,
                    "cone_width": cone,
                    "server_insert_points_per_s": round(server_n / s_insert),
                    "embedded_p50_ms": p50_ms(lat["embedded"]),
                    "server_p50_ms": p50_ms(lat["server"]),
                    "embedded_p95_ms": round(pct(lat["embedded"], 95) * 1000, 3),
                    "server_p95_ms": round(pct(lat["server"], 95) * 1000, 3),
                    "server_over_embedded": round(statistics.median(lat["server"]) / statistics.median(lat["embedded"]), 2),
                }
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
