"""The ``fifo`` index on its own: the Index contract, arrival order, query modes, capacity,
bad input and persistence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcore import ConfigError, CorruptError, NotFoundError, Query, Record, ValidationError
from memcore.plugin import IndexContext
from memcore._plugins._host import get_registry
from memcore.testing import IndexContract
from memcore_fifo_kv import FifoIndex, FifoIndexConfig


def rec(rid: str, created_at: float = 0.0, **metadata) -> Record:
    return Record(id=rid, text=f"text of {rid}", metadata=metadata, created_at=created_at)


def fifo(capacity: int | None = None, order: str = "arrival", name: str = "stm") -> FifoIndex:
    return FifoIndex(FifoIndexConfig(capacity=capacity, order=order), IndexContext(name=name))


# -- the contract ----------------------------------------------------------------------------


class TestFifoContract(IndexContract):
    self_match_ranks_first = False

    @pytest.fixture(params=["arrival", "created_at"])
    def make_index(self, request):
        config = FifoIndexConfig(order=request.param)
        return lambda context: FifoIndex(config, context)


class TestFifoOldestContract(IndexContract):
    self_match_ranks_first = False
    query_extras = {"fifo": {"mode": "oldest"}}

    @pytest.fixture
    def make_index(self):
        return lambda context: FifoIndex(FifoIndexConfig(capacity=5), context)


# -- order -----------------------------------------------------------------------------------


def test_arrival_order_across_calls_and_within_a_batch():
    index = fifo()
    index.add([rec("a"), rec("b")])
    index.add([rec("c")])
    index.add([rec("d"), rec("e"), rec("f")])
    assert index.oldest(10) == ["a", "b", "c", "d", "e", "f"]
    assert index.newest(10) == ["f", "e", "d", "c", "b", "a"]
    assert index.newest(2) == ["f", "e"] and index.oldest(2) == ["a", "b"]
    assert [index.sequence(i) for i in "abcdef"] == [1, 2, 3, 4, 5, 6]
    assert "a" in index and "z" not in index
    with pytest.raises(NotFoundError):
        index.sequence("z")


def test_readding_a_held_id_moves_it_to_the_tail():
    index = fifo()
    index.add([rec(i) for i in "abcd"])
    index.add([rec("b")])
    assert index.oldest(10) == ["a", "c", "d", "b"]
    assert len(index) == 4
    assert index.sequence("b") == 5


def test_repeated_id_in_a_batch_takes_its_last_position():
    index = fifo()
    index.add([rec("a"), rec("b"), rec("a"), rec("c")])
    assert index.oldest(10) == ["b", "a", "c"]
    assert len(index) == 3


def test_remove_anywhere_and_unknown_ids():
    index = fifo()
    index.add([rec(i) for i in "abcde"])
    index.remove(["c", "zzz", "a", "c"])
    assert index.oldest(10) == ["b", "d", "e"]
    index.remove([])
    assert len(index) == 3
    index.add([rec("a")])
    assert index.newest(1) == ["a"]


def test_created_at_order_ignores_call_order_and_keeps_updates_in_place():
    index = fifo(order="created_at")
    index.add([rec("late", 30.0), rec("early", 10.0)])
    index.add([rec("middle", 20.0), rec("tie-second", 20.0)])
    # ties in created_at keep arrival order
    assert index.oldest(10) == ["early", "middle", "tie-second", "late"]
    index.add([rec("early", 10.0)])  # an update keeps created_at: same place
    assert index.oldest(1) == ["early"]
    hits = index.search(Query(), 2)
    assert [(h.id, h.score, h.raw) for h in hits] == [("late", 30.0, 30.0), ("tie-second", 20.0, 20.0)]
    hits = index.search(Query(extras={"fifo": {"mode": "oldest"}}), 1)
    assert [(h.id, h.score, h.raw) for h in hits] == [("early", -10.0, 10.0)]


# -- query modes and scores --------------------------------------------------------------------


def test_modes_and_scores():
    index = fifo()
    index.add([rec(i) for i in "abcde"])
    newest = index.search(Query(extras={"fifo": {"mode": "newest"}}), 3)
    assert [(h.id, h.score, h.raw, h.source) for h in newest] == [("e", 5.0, 5.0, "stm"), ("d", 4.0, 4.0, "stm"), ("c", 3.0, 3.0, "stm")]
    oldest = index.search(Query(extras={"fifo": {"mode": "oldest"}}), 2)
    assert [(h.id, h.score, h.raw) for h in oldest] == [("a", -1.0, 1.0), ("b", -2.0, 2.0)]
    # no extras, or no "fifo" entry: newest
    assert [h.id for h in index.search(Query(text="anything"), 3)] == ["e", "d", "c"]
    assert [h.id for h in index.search(Query(extras={"fifo": {}}), 3)] == ["e", "d", "c"]
    assert [h.id for h in index.search(Query(extras={"fifo": None}), 3)] == ["e", "d", "c"]
    assert [h.id for h in index.search(Query(), 50)] == list("edcba")


@pytest.mark.parametrize("n_allowed", [1, 2, 40])  # few allowed ids: looked up; many: walked
def test_allowed_keeps_the_queue_order(n_allowed):
    index = fifo()
    index.add([rec(f"r{i:03d}") for i in range(300)])
    allowed = {f"r{i:03d}" for i in range(0, 300, 300 // n_allowed)} | {"unknown"}
    expected_oldest = sorted(a for a in allowed if a != "unknown")
    assert [h.id for h in index.search(Query(extras={"fifo": {"mode": "oldest"}}), 5, allowed)] == expected_oldest[:5]
    assert index.newest(5, allowed) == expected_oldest[::-1][:5]
    assert index.search(Query(), 5, set()) == []
    assert index.search(Query(), 5, {"unknown"}) == []


@pytest.mark.parametrize(
    "modes, where",
    [
        ({"mode": "latest"}, "extras.fifo.mode"),
        ({"mode": "newest", "n": 3}, "extras.fifo.n"),  # unknown keys inside "fifo" are rejected
        ({"mode": 1}, "extras.fifo.mode"),
        ({"mode": None}, "extras.fifo.mode"),
        ({"order": "asc"}, "extras.fifo.order"),
        ({"gte": 3}, "extras.fifo.gte"),
    ],
)
def test_bad_extras_raise_validation_error(modes, where):
    index = fifo()
    index.add([rec("a")])
    with pytest.raises(ValidationError, match=f"stm.*fifo.*{where}"):
        index.validate_query(Query(extras={"fifo": modes}))
    with pytest.raises(ValidationError, match=where):
        index.search(Query(extras={"fifo": modes}), 3)


def test_foreign_extras_keys_are_ignored():
    """Only ``extras["fifo"]`` is read: one Query can carry the modes of several indexes."""
    index = fifo()
    index.add([rec(i) for i in "abcde"])
    extras = {"bm25": {"min_score": 2.5}, "graph": {"mode": "traverse", "start": ["a"]}, "sorted": "anything", "fifo": {"mode": "oldest"}}
    index.validate_query(Query(extras=extras))
    assert [h.id for h in index.search(Query(extras=extras), 3)] == ["a", "b", "c"]
    # foreign keys alone leave the default mode, even top-level ones other kinds never use
    foreign = {"bm25": {"min_score": 1.0}, "mode": "oldest", "gte": 3}
    index.validate_query(Query(extras=foreign))
    assert [h.id for h in index.search(Query(extras=foreign), 3)] == ["e", "d", "c"]


@pytest.mark.parametrize("value", ["oldest", ["oldest"], 1, True, ("mode", "oldest")])
def test_a_non_dict_fifo_entry_raises_validation_error(value):
    index = fifo()
    index.add([rec("a")])
    with pytest.raises(ValidationError, match=r"stm.*\(fifo\).*extras\.fifo must be a dict"):
        index.validate_query(Query(extras={"fifo": value}))
    with pytest.raises(ValidationError, match=r"extras\.fifo must be a dict"):
        index.search(Query(extras={"fifo": value}), 3)


def test_non_dict_extras_raise_validation_error():
    index = fifo()
    with pytest.raises(ValidationError, match="query extras must be a dict"):
        index.validate_query(Query(extras=["fifo"]))  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True, None])
def test_bad_k(k):
    index = fifo()
    index.add([rec("a")])
    with pytest.raises(ValidationError):
        index.search(Query(), k)


@pytest.mark.parametrize("n", [-1, 2.0, "2", None, True])
def test_bad_counts(n):
    index = fifo()
    index.add([rec("a"), rec("b")])
    with pytest.raises(ValidationError):
        index.newest(n)
    with pytest.raises(ValidationError):
        index.oldest(n)


def test_counts_accept_zero_and_numpy_ints():
    index = fifo()
    index.add([rec("a"), rec("b")])
    assert index.newest(0) == [] and index.oldest(0) == []
    assert index.newest(np.int64(1)) == ["b"]
    assert [h.id for h in index.search(Query(), np.int32(5))] == ["b", "a"]


def test_created_at_order_rejects_non_finite_times():
    index = fifo(order="created_at")
    with pytest.raises(ValidationError, match="created_at"):
        index.validate([rec("a", 1.0), rec("b", float("nan"))])
    with pytest.raises(ValidationError):
        index.add([rec("c", float("inf"))])
    assert len(index) == 0
    fifo().validate([rec("b", float("nan"))])  # arrival order does not read created_at


def test_bad_config():
    reg = get_registry().get("indexes", "fifo")
    for bad in ({"capacity": 0}, {"capacity": -3}, {"capacity": "many"}, {"order": "lifo"}, {"size": 3}):
        with pytest.raises(ConfigError, match="indexes.stm"):
            reg.parse_config(bad, "indexes.stm")
    assert reg.parse_config({"capacity": 3}, "indexes.stm") == FifoIndexConfig(capacity=3)


# -- capacity ----------------------------------------------------------------------------------


def test_overflow_reports_the_oldest_beyond_capacity_and_drops_nothing():
    index = fifo(capacity=3)
    index.add([rec(i) for i in "ab"])
    assert index.overflow() == []
    index.add([rec(i) for i in "cde"])
    assert index.overflow() == ["a", "b"]
    assert len(index) == 5  # the index never drops anything itself
    index.add([rec("a")])  # a re-added id is new again
    assert index.overflow() == ["b", "c"]
    index.remove(index.overflow())
    assert index.overflow() == [] and index.oldest(10) == ["d", "e", "a"]
    assert index.stats() == {"size": 3, "capacity": 3, "overflow": 0, "order": "arrival", "next_seq": 7}
    assert fifo().overflow() == []


# -- persistence -----------------------------------------------------------------------------


def saved(index: FifoIndex, tmp_path: Path) -> Path:
    directory = tmp_path / "fifo"
    directory.mkdir(exist_ok=True)
    index.save(directory)
    return directory


@pytest.mark.parametrize("order", ["arrival", "created_at"])
def test_save_load_keeps_order_scores_and_next_sequence(tmp_path, order):
    index = fifo(capacity=4, order=order)
    index.add([rec(f"r{i}", created_at=1000.0 + (i % 3)) for i in range(8)])
    index.remove(["r2"])
    index.add([rec("r0", created_at=1000.0)])
    directory = saved(index, tmp_path)
    assert [p.name for p in directory.iterdir()] == ["fifo.json"]
    fresh = fifo(capacity=4, order=order)
    fresh.load(directory)
    for mode in ("newest", "oldest"):
        q = Query(extras={"fifo": {"mode": mode}})
        assert [(h.id, h.score, h.raw) for h in fresh.search(q, 20)] == [(h.id, h.score, h.raw) for h in index.search(q, 20)]
    assert fresh.overflow() == index.overflow()
    fresh.add([rec("new", created_at=2000.0)])
    index.add([rec("new", created_at=2000.0)])
    assert fresh.sequence("new") == index.sequence("new")
    assert fresh.oldest(20) == index.oldest(20)


def test_saved_file_is_plain_json(tmp_path):
    index = fifo()
    index.add([rec("a"), rec("b")])
    doc = json.loads((saved(index, tmp_path) / "fifo.json").read_text())
    assert doc == {"kind": "fifo", "format_version": 1, "order": "arrival", "next_seq": 3, "ids": ["a", "b"], "seqs": [1, 2]}


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: "not json",
        lambda d: json.dumps([1, 2]),
        lambda d: json.dumps({k: v for k, v in d.items() if k != "ids"}),
        lambda d: json.dumps({**d, "ids": d["ids"][:-1]}),
        lambda d: json.dumps({**d, "ids": ["a", "a", "c"]}),
        lambda d: json.dumps({**d, "seqs": [3, 2, 1]}),
        lambda d: json.dumps({**d, "seqs": [1, 1, 2]}),
        lambda d: json.dumps({**d, "seqs": [1, "2", 3]}),
        lambda d: json.dumps({**d, "next_seq": 2}),
        lambda d: json.dumps({k: v for k, v in d.items() if k != "seqs"}),
        lambda d: json.dumps({**d, "ids": [1, 2, 3]}),
    ],
)
def test_load_rejects_damaged_files(tmp_path, damage):
    index = fifo()
    index.add([rec(i) for i in "abc"])
    directory = saved(index, tmp_path)
    path = directory / "fifo.json"
    path.write_text(damage(json.loads(path.read_text())))
    fresh = fifo()
    fresh.add([rec("x")])
    with pytest.raises(CorruptError, match="fifo index 'stm'"):
        fresh.load(directory)
    assert fresh.oldest(5) == ["x"]  # a failed load leaves the index as it was


def test_load_rejects_missing_file(tmp_path):
    with pytest.raises(CorruptError):
        fifo().load(tmp_path)


def test_load_rejects_bad_created_at(tmp_path):
    index = fifo(order="created_at")
    index.add([rec("a", 1.0), rec("b", 2.0)])
    directory = saved(index, tmp_path)
    path = directory / "fifo.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "created_at": [2.0, 1.0]}))
    with pytest.raises(CorruptError):
        fifo(order="created_at").load(directory)
    path.write_text(json.dumps({**doc, "created_at": ["x", 1.0]}))
    with pytest.raises(CorruptError):
        fifo(order="created_at").load(directory)
