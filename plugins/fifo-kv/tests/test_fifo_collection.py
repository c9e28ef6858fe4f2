"""The ``fifo`` index driven by a real SQLite-backed Collection and by ``memcore.open`` settings:
eviction, reopen, catch-up after a crash, rebuilds, filters, the example settings and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import memcore
from memcore import Collection, ConfigError, ValidationError

REPO = Path(__file__).resolve().parents[3]
pytest_plugins = ["memcore.testing.pytest_plugin"]

EXAMPLE = REPO / "examples" / "fifo.toml"
SAMPLE = REPO / "core" / "memcore" / "data" / "sample_conversation.jsonl"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


def turn(i: int, speaker: str = "Alice") -> dict:
    return {"id": f"t{i}", "text": f"turn number {i} by {speaker}", "metadata": {"turn": i, "speaker": speaker}}


def newest_ids(coll: Collection, k: int = 10, **kw) -> list[str]:
    return [h.id for h in coll.retrieve({"extras": {"fifo": {"mode": "newest"}}}, index="stm", k=k, **kw)]


def oldest_ids(coll: Collection, k: int = 10, **kw) -> list[str]:
    return [h.id for h in coll.retrieve({"extras": {"fifo": {"mode": "oldest"}}}, index="stm", k=k, **kw)]


def test_capacity_evict_reopen(tmp_path):
    coll = Collection.create(tmp_path)
    coll.create_index("stm", "fifo", capacity=3)
    for i in range(1, 6):  # five turns, one insert each
        coll.insert([turn(i)])
    stm = coll.index("stm")
    assert stm.overflow() == ["t1", "t2"]
    assert coll.evict("stm") == ["t1", "t2"]
    assert coll.evict("stm") == []
    assert coll.count() == 5 and coll.get("t1").text == "turn number 1 by Alice"  # still in the store
    assert coll.count(index="stm") == 3
    assert stm.newest(3) == ["t5", "t4", "t3"]
    hits = coll.retrieve({"extras": {"fifo": {"mode": "newest"}}}, index="stm", k=10)
    assert [(h.id, h.score) for h in hits] == [("t5", 5.0), ("t4", 4.0), ("t3", 3.0)]
    assert hits[0].record.metadata == {"turn": 5, "speaker": "Alice"}
    coll.close()

    reopened = Collection.create(tmp_path)
    assert reopened.index("stm").newest(3) == ["t5", "t4", "t3"]
    again = reopened.retrieve({"extras": {"fifo": {"mode": "newest"}}}, index="stm", k=10)
    assert [(h.id, h.score, h.raw) for h in again] == [(h.id, h.score, h.raw) for h in hits]
    reopened.insert([turn(6)])
    assert reopened.evict("stm") == ["t3"]
    assert oldest_ids(reopened) == ["t4", "t5", "t6"]
    reopened.close()


def test_where_and_scope_filters_are_pushed_down(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("stm", "fifo")
        coll.insert([turn(i, "Alice" if i % 2 else "Bob") for i in range(1, 9)])
        coll.insert([{"text": "scoped turn", "id": "s1"}], scope={"user_id": "u1"})
        assert newest_ids(coll, 3, where={"speaker": "Bob"}) == ["t8", "t6", "t4"]
        assert oldest_ids(coll, 2, where={"turn": {"$gte": 4}}) == ["t4", "t5"]
        assert newest_ids(coll, 5, scope={"user_id": "u1"}) == ["s1"]
        assert newest_ids(coll, 5, where={"speaker": "nobody"}) == []


def test_bad_extras_through_the_collection(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("stm", "fifo")
        coll.insert([turn(1)])
        with pytest.raises(ValidationError, match="extras.fifo.mode"):
            coll.retrieve({"extras": {"fifo": {"mode": "sideways"}}}, index="stm")
        with pytest.raises(ValidationError, match="extras.fifo.n"):
            coll.retrieve({"extras": {"fifo": {"mode": "newest", "n": 3}}}, index="stm")
        with pytest.raises(ValidationError, match="extras.fifo must be a dict"):
            coll.retrieve({"extras": {"fifo": "oldest"}}, index="stm")
        with pytest.raises(ValidationError):
            coll.retrieve({"extras": {"fifo": {"mode": "newest"}}}, index="stm", k=0)
        with pytest.raises(ConfigError, match="indexes.other"):
            coll.create_index("other", "fifo", capacity=0)


_CRASHING_WRITER = """
import json, os, sys
from memcore import Collection

path, flush_first = sys.argv[1], sys.argv[2] == "flush"
coll = Collection.create(path)
coll.create_index("stm", "fifo", capacity=3)
coll.insert([{"id": f"t{i}", "text": f"turn {i}", "metadata": {"turn": i}} for i in (1, 2, 3)])
if flush_first:
    coll.flush()  # the index is saved here; what follows is only in the store's log
coll.insert([{"id": "t4", "text": "turn 4", "metadata": {"turn": 4}}])
coll.insert([{"id": "t5", "text": "turn 5", "metadata": {"turn": 5}}])
coll.update("t4", metadata={"turn": 4, "edited": True})  # arrival order: an update is a new arrival
evicted = coll.evict("stm")
coll.insert_to_index("stm", "t1")  # an evicted turn comes back: the newest now
print(json.dumps({"evicted": evicted, "order": coll.index("stm").oldest(10)}))
sys.stdout.flush()
os._exit(0)  # a crash: no close, no flush
"""


def run_crashing_writer(path: Path, mode: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITER, str(path), mode],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_") or k == "MEMCORE_DEFAULT_EMBEDDER"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_catch_up_from_the_log_after_a_crash_keeps_arrival_order(tmp_path):
    live = run_crashing_writer(tmp_path, "flush")
    assert live == {"evicted": ["t1", "t2"], "order": ["t3", "t5", "t4", "t1"]}
    with Collection.create(tmp_path) as coll:  # loads the saved index, then applies the logged ops
        assert coll.index("stm").oldest(10) == live["order"]
        assert oldest_ids(coll) == live["order"]
        assert coll.index("stm").overflow() == ["t3"]


def test_rebuild_after_a_crash_uses_store_order(tmp_path):
    """Never saved: the index is rebuilt from the store, in the order records were first stored.

    That is arrival order for records inserted once; the documented limitation is that an
    update or a late insert_to_index (which moved a record to the tail live) is placed back
    at the record's first insertion.
    """
    live = run_crashing_writer(tmp_path, "no-flush")
    assert live["order"] == ["t3", "t5", "t4", "t1"]
    with Collection.create(tmp_path) as coll:
        assert coll.index("stm").oldest(10) == ["t1", "t3", "t4", "t5"]


def test_created_at_order_is_the_same_live_after_rebuild_and_after_reopen(tmp_path):
    coll = Collection.create(tmp_path)
    coll.create_index("stm", "fifo", capacity=3, order="created_at")
    for i in range(1, 6):
        coll.insert([turn(i)])
    coll.insert([turn(6)], indexes=[])  # stored, not queued
    coll.update("t2", metadata={"turn": 2, "edited": True})  # keeps its place
    assert coll.evict("stm") == ["t1", "t2"]
    coll.insert_to_index("stm", "t6")
    coll.insert_to_index("stm", "t1")  # back at its creation time: the oldest again
    live = coll.index("stm").oldest(10)
    assert live == ["t1", "t3", "t4", "t5", "t6"]
    assert coll.rebuild_index("stm") == 5
    assert coll.index("stm").oldest(10) == live
    coll.close()
    with Collection.create(tmp_path) as reopened:
        assert reopened.index("stm").oldest(10) == live
        assert [h.score for h in reopened.retrieve({"extras": {"fifo": {"mode": "oldest"}}}, index="stm")] == [-reopened.get(i).created_at for i in live]


def test_arrival_order_rebuild_limitation_is_as_documented(tmp_path):
    with Collection.create(tmp_path) as coll:
        coll.create_index("stm", "fifo")
        coll.insert([turn(1)])
        coll.insert([turn(2)], indexes=[])
        coll.insert([turn(3)])
        coll.insert_to_index("stm", "t2")  # arrives last
        assert coll.index("stm").oldest(10) == ["t1", "t3", "t2"]
        coll.rebuild_index("stm")  # the store knows only insertion order
        assert coll.index("stm").oldest(10) == ["t1", "t2", "t3"]


# -- through settings -------------------------------------------------------------------------

SETTINGS = {
    "indexes": {"stm": {"kind": "fifo", "capacity": 3}, "vector": {"kind": "exact"}},
    "pipeline": [{"kind": "recall", "index": "stm"}, {"kind": "limit"}],
}


def test_open_with_settings_insert_query_reopen(tmp_path):
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        ids = [memory.insert(f"turn {i} of the talk", metadata={"turn": i}) for i in range(1, 6)]
        hits = memory.query("ignored by a fifo", k=3)
        assert [h.id for h in hits] == ids[::-1][:3]
        assert memory.collection.index("stm").overflow() == ids[:2]
        assert memory.collection.evict("stm") == ids[:2]
        before = [(h.id, h.score) for h in memory.query("x", k=10)]
        assert [i for i, _ in before] == ids[::-1][:3]
    with memcore.open(SETTINGS, path=tmp_path) as memory:
        assert [(h.id, h.score) for h in memory.query("x", k=10)] == before
        assert memory.collection.count(index="vector") == 5  # the vector index kept every turn


@pytest.mark.parametrize(
    "entry, location",
    [
        ({"kind": "fifo", "capacity": 0}, "indexes.stm.capacity"),
        ({"kind": "fifo", "capacity": "three"}, "indexes.stm.capacity"),
        ({"kind": "fifo", "order": "random"}, "indexes.stm.order"),
        ({"kind": "fifo", "window": 3}, "indexes.stm.window"),
        ({"kind": "fifoo"}, "indexes.stm.kind"),
    ],
)
def test_bad_settings_raise_config_error(tmp_path, entry, location):
    with pytest.raises(ConfigError) as info:
        memcore.open({"indexes": {"stm": entry}, "pipeline": [{"kind": "recall", "index": "stm"}]}, path=tmp_path)
    assert info.value.location == location or str(info.value).startswith(location)


# -- the example settings file and the CLI ----------------------------------------------------


def test_example_settings_with_the_cli(tmp_path):
    from memcore.cli import main

    runner = CliRunner()
    path = str(tmp_path / "mem")
    result = runner.invoke(main, ["ingest", "--config", str(EXAMPLE), "--path", path, str(SAMPLE)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", path, "--index", "recent", "-k", "3", "--json", "anything"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    expected = [json.loads(line)["id"] for line in SAMPLE.read_text().splitlines() if line.strip()][::-1][:3]
    assert [r["id"] for r in rows] == expected
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", path, "--json", "pottery", "mug"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output), "the fused pipeline returns hits"
    with memcore.open(EXAMPLE, path=path) as memory:
        recent = memory.collection.index("recent")
        assert recent.newest(3) == expected
        assert len(recent) == 52 and recent.overflow() == recent.oldest(52 - recent.capacity)


class _QueuePlugin:
    """The fifo factory registered a second time, under another kind name."""

    @memcore.hookimpl
    def register_indexes(self, register):
        from memcore_fifo_kv import FifoIndex, FifoIndexConfig

        register("queue", FifoIndex, FifoIndexConfig)


def test_the_query_mode_key_is_the_registered_kind(tmp_path, memcore_plugin):
    memcore_plugin(_QueuePlugin(), "queue-plugin")
    coll = Collection.create(tmp_path)
    try:
        coll.create_index("q", "queue")
        coll.insert([turn(i) for i in range(1, 4)])
        oldest = coll.retrieve({"extras": {"queue": {"mode": "oldest"}}}, index="q", k=10)
        assert [h.id for h in oldest] == ["t1", "t2", "t3"]  # the mode is read from extras["queue"]
        newest = coll.retrieve({"extras": {"fifo": {"mode": "oldest"}}}, index="q", k=10)
        assert [h.id for h in newest] == ["t3", "t2", "t1"]  # extras["fifo"] is another index kind's: ignored
        with pytest.raises(ValidationError, match="extras.queue.mode"):
            coll.retrieve({"extras": {"queue": {"mode": "sideways"}}}, index="q")
    finally:
        coll.close()
