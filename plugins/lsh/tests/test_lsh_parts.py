"""The building blocks of the ``lsh`` index, each against a plain-Python reference."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from memcore_lsh.candidates import _nearest, bucket_candidates
from memcore_lsh.config import probe_mask_count
from memcore_lsh.hashing import Hyperplanes, ProbePlan, popcount
from memcore_lsh.tables import DirectTables, SortedTables, make_tables


def test_codes_are_the_signs_of_the_projections():
    rng = np.random.default_rng(3)
    planes = Hyperplanes.random(dim=7, tables=3, bits=5, seed=11)
    vectors = rng.standard_normal((20, 7)).astype(np.float32)
    codes = planes.hash(vectors)
    assert codes.shape == (20, 3) and codes.dtype == np.uint64
    for i in range(20):
        for t in range(3):
            expected = sum(1 << j for j in range(5) if float(vectors[i] @ planes.planes[:, t * 5 + j]) > 0)
            assert int(codes[i, t]) == expected


def test_hyperplanes_depend_only_on_the_seed():
    a = Hyperplanes.random(16, 4, 8, seed=5).planes
    assert np.array_equal(a, Hyperplanes.random(16, 4, 8, seed=5).planes)
    assert not np.array_equal(a, Hyperplanes.random(16, 4, 8, seed=6).planes)


def test_pack_keeps_every_bit_and_hamming_matches():
    rng = np.random.default_rng(0)
    planes = Hyperplanes.random(dim=9, tables=5, bits=13, seed=1)  # 65 bits: two words
    codes = planes.hash(rng.standard_normal((30, 9)).astype(np.float32))
    packed = planes.pack(codes)
    assert packed.shape == (30, 2) and packed.dtype == np.uint64
    for i, j in [(0, 1), (2, 9), (5, 5), (29, 3)]:
        by_table = sum(bin(int(codes[i, t]) ^ int(codes[j, t])).count("1") for t in range(5))
        assert int(popcount(packed[i] ^ packed[j]).sum()) == by_table


def test_popcount_counts_bits():
    values = np.array([0, 1, 3, 2**63, 2**64 - 1, 0xF0F0], dtype=np.uint64)
    assert popcount(values).tolist() == [0, 1, 2, 1, 64, 8]


@pytest.mark.parametrize("bits,radius", [(4, 0), (6, 1), (6, 2), (5, 3)])
def test_probe_plan_visits_every_code_within_the_radius(bits, radius):
    plan = ProbePlan(bits, radius, None)
    codes = np.array([[0b1011 % (1 << bits)]], dtype=np.uint64)
    keys = plan.keys(codes, np.ones((1, 1, bits), dtype=np.float32))[0, 0]
    assert keys[0] == codes[0, 0]
    expected = {int(codes[0, 0]) ^ sum(1 << j for j in flipped) for r in range(radius + 1) for flipped in combinations(range(bits), r)}
    assert set(keys.tolist()) == expected and len(keys) == probe_mask_count(bits, radius) == plan.per_table


def test_probe_plan_with_a_budget_flips_the_smallest_margins():
    plan = ProbePlan(bits=6, radius=2, probes=3)
    margins = np.array([[[0.9, -0.05, 0.5, -0.2, 0.07, 0.8]]], dtype=np.float32)  # smallest: bits 1, 4, then 3
    keys = plan.keys(np.zeros((1, 1), dtype=np.uint64), margins)[0, 0].tolist()
    # costs: {1}: .05, {4}: .07, {1,4}: .12, {3}: .2 -> the three cheapest perturbations
    assert keys[0] == 0 and sorted(keys[1:]) == sorted([1 << 1, 1 << 4, (1 << 1) | (1 << 4)])
    assert plan.per_table == 4


def _reference_buckets(slots, codes, keys_for_table):
    return {int(k): sorted(int(s) for s, c in zip(slots, codes) if c == k) for k in keys_for_table}


@pytest.mark.parametrize("kind", [DirectTables, SortedTables])
def test_tables_insert_delete_and_lookup_match_a_dict(kind):
    rng = np.random.default_rng(7)
    bits, tables = 5, 3
    table = kind(tables, bits)
    held: dict[int, np.ndarray] = {}
    next_slot = 0
    for step in range(12):
        add = int(rng.integers(1, 15))
        codes = rng.integers(0, 1 << bits, (add, tables)).astype(np.uint64)
        slots = np.arange(next_slot, next_slot + add)
        next_slot += add
        table.insert(slots, codes)
        held.update({int(s): c for s, c in zip(slots, codes)})
        if step % 3 == 2:
            gone = rng.choice(sorted(held), size=len(held) // 3, replace=False)
            table.delete(np.sort(gone), np.stack([held[int(s)] for s in np.sort(gone)]))
            for s in gone:
                del held[int(s)]
        assert len(table) == len(held)
        keys = np.arange(1 << bits, dtype=np.uint64)
        query_keys = np.broadcast_to(keys[None, None, :], (1, tables, keys.size)).copy()
        starts, counts = table.bucket_ranges(query_keys)
        found = table.gather(starts, counts)
        for t in range(tables):
            per_key = counts[0, t * keys.size : (t + 1) * keys.size]
            offset = int(counts[0, : t * keys.size].sum())
            reference = _reference_buckets(held, [held[s][t] for s in held], keys.tolist())
            for key, count in enumerate(per_key.tolist()):
                got = sorted(found[offset : offset + count].tolist())
                offset += count
                assert got == reference[key]
        sizes = table.bucket_sizes()
        assert [int(s.sum()) for s in sizes] == [len(held)] * tables


def test_make_tables_picks_the_directory_by_width():
    assert isinstance(make_tables(4, 16), DirectTables)
    assert isinstance(make_tables(4, 17), SortedTables)


def test_rebuild_equals_incremental_inserts():
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 1 << 6, (40, 2)).astype(np.uint64)
    for kind in (DirectTables, SortedTables):
        a, b = kind(2, 6), kind(2, 6)
        a.rebuild(np.arange(40), codes)
        for i in range(0, 40, 7):
            b.insert(np.arange(i, min(i + 7, 40)), codes[i : i + 7])
        assert np.array_equal(a.slots, b.slots)  # stable: equal codes keep slot order


def test_nearest_keeps_the_cap_closest_lowest_slot_first():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n, used, words = int(rng.integers(1, 6)), int(rng.integers(5, 60)), int(rng.integers(1, 3))
        stored = rng.integers(0, 16, (used, words)).astype(np.uint64)  # few bits: many ties
        queries = rng.integers(0, 16, (n, words)).astype(np.uint64)
        owner_list, slot_list = [], []
        for j in range(n):
            chosen = np.sort(rng.choice(used, int(rng.integers(0, used + 1)), replace=False))
            owner_list += [j] * chosen.size
            slot_list += chosen.tolist()
        owner, slots = np.array(owner_list, dtype=np.int64), np.array(slot_list, dtype=np.int64)
        cap = int(rng.integers(1, 10))
        got_owner, got_slots = _nearest(owner, slots, queries, stored, cap, n)
        expected_owner, expected_slots = [], []
        for j in range(n):
            mine = slots[owner == j]
            distance = [int(popcount(stored[s] ^ queries[j]).sum()) for s in mine]
            keep = sorted(sorted(zip(distance, mine.tolist()))[:cap], key=lambda pair: pair[1])
            expected_owner += [j] * len(keep)
            expected_slots += [s for _, s in keep]
        assert got_owner.tolist() == expected_owner and got_slots.tolist() == expected_slots


def test_bucket_candidates_are_the_distinct_union_over_tables_and_probes():
    rng = np.random.default_rng(4)
    planes = Hyperplanes.random(dim=8, tables=3, bits=4, seed=0)
    vectors = rng.standard_normal((60, 8)).astype(np.float32)
    codes = planes.hash(vectors)
    table = make_tables(3, 4)
    table.rebuild(np.arange(60), codes)
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    projections = planes.project(queries)
    qcodes = planes.codes(projections)
    plan = ProbePlan(4, 1, None)
    keys = plan.keys(qcodes, projections)
    mask = np.zeros(60, dtype=bool)
    mask[::2] = True
    for restrict in (None, mask):
        chunks = list(bucket_candidates(table, keys, planes.pack(qcodes), planes.pack(codes), 60, restrict, None))
        assert [first for first, _ in chunks] == [0]
        lists = chunks[0][1]
        for j in range(5):
            expected = {
                s for s in range(60) for t in range(3) if bin(int(codes[s, t]) ^ int(qcodes[j, t])).count("1") <= 1 and (restrict is None or restrict[s])
            }
            got = lists.slots[lists.bounds[j] : lists.bounds[j + 1]].tolist()
            assert got == sorted(expected)
