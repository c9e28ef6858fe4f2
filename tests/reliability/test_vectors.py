"""Issue 13, critical 1: vectors that float32 arithmetic cannot handle never reach the store.

Huge finite values (1e20, 3e38, int64 2**62) used to pass validation, get committed and
make every faiss search (and later every open) fail. They are refused with a
ValidationError before the commit, through every write path; the exact index no longer
normalises them to zeros; a stored vector damaged to NaN is reported as typed corruption.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import memcore
from memcore import CorruptError, ValidationError
from memcore.model._checks import MAX_VECTOR_NORM, as_vector

from .conftest import DIM, settings, snapshot, vec

BAD = {
    "1e20": lambda: np.full(DIM, 1e20),
    "3e38": lambda: np.full(DIM, 3e38),
    "int64_2_62": lambda: np.full(DIM, 2**62, dtype=np.int64),
    "one_huge": lambda: np.r_[np.zeros(DIM - 1), 2e18],
    "nan": lambda: np.r_[np.zeros(DIM - 1), np.nan],
    "inf": lambda: np.r_[np.zeros(DIM - 1), np.inf],
    "tiny": lambda: np.full(DIM, 1e-30),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_as_vector_refuses(bad):
    with pytest.raises(ValidationError):
        as_vector(BAD[bad]())


def test_largest_allowed_norm_keeps_float32_distances_finite():
    a = as_vector(np.r_[np.zeros(DIM - 1), MAX_VECTOR_NORM * 0.999])
    b = -a
    assert np.isfinite(np.float32(((a - b) ** 2).sum()))
    assert np.isfinite(a @ b)


WRITES = {
    "insert": lambda m, v: m.collection.insert([{"id": "x", "text": "x", "vectors": {"v": v}}]),
    "upsert_new": lambda m, v: m.collection.upsert([{"id": "x", "text": "x", "vectors": {"v": v}}]),
    "upsert_existing": lambda m, v: m.collection.upsert([{"id": "r0", "text": "r0", "vectors": {"v": v}}]),
    "update": lambda m, v: m.collection.update("r0", vectors={"v": v}),
    "memory_insert": lambda m, v: m.insert("x", vector=v),
}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("bad", ["1e20", "3e38", "int64_2_62", "one_huge"])
def test_huge_vectors_refused_before_commit_and_memory_stays_usable(directory, write, bad):
    memory = memcore.open(settings(), path=directory)
    memory.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(5)])
    before = snapshot(memory)
    with pytest.raises(ValidationError):
        WRITES[write](memory, BAD[bad]())
    assert snapshot(memory) == before
    hits = memory.collection.retrieve({"vectors": {"v": vec(1)}}, index="flat", k=2)
    assert hits[0].id == "r1"
    memory.close()
    for read_only in (False, True):
        with memcore.open({**settings(), "store": {"read_only": read_only}}, path=directory) as again:
            assert again.collection.retrieve({"vectors": {"v": vec(2)}}, index="flat", k=1)[0].id == "r2"


def test_huge_query_vector_refused(directory):
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.insert([{"id": "r0", "text": "r0", "vectors": {"v": vec(0)}}])
        for name in ("exact", "flat"):
            with pytest.raises(ValidationError):
                memory.collection.retrieve({"vectors": {"v": np.full(DIM, 1e20)}}, index=name)


def test_exact_index_does_not_turn_overflowing_vectors_into_zeros():
    from memcore.indexes._exact import ExactIndex, ExactIndexConfig
    from memcore.plugin import IndexContext, SpaceInfo

    index = ExactIndex(ExactIndexConfig(space="v"), IndexContext("e", {"v": SpaceInfo("v", DIM, "none")}))
    record = memcore.Record.create("x", vectors={"v": vec(0)})
    record.vectors["v"] = np.full(DIM, 1e20, dtype=np.float32)  # bypasses Record validation, as a buggy caller could
    with pytest.raises(ValidationError):
        index.add([record])
    assert len(index) == 0


def _damage_stored_vector(directory, record_id):
    """NaN over the stored vector of ``record_id``, where the store keeps it: its row of the space's file."""
    with sqlite3.connect(directory / "store.sqlite3") as db:
        slot, row = db.execute(
            "SELECT s.slot, v.row FROM vectors v JOIN vector_spaces s ON s.name = v.space WHERE v.record_id = ? AND v.space = 'v'", (record_id,)
        ).fetchone()
    with open(directory / "vectors" / f"{slot}.f32", "r+b") as fh:
        fh.seek(row * DIM * 4)
        fh.write(np.full(DIM, np.nan, dtype=np.float32).tobytes())


def test_stored_vector_corrupted_to_nan_is_typed_and_does_not_brick_open(directory):
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(5)])
    _damage_stored_vector(directory, "r3")
    for child in (directory / "indexes").iterdir():  # force a rebuild from the store
        (child / "index.json").unlink()
    with memcore.open(settings(), path=directory) as memory:
        assert memory.collection.count() == 5
        broken = {i["name"]: i for i in memory.collection.list_indexes()}
        assert broken["flat"]["status"] == "broken" and "r3" in broken["flat"]["error"]
        with pytest.raises(CorruptError, match="flat"):
            memory.collection.retrieve({"vectors": {"v": vec(1)}}, index="flat")
        with pytest.raises(CorruptError, match="r3"):
            memory.collection.get("r3")
        memory.collection.delete("r3")
        assert memory.collection.rebuild_index("flat") == 4
        assert memory.collection.retrieve({"vectors": {"v": vec(1)}}, index="flat", k=1)[0].id == "r1"


def test_a_new_index_whose_fill_meets_a_corrupted_vector_is_broken_not_an_unopenable_memory(directory):
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(5)])
    _damage_stored_vector(directory, "r3")
    declared = settings()
    declared["indexes"] = {**declared["indexes"], "more": {"kind": "exact", "space": "v", "metric": "l2"}}
    with memcore.open(declared, path=directory) as memory:  # the new index is filled from the store on create
        assert memory.collection.count() == 5
        status = {i["name"]: i for i in memory.collection.list_indexes()}
        assert status["more"]["status"] == "broken" and "r3" in status["more"]["error"]
        with pytest.raises(CorruptError, match="more"):
            memory.collection.retrieve({"vectors": {"v": vec(1)}}, index="more")
        memory.collection.delete("r3")
        memory.collection.rebuild_index("more")
        memory.collection.populate_index("more")
        assert memory.collection.count(index="more") == 4
