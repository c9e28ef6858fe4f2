"""Hits built lazily behave as if built eagerly: provenance and records (issue 14, small memories).

A recall gives each hit a pending provenance entry, and a retrieval attaches a batch of
stored rows instead of records; both are built on first read. These tests pin that the
values read are those an eager build gave at search / attach time, on both builtin stores.
"""

from __future__ import annotations

import copy

import pytest

from memcore import Collection, Contribution, Hit, Pipeline, Query
from memcore.model._query import rank_hits
from memcore._plugins._host import get_registry
from memcore.model._record_batch import RecordBatch
from memcore.stores._sqlite import RowCache


@pytest.fixture(params=["sqlite", "memory"])
def col(request, tmp_path):
    c = Collection.create(tmp_path / "c" if request.param == "sqlite" else None)
    c.create_index("vec", "exact")
    c.insert([{"id": f"r{i}", "text": f"note {i} about apples", "metadata": {"i": i, "tags": ["a", "b"] if i % 2 else "x"}} for i in range(8)])
    yield c
    c.close()


def test_provenance_pending_until_read_and_equal_to_eager():
    hits = [Hit("a", 0.9, source="x"), Hit("b", 0.5, source="x")]
    rank_hits(hits, "lst")
    hits[0].score = 123.0  # changed after ranking: the provenance keeps the ranked score
    assert hits[0].provenance == (Contribution("lst", 1, 0.9),)
    assert type(hits[0].provenance[0]) is Contribution
    assert hits[1].provenance == (Contribution("lst", 2, 0.5),)
    assert hits[0].provenance is hits[0].provenance  # built once
    assert hits[1].explain() == "b: score 0.5 from x <- lst#2 (0.5)"
    assert hits[1].to_dict()["provenance"] == [{"source": "lst", "rank": 2, "score": 0.5}]


def test_hit_keeps_the_dataclass_behaviour():
    h = Hit("a", 1.0, 0.5, "s", (Contribution("s", 1, 1.0),))
    assert h == Hit("a", 1.0, 0.5, "s", (Contribution("s", 1, 1.0),))
    assert h != Hit("a", 1.0, 0.5, "s")
    assert repr(h).startswith("Hit(id='a', score=1.0, raw=0.5, source='s', provenance=(Contribution(")
    with pytest.raises(TypeError):
        hash(h)
    match h:
        case Hit(rid, score, raw, source):
            assert (rid, score, raw, source) == ("a", 1.0, 0.5, "s")
    h.record = None
    assert h.record is None
    twin = copy.copy(h)
    assert twin == h and twin is not h


def test_search_index_hits_have_rank_provenance(col):
    hits = col.search_index("vec", Query(text="apples", k=3), 3, list_name="dense")
    assert [h.provenance for h in hits] == [(Contribution("dense", r, float(h.score)),) for r, h in enumerate(hits, start=1)]
    assert all(h.source == "vec" for h in hits)


def test_records_are_a_snapshot_of_attach_time(col):
    hits = col.retrieve("note 3 about apples", index="vec", k=4)
    assert len(hits) == 4
    expected = {h.id: col.get(h.id) for h in hits}
    col.update(hits[0].id, text="rewritten", metadata={"i": -1})  # written before the first read of hit.record
    col.delete([hits[1].id])
    for h in hits:
        rec = h.record
        assert rec is not None and rec.to_dict() == expected[h.id].to_dict()
        assert h.record is rec  # built once
    hits[2].record.metadata["i"] = "changed by the caller"  # the caller owns its copy
    assert col.get(hits[2].id).metadata["i"] == expected[hits[2].id].metadata["i"]
    nested = next(h for h in hits[2:] if isinstance(h.record.metadata["tags"], list))
    nested.record.metadata["tags"].append("z")
    assert col.get(nested.id).metadata["tags"] == ["a", "b"]


def test_deleted_before_attach_is_dropped(col):
    hits = col.search_index("vec", Query(text="apples", k=5), 5)
    col.delete([hits[0].id])
    kept = col.attach_records(hits)
    assert [h.id for h in kept] == [h.id for h in hits[1:]]
    assert all(h.record is not None for h in kept)


def test_pipeline_run_attaches_equal_records(col):
    pipe = Pipeline.from_config([{"kind": "recall", "index": "vec"}], get_registry())
    lazy = pipe.run(col, "apples", k=3)
    eager = col.search_index("vec", Query(text="apples", k=3), 3)
    for h in eager:
        h.record = col.store.get([h.id], with_vectors=False)[0]
    assert lazy == eager  # == reads record and provenance: all six fields equal


def test_row_cache_hands_out_snapshots():
    cache = RowCache(limit=3)
    cache.put({"a": ("a",), "b": ("b",)})
    held = cache.rows
    cache.clear()
    assert held == {"a": ("a",), "b": ("b",)} and cache.rows == {}
    cache.put({"a": ("a",)})
    held = cache.rows
    cache.put({"b": ("b",), "c": ("c",), "d": ("d",)})  # past the limit: a new dict
    assert held == {"a": ("a",)}
    cache.valid_for(5)
    assert cache.rows == {}


def test_record_batch_default_and_missing_ids(col):
    batch = RecordBatch.of_records(col.get_many(["r1", "nope"]))
    assert "r1" in batch and "nope" not in batch and len(batch) == 1
    assert batch.record("nope") is None and batch.record("r1").id == "r1"
    sqlite_or_memory = col.store.get_batch(["r2", "nope", "r2"])
    assert len([i for i in ("r2", "nope") if i in sqlite_or_memory]) == 1
    assert sqlite_or_memory.record("r2").to_dict() == col.get("r2").to_dict()
