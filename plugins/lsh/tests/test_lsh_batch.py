"""The vectorised search path: a batch equals its queries one by one, and every vectorised
part equals a plain-Python reference (chunking, padding, ties, caps, probe choice)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_lsh import LSHIndex, LSHIndexConfig
from memcore_lsh.candidates import CandidateLists, _nearest, bucket_candidates
from memcore_lsh.hashing import Hyperplanes, ProbePlan, _smallest
from memcore_lsh.rows import Slots
from memcore_lsh.scoring import CosineScorer, HammingScorer, best_k
from memcore_lsh.tables import _ranges, make_tables

DIM = 24


def make_index(**options) -> LSHIndex:
    return LSHIndex(LSHIndexConfig(**options), IndexContext("batch", {"default": SpaceInfo("default", DIM, "test")}))


def clustered(n: int, seed: int, clusters: int = 15, spread: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM))
    points = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, DIM))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def as_tuples(hits):
    return [(h.id, h.score, h.raw, h.source) for h in hits]


CONFIGS = {
    "defaults": {},
    "no-probe": {"bits": 8, "tables": 4, "multi_probe": 0},
    "capped-probes": {"bits": 10, "tables": 6, "multi_probe": 2, "probes": 7, "max_candidates": 25},
    "cap-below-k": {"bits": 6, "tables": 4, "max_candidates": 3},
    "wide-codes": {"bits": 20, "tables": 4, "multi_probe": 1, "max_candidates": 40},
    "hamming": {"bits": 12, "tables": 4, "rerank": False, "store_vectors": False},
    "hamming-capped": {"bits": 8, "tables": 5, "rerank": False, "max_candidates": 30},
    "fallback": {"bits": 16, "tables": 2, "multi_probe": 0, "fallback_exact": True},
    "long-lists": {"bits": 2, "tables": 8, "multi_probe": 1},  # nearly every record is a candidate
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_batch_equals_its_queries_one_by_one(name):
    vectors = clustered(700, seed=1)
    index = make_index(**CONFIGS[name])
    # duplicated vectors: equal scores, so the id tie-break is exercised too
    index.add([Record(id=f"r{i:03d}", text="-", vectors={"default": v}) for i, v in enumerate(vectors)])
    index.add([Record(id=f"d{i:03d}", text="-", vectors={"default": vectors[i]}) for i in range(0, 700, 7)])
    queries = [Query(vectors={"default": q}) for q in clustered(60, seed=2)] + [Query(vectors={"default": vectors[14]})]
    for k in (1, 10, 33):
        batch = index.search_batch(queries, k)
        assert [as_tuples(hits) for hits in batch] == [as_tuples(index.search(q, k)) for q in queries]
    allowed = {f"r{i:03d}" for i in range(0, 700, 3)} | {f"d{i:03d}" for i in range(0, 700, 14)}
    for scan_below in (10_000, 0):  # the allowed ids scanned exactly, then the buckets post-filtered
        index.config = index.config.model_copy(update={"exact_filter_below": scan_below})
        filtered = index.search_batch(queries, 10, allowed)
        assert [as_tuples(hits) for hits in filtered] == [as_tuples(index.search(q, 10, allowed)) for q in queries]
        assert all(hits and {h.id for h in hits} <= allowed for hits in filtered[-1:])
        assert all({h.id for h in hits} <= allowed for hits in filtered)


def test_chunk_and_block_sizes_do_not_change_results(monkeypatch):
    vectors = clustered(900, seed=3)
    queries = [Query(vectors={"default": q}) for q in clustered(40, seed=4)]
    for options in ({"bits": 6, "tables": 6, "multi_probe": 1}, {"bits": 8, "tables": 6, "multi_probe": 1, "max_candidates": 20}):
        index = make_index(**options)
        index.add([Record(id=f"r{i}", text="-", vectors={"default": v}) for i, v in enumerate(vectors)])
        whole = [as_tuples(hits) for hits in index.search_batch(queries, 10)]
        import memcore_lsh.candidates as candidates
        import memcore_lsh.scoring as scoring

        for gather, block in ((64, 16), (1, 1), (5000, 7)):
            monkeypatch.setattr(candidates, "GATHER_LIMIT", gather)
            monkeypatch.setattr(scoring, "ROW_BLOCK", block)
            assert [as_tuples(hits) for hits in index.search_batch(queries, 10)] == whole
        monkeypatch.undo()


def test_ranges_skip_empty_ranges():
    rng = np.random.default_rng(5)
    for _ in range(100):
        count = int(rng.integers(0, 12))
        starts = rng.integers(0, 50, count)
        counts = rng.integers(0, 4, count) * rng.integers(0, 2, count)  # many empty ranges
        expected = [s + i for s, c in zip(starts.tolist(), counts.tolist()) for i in range(c)]
        assert _ranges(starts, counts).tolist() == expected


def test_smallest_takes_the_lowest_columns_among_ties():
    rng = np.random.default_rng(6)
    for _ in range(300):
        rows, width = int(rng.integers(1, 12)), int(rng.integers(1, 30))
        cost = (rng.integers(0, 4, (rows, width)) * 0.5).astype(np.float32)  # many ties
        count = int(rng.integers(1, width + 1))
        got = _smallest(cost, count)
        for r in range(rows):
            expected = sorted(sorted(range(width), key=lambda j: (float(cost[r, j]), j))[:count])
            assert got[r].tolist() == expected


def test_probe_budget_picks_the_cheapest_perturbations():
    rng = np.random.default_rng(7)
    bits, radius, probes = 7, 2, 9
    plan, full = ProbePlan(bits, radius, probes), ProbePlan(bits, radius, None)
    projections = rng.standard_normal((5, 3, bits)).astype(np.float32)
    codes = rng.integers(0, 1 << bits, (5, 3)).astype(np.uint64)
    keys = plan.keys(codes, projections)
    every = full.keys(codes, projections)
    for i in range(5):
        for t in range(3):
            margin = np.abs(projections[i, t]).astype(np.float64)
            cost = {int(key): sum(margin[j] for j in range(bits) if (int(key) ^ int(codes[i, t])) >> j & 1) for key in every[i, t, 1:]}
            chosen = keys[i, t, 1:].tolist()
            assert keys[i, t, 0] == codes[i, t] and len(set(chosen)) == probes
            assert max(cost[c] for c in chosen) <= min(v for key, v in cost.items() if key not in chosen) + 1e-6


def test_signs_pack_like_the_codes():
    rng = np.random.default_rng(8)
    for tables, bits in ((3, 5), (5, 13), (2, 64), (64, 1), (7, 17)):
        planes = Hyperplanes.random(dim=11, tables=tables, bits=bits, seed=1)
        projections = planes.project(rng.standard_normal((9, 11)).astype(np.float32))
        codes = planes.codes(projections)
        for i in range(9):
            for t in range(tables):
                assert int(codes[i, t]) == sum(1 << j for j in range(bits) if projections[i, t, j] > 0)
        assert np.array_equal(planes.pack_signs(projections), planes.pack(codes))


def test_capped_candidates_are_the_nearest_of_the_uncapped():
    rng = np.random.default_rng(9)
    planes = Hyperplanes.random(dim=8, tables=4, bits=5, seed=0)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    codes = planes.hash(vectors)
    table = make_tables(4, 5)
    table.rebuild(np.arange(300), codes)
    queries = rng.standard_normal((12, 8)).astype(np.float32)
    projections = planes.project(queries)
    qcodes = planes.codes(projections)
    keys = ProbePlan(5, 1, None).keys(qcodes, projections)
    stored, qpacked = planes.pack(codes), planes.pack(qcodes)
    mask = rng.random(300) < 0.7
    for restrict in (None, mask):
        ((_, full),) = bucket_candidates(table, keys, qpacked, stored, 300, restrict, None)
        for cap in (1, 5, 17, 1000):
            ((_, capped),) = bucket_candidates(table, keys, qpacked, stored, 300, restrict, cap)
            owner, slots = _nearest(full.owners(), full.slots, qpacked, stored, cap, len(full))
            assert capped.slots.tolist() == slots.tolist()
            assert capped.bounds.tolist() == np.searchsorted(owner, np.arange(13)).tolist()


def _reference_best(slots, scores, raw, k, ids):
    rows = sorted(zip((-scores).tolist(), [ids[s] for s in slots.tolist()], raw.tolist()))[:k]
    return [(rid, -neg, r) for neg, rid, r in rows]


@pytest.mark.parametrize("rerank", [True, False])
def test_best_k_matches_a_sort_by_score_then_id(rerank):
    rng = np.random.default_rng(10)
    n, dim = 80, 6
    rows = Slots(dim, 2, 1, True)
    base = rng.integers(-2, 3, (20, dim)).astype(np.float32)  # few distinct vectors: many equal scores
    vectors = base[rng.integers(0, 20, n)]
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    packed = rng.integers(0, 1 << 12, (n, 1)).astype(np.uint64)
    ids = [f"id{int(x):03d}" for x in rng.permutation(n)]
    rows.append(ids, np.zeros((n, 2), dtype=np.uint64), packed, vectors)
    scorer = CosineScorer(rows) if rerank else HammingScorer(rows, 12)
    for _ in range(30):
        q = int(rng.integers(1, 9))
        sizes = rng.integers(0, 40, q)
        slots = np.concatenate([np.sort(rng.choice(n, s, replace=False)) for s in sizes]).astype(np.int64)
        lists = CandidateLists(np.concatenate(([0], np.cumsum(sizes))), slots)
        qv = vectors[rng.integers(0, n, q)]
        qp = rng.integers(0, 1 << 12, (q, 1)).astype(np.uint64)
        k = int(rng.integers(1, 15))
        got = best_k(scorer, lists, qv, qp, k, ids, "src")
        for j in range(q):
            mine = slots[lists.bounds[j] : lists.bounds[j + 1]]
            if rerank:
                scores = np.einsum("cd,d->c", vectors[mine], qv[j]).astype(np.float32)
                raw = scores
            else:
                raw = np.array([bin(int(packed[s, 0] ^ qp[j, 0])).count("1") for s in mine], dtype=np.int64)
                scores = np.cos(raw * (math.pi / 12))
            expected = _reference_best(mine, scores, raw, k, ids)
            assert [(h.id, h.raw) for h in got[j]] == [(rid, r) for rid, _, r in expected]
            assert [h.score for h in got[j]] == pytest.approx([s for _, s, _ in expected], abs=1e-6)
            assert all(h.source == "src" for h in got[j])


def test_a_batch_raises_the_error_of_its_first_bad_query():
    from memcore import DimensionError, ValidationError

    index = make_index()
    index.add([Record(id=f"r{i}", text="-", vectors={"default": v}) for i, v in enumerate(clustered(30, seed=11))])
    good = Query(vectors={"default": np.ones(DIM)})
    nan = Query(vectors={"default": np.ones(DIM)})
    nan.vectors["default"] = np.full(DIM, np.nan, dtype=np.float32)  # past Query's own check
    wide = Query(vectors={"default": np.ones(DIM + 1)})
    with pytest.raises(ValidationError, match="NaN") as caught:
        index.search_batch([good, nan, wide], 3)
    assert not isinstance(caught.value, DimensionError)
    with pytest.raises(DimensionError):
        index.search_batch([good, wide, nan], 3)
    with pytest.raises(DimensionError, match="no vector"):
        index.search_batch([good, Query(text="words only"), nan], 3)


def test_tables_refuse_slots_past_int32():
    table = make_tables(2, 4)
    with pytest.raises(ValueError, match="at most"):
        table.insert(np.array([2**31], dtype=np.int64), np.zeros((1, 2), dtype=np.uint64))
    table.insert(np.array([2**31 - 1], dtype=np.int64), np.zeros((1, 2), dtype=np.uint64))
    assert table.slots.dtype == np.int32 and table.slots.tolist() == [[2**31 - 1], [2**31 - 1]]
