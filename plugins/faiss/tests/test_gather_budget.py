"""Large cached allowed sets scored from a gathered copy within ``gather_budget_mb`` (issue 14):
the same answers as faiss' selector scan, the budget counted per set and given back when
the set is released."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from memcore.plugin import AllowedIds
from memcore import Collection, Query
from memcore.embedders._embedder import Space
from memcore_faiss import index as index_module

DIM = 16


@pytest.fixture
def small_gather_max(monkeypatch):
    monkeypatch.setattr(index_module, "GATHER_MAX", 40)  # sets of 41+ rows are "large"


def _hits(index, q, allowed):
    """Ids and scores to 5 decimals (numpy's product and faiss' scan sum in different orders)."""
    return [(h.id, round(h.score, 5)) for h in index.search(Query(vectors={"default": q}), 5, allowed)]


def test_gathered_copy_gives_the_selector_scans_answers_within_the_budget(make, kit, small_gather_max):
    base = kit.clustered(600, DIM)
    per_set = 200 * DIM * 4  # bytes of one 200-row copy
    gathering = make(DIM, factory="HNSW32", gather_budget_mb=2.5 * per_set / 2**20)  # room for two copies, not three
    scanning = make(DIM, factory="HNSW32", gather_budget_mb=0)
    for index in (gathering, scanning):
        index.add(kit.records(base))
    sets = [AllowedIds(f"r{i}" for i in range(start, 600, 3)) for start in range(3)]  # 200 ids each
    queries = kit.clustered(5, DIM, seed=9)
    for allowed in sets:
        for q in queries:
            assert _hits(gathering, q, allowed) == _hits(scanning, q, frozenset(allowed))
    budget = gathering._gather_budget
    assert scanning._gather_budget.used == 0
    assert per_set <= budget.used <= 2 * (per_set + per_set // 8 + 16 * DIM * 4)  # two sets copied, the third scanned
    assert len(budget._held) == 2
    del sets[0]
    gc.collect()
    assert len(budget._held) == 1  # a released set gives its bytes back
    fresh = AllowedIds(f"r{i}" for i in range(0, 600, 3))  # a new set object: the freed room is its
    for q in queries:
        assert _hits(gathering, q, fresh) == _hits(scanning, q, frozenset(fresh))
    assert len(budget._held) == 2 and budget.used <= budget.limit


def test_gathered_copy_follows_inserts_through_a_collection(tmp_path, small_gather_max):
    col = Collection.create(tmp_path / "c", spaces={"v": Space("v", DIM)})
    col.create_index("vec", "faiss", space="v", factory="HNSW32")
    rng = np.random.default_rng(4)
    col.insert([{"id": f"r{i}", "text": "d", "vectors": {"v": rng.standard_normal(DIM)}, "metadata": {"u": f"u{i % 4}"}} for i in range(400)])
    index = col.index("vec")
    for i in range(5):
        v = rng.standard_normal(DIM).astype(np.float32)
        col.insert([{"id": f"w{i}", "text": "w", "vectors": {"v": v}, "metadata": {"u": "u1"}}])
        hits = col.search_index("vec", Query(vectors={"v": v}, k=5, where={"u": "u1"}), 5)
        assert hits[0].id == f"w{i}"
        allowed = col._allowed(Query(vectors={"v": v}, k=5, where={"u": "u1"}), "vec")
        assert len(allowed) > 40 and [h.id for h in hits] == [h.id for h in index.search(Query(vectors={"v": v}), 5, frozenset(allowed))]
    assert index._gather_budget.used > 0
    col.close()


def test_a_small_sets_first_query_keeps_no_copy_and_its_second_does(make, kit):
    # a filter queried once never pays a set-sized copy's page faults; the answers are the same either way
    index = make(DIM, factory="HNSW32")
    index.add(kit.records(kit.clustered(600, DIM)))
    allowed = AllowedIds(f"r{i}" for i in range(0, 600, 7))  # 86 ids: scored exactly, below GATHER_MAX
    assert len(allowed) <= index_module.GATHER_MAX
    queries = kit.clustered(3, DIM, seed=5)
    assert _hits(index, queries[0], allowed) == _hits(index, queries[0], frozenset(allowed))
    assert (id(index), "gathered") not in allowed._memo
    for q in queries[1:]:
        assert _hits(index, q, allowed) == _hits(index, q, frozenset(allowed))
        assert (id(index), "gathered") in allowed._memo
