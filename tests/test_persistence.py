"""Persistence, recovery and concurrency of a SQLite collection directory (docs/architecture.md §5).

Reopen in the same process and in a new one, catch-up after a crash, rebuild of corrupt
or missing index files, the single-writer lock, and read-only readers that see what the
writer commits later.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memcore
from memcore import Collection, ConfigError, LockedError, ValidationError
from memcore._util.log import configure_logging
from memcore._plugins._host import get_registry
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.testing import fused

CORE = Path(__file__).resolve().parents[1] / "core"

# Shared by this module and the child processes it starts, so both compute results alike.
HELPERS = textwrap.dedent(
    """
    from memcore import Collection
    from memcore.default_plugins.embedders import HashingEmbedder, HashingEmbedderConfig
    from memcore.embedders._embedder import Space

    TEXTS = [
        "the cat sat on the mat",
        "a dog barked at the mailman",
        "quantum computers use qubits",
        "the stock market fell sharply today",
        "fresh bread from the bakery smells great",
        "the cat chased a mouse in the kitchen",
        "dogs and cats can be friends",
        "interest rates moved the market",
    ]
    QUERIES = ["the cat", "dog", "market today", "bread", "qubits and cats"]


    def make_spaces():
        default = HashingEmbedder()
        small = HashingEmbedder(HashingEmbedderConfig(dim=64))
        return {"default": Space("default", default.dim, default, "hashing"), "small": Space("small", small.dim, small, "hashing")}


    def open_collection(path, **kw):
        return Collection.create(path, spaces=make_spaces(), **kw)


    def results(c):
        out = {}
        for name in sorted(i["name"] for i in c.list_indexes()):
            for q in QUERIES:
                out[f"{name}:{q}"] = [[h.id, round(h.score, 5)] for h in c.retrieve(q, index=name, k=5)]
            out[f"{name}:where"] = [h.id for h in c.retrieve("the cat", index=name, k=10, where={"i": {"$lt": 5}})]
            out[f"{name}:scope"] = [h.id for h in c.retrieve("the cat", index=name, k=10, scope={"user_id": "u1"})]
        out["ids"] = c.ids()
        out["records"] = [[r.id, r.text, r.metadata, [list(l.as_dict().values()) for l in r.links]] for r in c.get_many(c.ids())]
        out["members"] = {i["name"]: c.ids(index=i["name"]) for i in c.list_indexes()}
        return out
    """
)
_HELPERS: dict = {}
exec(HELPERS, _HELPERS)
TEXTS, QUERIES, make_spaces, open_collection, results = (_HELPERS[n] for n in ("TEXTS", "QUERIES", "make_spaces", "open_collection", "results"))


def run_child(script: str, path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``HELPERS + script`` in a new Python process with ``PATH_`` set to the collection dir."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CORE), env.get("PYTHONPATH", "")) if p)
    env.pop("MEMCORE_LOG", None)
    code = HELPERS + f"\nPATH_ = {str(path)!r}\n" + textwrap.dedent(script)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc


def child_json(script: str, path: Path) -> dict:
    out = run_child(script, path).stdout.strip().splitlines()
    return json.loads(out[-1])


def populate(c: Collection) -> list[str]:
    c.create_index("a", "exact")
    c.create_index("b", "exact", space="small", metric="l2")
    ids = c.insert([{"text": t, "metadata": {"i": i}} for i, t in enumerate(TEXTS)])
    scoped = c.insert(["the cat of user one", "the cat of user two"], scope={"user_id": "u1"}, indexes="a")
    c.link(ids[0], ids[1], "near", 0.5)
    c.remove_from_index("b", ids[2])
    c.delete(ids[3])
    c.update(ids[4], text="the cat ate fresh bread")
    return ids + scoped


def same_results(got: dict, expected: dict) -> None:
    """Ids equal, scores equal to 1e-4 (float32 sums may differ in the last bits)."""
    assert got.keys() == expected.keys()
    for key in expected:
        ranked = isinstance(expected[key], list) and expected[key] and isinstance(expected[key][0], list) and len(expected[key][0]) == 2
        if ranked and ":" in key:  # [[id, score], ...]
            assert [h[0] for h in got[key]] == [h[0] for h in expected[key]], key
            assert [h[1] for h in got[key]] == pytest.approx([h[1] for h in expected[key]], abs=1e-4), key
        else:
            assert got[key] == expected[key], key


@pytest.fixture
def directory(tmp_path) -> Path:
    return tmp_path / "collection"


@pytest.fixture(autouse=True)
def _quiet_logs(monkeypatch):
    monkeypatch.delenv("MEMCORE_LOG", raising=False)
    yield
    configure_logging()


# -- reopen ----------------------------------------------------------------------------


def test_reopen_same_process_restores_everything(directory):
    c = open_collection(directory)
    populate(c)
    expected = results(c)
    listed = c.list_indexes()
    c.close()
    assert (directory / "indexes" / "a" / "index.json").is_file()
    assert (directory / "indexes" / "b" / "ids.json").is_file()
    assert not (directory / "indexes" / "b" / "vectors.npy").exists()  # the store keeps the vectors, once

    c = open_collection(directory)
    try:
        assert all(h.loaded_from_disk for h in c._indexes.values())  # loaded, not rebuilt
        assert c.list_indexes() == listed
        same_results(results(c), expected)
        # and it keeps working after the reopen
        (new,) = c.insert(["a brand new cat"])
        assert new in [h.id for h in c.retrieve("a brand new cat", index="a", k=1)]
    finally:
        c.close()


def test_reopen_repeatedly_with_changes_between(directory):
    expected = None
    for round_ in range(3):
        c = open_collection(directory)
        if round_ == 0:
            populate(c)
        else:
            same_results(results(c), expected)
            c.insert([f"round {round_} record about cats"], indexes="a")
            c.delete(c.ids()[0])
        expected = results(c)
        c.close()
    c = open_collection(directory)
    same_results(results(c), expected)
    c.close()


def test_reopen_in_new_process_gives_same_results(directory):
    c = open_collection(directory)
    populate(c)
    expected = results(c)
    c.close()
    got = child_json(
        """
        import json
        c = open_collection(PATH_)
        assert all(h.loaded_from_disk for h in c._indexes.values())
        print(json.dumps(results(c)))
        c.close()
        """,
        directory,
    )
    same_results(got, json.loads(json.dumps(expected)))


def rebuilt_indexes(capsys) -> list[str]:
    """Names from the ``index.rebuilt`` events logged since the last call."""
    lines = capsys.readouterr().err.splitlines()
    return [e["name"] for e in (json.loads(l) for l in lines if l.startswith("{")) if e["event"] == "index.rebuilt"]


def test_unchanged_index_loads_after_other_indexes_changed(directory, capsys):
    """Writes to one index must not make the next open rebuild the others."""
    configure_logging("json")
    c = open_collection(directory)
    populate(c)
    c.close()
    for round_ in range(3):
        c = open_collection(directory)
        assert rebuilt_indexes(capsys) == []
        assert all(h.loaded_from_disk for h in c._indexes.values())
        c.insert([f"only b changes, round {round_}"], indexes="b")
        expected = results(c)
        c.close()
    c = open_collection(directory)
    try:
        assert rebuilt_indexes(capsys) == []
        same_results(results(c), expected)
        assert c.store.log_start() == c.store.last_seq()  # the log was pruned all the way
    finally:
        c.close()


def test_rebuilt_index_is_not_reported_as_loaded(directory):
    c = open_collection(directory)
    populate(c)
    c.close()
    (directory / "indexes" / "a" / "index.json").unlink()
    c = open_collection(directory)
    try:
        assert not c._indexes["a"].loaded_from_disk
        assert c._indexes["b"].loaded_from_disk
        c.rebuild_index("b")
        assert not c._indexes["b"].loaded_from_disk
    finally:
        c.close()


def test_dropped_index_stays_dropped(directory):
    c = open_collection(directory)
    populate(c)
    c.drop_index("b")
    assert not (directory / "indexes" / "b").exists()
    c.close()
    c = open_collection(directory)
    try:
        assert [i["name"] for i in c.list_indexes()] == ["a"]
        assert not (directory / "indexes" / "b").exists()
    finally:
        c.close()


def test_reopen_with_another_embedder_is_refused(directory):
    from memcore.default_plugins.embedders import HashingEmbedder, HashingEmbedderConfig
    from memcore.embedders._embedder import Space

    c = open_collection(directory)
    populate(c)
    c.close()
    emb = HashingEmbedder(HashingEmbedderConfig(dim=128))
    spaces = {**make_spaces(), "default": Space("default", 128, emb, "hashing")}
    with pytest.raises(ConfigError, match="spaces.default"):
        Collection.create(directory, spaces=spaces)
    # the failed open released the directory
    c = open_collection(directory)
    c.close()


# -- crash recovery --------------------------------------------------------------------


def test_crash_without_close_is_caught_up_from_the_log(directory):
    c = open_collection(directory)
    populate(c)
    c.close()
    saved_seq = json.loads((directory / "indexes" / "a" / "index.json").read_text())["seq"]

    run_child(
        """
        import os
        c = open_collection(PATH_)
        c.insert([{"id": "crash1", "text": "written before the crash about cats"}, {"id": "crash2", "text": "another crash record"}])
        c.insert([{"id": "crash3", "text": "only in b before the crash"}], indexes="b")
        c.remove_from_index("a", c.ids()[0])
        c.update("crash2", text="the crash record about a cat was updated")
        os._exit(0)  # no close: index files are not saved, the log has the ops
        """,
        directory,
    )
    assert json.loads((directory / "indexes" / "a" / "index.json").read_text())["seq"] == saved_seq

    c = open_collection(directory)
    try:
        handles = c._indexes
        assert all(h.loaded_from_disk for h in handles.values())  # loaded, then caught up
        assert all(h.applied_seq == c.store.last_seq() for h in handles.values())
        assert c.get("crash1").text == "written before the crash about cats"
        assert "crash1" in [h.id for h in c.retrieve("written before the crash about cats", index="a", k=1)]
        assert [h.id for h in c.retrieve("only in b before the crash", index="b", k=1)] == ["crash3"]
        assert "crash3" not in c.ids(index="a")
        assert [h.id for h in c.retrieve("the crash record about a cat was updated", index="a", k=1)] == ["crash2"]
        assert len(c.index("a")) == c.count(index="a")
        assert len(c.index("b")) == c.count(index="b")
        caught_up = results(c)
        for name in ("a", "b"):
            c.rebuild_index(name)
        same_results(results(c), caught_up)  # catch-up == rebuild from the store
    finally:
        c.close()


def test_crash_before_any_save_rebuilds(directory):
    run_child(
        """
        import os
        c = open_collection(PATH_)
        c.create_index("a", "exact")
        c.insert(TEXTS)
        os._exit(0)
        """,
        directory,
    )
    c = open_collection(directory)
    try:
        assert not c._indexes["a"].loaded_from_disk
        assert c.count(index="a") == len(TEXTS) == len(c.index("a"))
        assert c.retrieve(TEXTS[2], index="a", k=1)[0].record.text == TEXTS[2]
    finally:
        c.close()


def test_crashed_writer_releases_the_lock(directory):
    """The crashed writer's lock is released by the OS: the next writer opens at once."""
    c = open_collection(directory)
    populate(c)
    c.close()
    run_child(
        """
        import os
        c = open_collection(PATH_)
        c.insert(["inserted by a writer that crashed"])
        os._exit(0)
        """,
        directory,
    )
    c = open_collection(directory)
    try:
        assert c.retrieve("inserted by a writer that crashed", index="a", k=1)[0].record.text == "inserted by a writer that crashed"
    finally:
        c.close()


# -- corrupt or missing index files ----------------------------------------------------


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for pos in {len(data) // 2, len(data) - 1, 200 % len(data)}:
        data[pos] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    ["truncate-ids", "flip-ids", "garbage-manifest", "delete-manifest", "delete-folder", "delete-indexes"],
)
def test_damaged_index_is_rebuilt_with_identical_results(directory, damage, capsys):
    c = open_collection(directory)
    populate(c)
    expected = results(c)
    c.close()
    folder = directory / "indexes" / "a"
    ids = folder / "ids.txt"  # the exact index saves its ids and rows: the store keeps its vectors
    if damage == "truncate-ids":
        ids.write_bytes(ids.read_bytes()[:100])
    elif damage == "flip-ids":
        _flip_bytes(ids)
    elif damage == "garbage-manifest":
        (folder / "index.json").write_text("{not json")
    elif damage == "delete-manifest":
        (folder / "index.json").unlink()
    elif damage == "delete-folder":
        shutil.rmtree(folder)
    else:
        shutil.rmtree(directory / "indexes")

    configure_logging("json")
    c = open_collection(directory)
    try:
        assert not c._indexes["a"].loaded_from_disk
        if damage != "delete-indexes":
            assert c._indexes["b"].loaded_from_disk
        same_results(results(c), expected)
        events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
        rebuilt = [e for e in events if e["event"] == "index.rebuilt" and e["name"] == "a"]
        assert rebuilt and rebuilt[0]["records"] == c.count(index="a")
    finally:
        c.close()
    # the rebuilt index was saved: the next open loads it
    c = open_collection(directory)
    try:
        assert c._indexes["a"].loaded_from_disk
        same_results(results(c), expected)
    finally:
        c.close()


# -- one writer ------------------------------------------------------------------------


def test_second_writer_in_another_process_gets_locked_error(directory):
    c = open_collection(directory)
    try:
        populate(c)
        proc = run_child(
            """
            import time
            from memcore import LockedError
            started = time.monotonic()
            try:
                open_collection(PATH_)
            except LockedError as exc:
                print("locked", round(time.monotonic() - started, 3), exc)
            else:
                print("opened")
            """,
            directory,
            timeout=60,
        )
        assert proc.stdout.startswith("locked"), proc.stdout
        assert f"pid {os.getpid()}" in proc.stdout
        # the parent still writes normally
        c.insert(["the parent keeps writing"])
    finally:
        c.close()
    # once the writer closed, another process can write
    got = child_json(
        """
        import json
        c = open_collection(PATH_)
        c.insert(["written by the second writer"])
        print(json.dumps(c.count()))
        c.close()
        """,
        directory,
    )
    c = open_collection(directory)
    try:
        assert c.count() == got
    finally:
        c.close()


def test_second_writer_in_same_process_gets_locked_error(directory):
    c = open_collection(directory)
    try:
        with pytest.raises(LockedError):
            open_collection(directory)
        with pytest.raises(LockedError):
            memcore.open(path=directory)
    finally:
        c.close()
    open_collection(directory).close()


# -- read-only readers -----------------------------------------------------------------


def reader(directory: Path) -> Collection:
    return Collection(SQLiteStore(directory, SQLiteStoreConfig(read_only=True)), make_spaces(), get_registry(), directory)


def test_reader_sees_later_writes(directory):
    writer = open_collection(directory)
    populate(writer)
    writer.flush()
    r = reader(directory)
    try:
        same_results(results(r), results(writer))
        writer.insert([{"id": "late", "text": "a late record about quantum cats"}])
        assert [h.id for h in r.retrieve("a late record about quantum cats", index="a", k=1)] == ["late"]
        assert r.count() == writer.count()
        writer.delete("late")
        assert "late" not in [h.id for h in r.retrieve("a late record about quantum cats", index="a", k=10)]
        writer.update(writer.ids()[0], text="rewritten by the writer")
        assert r.retrieve("rewritten by the writer", index="a", k=1)[0].id == writer.ids()[0]
        # the writer saves its indexes and prunes the log: the reader still catches up
        writer.insert([{"id": "after-flush", "text": "inserted then flushed"}], indexes="b")
        writer.flush()
        writer.insert([{"id": "after-flush-2", "text": "inserted after the flush"}])
        assert [h.id for h in r.retrieve("inserted then flushed", index="b", k=1)] == ["after-flush"]
        assert [h.id for h in r.retrieve("inserted after the flush", index="a", k=1)] == ["after-flush-2"]
        same_results(results(r), results(writer))
        assert fused(r, ["a", "b"], "inserted after the flush", k=1)[0].id == "after-flush-2"
    finally:
        r.close()
        writer.close()


def test_reader_cannot_write(directory):
    writer = open_collection(directory)
    populate(writer)
    r = reader(directory)
    try:
        before = (r.count(), r.store.last_seq())
        with pytest.raises(ValidationError, match="read-only"):
            r.insert(["a reader tries to write"])
        with pytest.raises(ValidationError, match="read-only"):
            r.delete(r.ids()[0])
        with pytest.raises(ValidationError, match="read-only"):
            r.create_index("c", "exact")
        assert (r.count(), r.store.last_seq()) == before == (writer.count(), writer.store.last_seq())
    finally:
        r.close()
        writer.close()


def test_reader_through_memcore_open_sees_later_writes(directory):
    settings = {"spaces": {"default": {"embedder": "hashing"}}, "indexes": {"vector": {"kind": "exact"}}}
    with memcore.open(settings, path=directory) as writer:
        writer.insert("the first memory about a cat")
        with memcore.open(settings, path=directory, store={"kind": "sqlite", "read_only": True}) as r:
            assert r.collection.store.read_only
            assert [h["text"] for h in r.retrieve("the first memory about a cat", k=1)] == ["the first memory about a cat"]
            writer.insert("a second memory written later", metadata={"n": 2})
            assert [h["text"] for h in r.retrieve("a second memory written later", k=1)] == ["a second memory written later"]
            assert [h.record.text for h in r.query("a second memory written later", k=1, index="vector")] == ["a second memory written later"]
            assert [h["text"] for h in r.retrieve("memory", where={"n": 2}, k=5)] == ["a second memory written later"]
            writer.collection.flush()
            writer.insert("a third memory after the flush")
            assert [h["text"] for h in r.retrieve("a third memory after the flush", k=1)] == ["a third memory after the flush"]


def test_reader_in_another_process_while_writer_holds_the_lock(directory):
    writer = open_collection(directory)
    try:
        populate(writer)
        writer.insert([{"id": "unsaved", "text": "committed but the index files are not saved"}])
        expected = json.loads(json.dumps(results(writer)))
        got = child_json(
            """
            import json
            from memcore._plugins._host import get_registry
            from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
            store = SQLiteStore(PATH_, SQLiteStoreConfig(read_only=True))
            r = Collection(store, make_spaces(), get_registry(), PATH_)
            print(json.dumps(results(r)))
            r.close()
            """,
            directory,
        )
        same_results(got, expected)
    finally:
        writer.close()
