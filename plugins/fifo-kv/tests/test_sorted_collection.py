"""The ``sorted`` index driven by a real SQLite-backed Collection and by ``memcore.open`` settings."""

from __future__ import annotations

import os

import pytest

import memcore
from memcore import Collection, ConfigError, ValidationError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


def event(i: int, ts, **extra) -> dict:
    return {"id": f"e{i}", "text": f"event {i}", "metadata": {"ts": ts, **extra}}


def read(coll: Collection, modes: dict, k: int = 10, **kw) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in coll.retrieve({"extras": {"sorted": modes}}, index="by_ts", k=k, **kw)]


def test_insert_query_reopen_rebuild(tmp_path):
    coll = Collection.create(tmp_path)
    coll.create_index("by_ts", "sorted", field="ts")
    coll.insert([event(i, (i * 7) % 10, kind="odd" if i % 2 else "even") for i in range(10)])
    top = read(coll, {})
    assert top[:3] == [("e7", 9.0), ("e4", 8.0), ("e1", 7.0)]
    window = read(coll, {"mode": "range", "gte": 2, "lt": 6})
    assert window == [("e6", -2.0), ("e9", -3.0), ("e2", -4.0), ("e5", -5.0)]
    assert read(coll, {"mode": "range", "gte": 2, "lt": 6, "order": "desc"}, k=2, where={"kind": "even"}) == [("e2", 4.0), ("e6", 2.0)]
    hits = coll.retrieve({"extras": {"sorted": {"mode": "top", "order": "asc"}}}, index="by_ts", k=1)
    assert hits[0].id == "e0" and hits[0].record.metadata["ts"] == 0
    coll.update("e0", metadata={"ts": 100, "kind": "even"})  # the index follows updates
    assert read(coll, {}, k=1) == [("e0", 100.0)]
    coll.delete("e7")
    before = {str(x): read(coll, x) for x in ({}, {"mode": "range", "gt": 3}, {"order": "asc"})}
    coll.close()

    reopened = Collection.create(tmp_path)
    assert {str(x): read(reopened, x) for x in ({}, {"mode": "range", "gt": 3}, {"order": "asc"})} == before
    reopened.rebuild_index("by_ts")
    assert {str(x): read(reopened, x) for x in ({}, {"mode": "range", "gt": 3}, {"order": "asc"})} == before
    reopened.close()


def test_bad_records_are_rejected_before_the_store_commits(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("by_ts", "sorted", field="ts")
        coll.insert([event(1, 1.5)])
        with pytest.raises(ValidationError, match="no metadata field 'ts'"):
            coll.insert([event(2, 2), {"id": "nots", "text": "no timestamp"}])
        with pytest.raises(ValidationError, match="holds number values"):
            coll.insert([event(3, "2024-01-01")])
        with pytest.raises(ValidationError, match="finite numbers or strings"):
            coll.insert([event(4, True)])
        assert coll.count() == 1 and coll.ids() == ["e1"]
        coll.insert([{"id": "elsewhere", "text": "not in the sorted index"}], indexes=[])  # fine elsewhere
        with pytest.raises(ValidationError):
            coll.insert_to_index("by_ts", "elsewhere")
        with pytest.raises(ValidationError, match="bad query extras: extras.sorted: .*at most one lower bound"):
            coll.retrieve({"extras": {"sorted": {"mode": "range", "gte": 1, "gt": 2}}}, index="by_ts")
        with pytest.raises(ValidationError, match="is a string but the index holds number values"):
            coll.retrieve({"extras": {"sorted": {"mode": "range", "gte": "a"}}}, index="by_ts")
        with pytest.raises(ValidationError, match="extras.sorted.since: Extra inputs"):
            coll.retrieve({"extras": {"sorted": {"mode": "range", "since": 1}}}, index="by_ts")
        with pytest.raises(ValidationError, match="extras.sorted must be a dict"):
            coll.retrieve({"extras": {"sorted": ["range"]}}, index="by_ts")


def test_missing_skip_keeps_membership_but_not_the_record(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("by_date", "sorted", field="date", missing="skip")
        coll.insert([{"id": "a", "text": "dated", "metadata": {"date": "2024-05-01"}}, {"id": "b", "text": "undated"}])
        assert coll.count(index="by_date") == 2 and len(coll.index("by_date")) == 1
        coll.update("b", metadata={"date": "2024-06-01"})
        assert [h.id for h in coll.retrieve({"extras": {}}, index="by_date")] == ["b", "a"]


SETTINGS = {
    "indexes": {"by_turn": {"kind": "sorted", "field": "turn"}},
    "pipeline": [{"kind": "recall", "index": "by_turn"}, {"kind": "limit"}],
}


def test_open_with_settings_insert_query_reopen(tmp_path):
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        for i in (3, 1, 4, 1.5, 9, 2):
            memory.insert(f"turn {i}", metadata={"turn": i})
        hits = memory.query("any text", k=3)
        assert [h.record.metadata["turn"] for h in hits] == [9, 4, 3]
        before = [(h.id, h.score) for h in hits]
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        assert [(h.id, h.score) for h in memory.query("any text", k=3)] == before
        ranged = memory.collection.retrieve({"extras": {"sorted": {"mode": "range", "gt": 1, "lte": 3}}}, index="by_turn")
        assert [h.record.metadata["turn"] for h in ranged] == [1.5, 2, 3]
        assert memory.collection.index("by_turn").between(lt=2) == [
            h.id for h in memory.collection.retrieve({"extras": {"sorted": {"mode": "range", "lt": 2}}}, index="by_turn")
        ]


@pytest.mark.parametrize(
    "entry, location",
    [
        ({"kind": "sorted"}, "indexes.by_turn.field"),
        ({"kind": "sorted", "field": ""}, "indexes.by_turn.field"),
        ({"kind": "sorted", "field": "turn", "missing": "drop"}, "indexes.by_turn.missing"),
        ({"kind": "sorted", "field": "turn", "order": "desc"}, "indexes.by_turn.order"),
    ],
)
def test_bad_settings_raise_config_error(tmp_path, entry, location):
    with pytest.raises(ConfigError) as info:
        memcore.open({"indexes": {"by_turn": entry}, "pipeline": [{"kind": "recall", "index": "by_turn"}]}, path=tmp_path)
    assert info.value.location == location or str(info.value).startswith(location)


def test_changing_the_field_of_a_saved_index_is_refused(tmp_path):
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        memory.insert("turn 1", metadata={"turn": 1, "ts": 5})
    other = {**SETTINGS, "indexes": {"by_turn": {"kind": "sorted", "field": "ts"}}}
    with pytest.raises(ConfigError, match="exists with another kind or options"):
        memcore.open(other, path=tmp_path)


def test_one_query_carries_the_modes_of_several_indexes(tmp_path):
    """A pipeline recalling from a fifo and a sorted index: each reads its own entry of extras."""
    settings = {
        "indexes": {"stm": {"kind": "fifo"}, "by_turn": {"kind": "sorted", "field": "turn"}},
        "pipeline": [
            {"kind": "recall", "index": "stm", "name": "stm"},
            {"kind": "recall", "index": "by_turn", "name": "by_turn"},
        ],
    }
    with memcore.open(settings, path=tmp_path) as memory:
        ids = {i: memory.insert(f"turn {i}", metadata={"turn": i}) for i in (5, 1, 4, 2, 3)}  # arrival: 5 1 4 2 3
        extras = {
            "fifo": {"mode": "oldest"},
            "sorted": {"mode": "range", "gte": 2, "lte": 4, "order": "desc"},
            "bm25": {"min_score": 1.0},
            "graph": {"mode": "traverse", "start": ["x"]},
        }
        query = memcore.Query(extras=extras, k=3)
        ctx = memory.pipeline.run_context(memory.collection, memory.collection.make_query(query))
        assert [h.id for h in ctx.lists["stm"]] == [ids[5], ids[1], ids[4]]
        assert [h.id for h in ctx.lists["by_turn"]] == [ids[4], ids[3], ids[2]]
        assert [h.id for h in memory.collection.retrieve({"extras": extras}, index="stm", k=2)] == [ids[5], ids[1]]
        with pytest.raises(ValidationError, match="extras.fifo.mode"):
            memory.collection.retrieve({"extras": {**extras, "fifo": {"mode": "latest"}}}, index="stm")
        # a bad entry of another index does not concern this one
        assert len(memory.collection.retrieve({"extras": {**extras, "fifo": {"mode": "latest"}}}, index="by_turn")) == 3
