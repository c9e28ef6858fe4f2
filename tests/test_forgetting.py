"""Forgetting is complete on disk: after ``delete(scope=...)`` and ``close()`` no file of
the memory directory holds the deleted texts (SQLite store with ``secure_delete`` and a
checkpointed WAL, index files rewritten, no ``.previous`` backup left behind)."""

from __future__ import annotations

import os
import sqlite3

import pytest

import memcore
from memcore.stores._sqlite import SQLiteStore
from memcore.testing import assert_no_bytes, check_scope_forgotten, find_bytes
from memcore.testing.forgetting import CANARIES


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


def test_default_memory_forgets_a_scope(tmp_path):
    check_scope_forgotten(lambda path: memcore.open(path=path), tmp_path)


def test_default_memory_forgets_a_scope_saved_twice(tmp_path):
    """The canaries were in two saves (a ``.previous`` backup could keep the first)."""
    check_scope_forgotten(lambda path: memcore.open(path=path), tmp_path, rounds=3)


def test_the_store_alone_forgets(tmp_path):
    """Thousands of rows (the freed pages go to the freelist) and an open reader: nothing of
    the deleted rows stays in the database file, its WAL or anywhere else once closed."""
    with memcore.open(path=tmp_path) as memory:
        memory.insert([{"text": f"filler number {i} " + "padding " * 40, "scope": {"user_id": "alice"}} for i in range(2000)])
        memory.insert([{"text": f"{CANARIES[0]} {i}", "metadata": {"note": CANARIES[-1]}, "scope": {"user_id": "bob"}} for i in range(500)])
        assert memory.delete(scope={"user_id": "bob"}) == 500
    assert_no_bytes(tmp_path, CANARIES)
    with memcore.open(path=tmp_path) as memory:
        assert memory.count() == 2000


def test_update_overwrites_the_old_text(tmp_path):
    """Without history, an update forgets the text it replaces too."""
    with memcore.open(path=tmp_path, store={"kind": "sqlite", "history": False}) as memory:
        rid = memory.insert(CANARIES[1])
        memory.collection.flush()
        memory.update(rid, text="a harmless new text")
    assert_no_bytes(tmp_path, [CANARIES[1]])


def test_history_keeps_a_replaced_text_until_the_record_is_deleted(tmp_path):
    """With history (the default) the replaced text stays in the record's history; deleting
    the record erases every version's text from the files."""
    with memcore.open(path=tmp_path) as memory:
        rid = memory.insert(CANARIES[1], metadata={"note": CANARIES[-1]})
        memory.collection.flush()
        memory.update(rid, text="a harmless new text", metadata={})
        assert [v["text"] for v in memory.history(rid)] == [CANARIES[1], "a harmless new text"]
    assert find_bytes(tmp_path, [CANARIES[1]])
    with memcore.open(path=tmp_path) as memory:
        memory.delete(rid)
        assert [(v["op"], v["text"], v["metadata"]) for v in memory.history(rid)] == [("insert", None, None), ("update", None, None), ("delete", None, None)]
    assert_no_bytes(tmp_path, [CANARIES[1], CANARIES[-1], "a harmless new text"])


def test_secure_delete_is_on_for_the_writer(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        assert store.db.execute("PRAGMA secure_delete").fetchone()[0] == 1
    finally:
        store.close()


def test_close_leaves_no_wal_frames(tmp_path):
    with memcore.open(path=tmp_path) as memory:
        memory.insert([f"text {i}" for i in range(100)])
    wal = tmp_path / "store.sqlite3-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    db = sqlite3.connect(tmp_path / "store.sqlite3")
    try:
        assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 100
    finally:
        db.close()


def test_find_bytes_reports_every_file_and_encoding(tmp_path):
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.bin").write_bytes(b"\x00\x01zqxneedle\xff")
    (tmp_path / "wide.txt").write_bytes("zqxneedle".encode("utf-16-le"))
    (tmp_path / "escaped.json").write_text('{"t": "caf\\u00e9 zqx"}')
    (tmp_path / "clean.txt").write_text("nothing here")
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:  # a needle across the reader's block boundary
        fh.write(b"." * ((1 << 20) - 4) + b"zqxneedle")
    assert find_bytes(tmp_path, ["zqxneedle", "café zqx"]) == {
        ".hidden/x.bin": ["zqxneedle"],
        "big.bin": ["zqxneedle"],
        "escaped.json": ["café zqx"],
    }
    assert find_bytes(tmp_path, ["zqxneedle"], encodings=("utf-8", "utf-16-le"))["wide.txt"] == ["zqxneedle"]
    with pytest.raises(AssertionError, match=r"\.hidden/x\.bin: 'zqxneedle'"):
        assert_no_bytes(tmp_path, ["zqxneedle"])
    assert_no_bytes(tmp_path, ["absent"])


def _memory_with_a_canary_id(path):
    """A memory whose exact index saved the id ``zqxcanaryid`` (its ``ids.txt``), then deleted it."""
    memory = memcore.open(path=path)
    memory.insert([{"text": f"alice note {i}", "scope": {"user_id": "alice"}} for i in range(20)])
    memory.insert({"id": "zqxcanaryid", "text": CANARIES[0], "scope": {"user_id": "bob"}})
    memory.collection.flush()
    memory.delete(scope={"user_id": "bob"})
    return memory


def test_a_save_killed_after_a_delete_recovers_and_then_forgets(tmp_path):
    """Killed mid-save: the next open loads ``.previous`` (which still lists the deleted
    record) and catches up from the log; closing that memory leaves no copy of it."""
    memory = _memory_with_a_canary_id(tmp_path)
    handle = memory.collection._indexes["vector"]

    def dies_mid_save(target):
        raise KeyboardInterrupt("killed during save")

    handle.index.save = dies_mid_save
    with pytest.raises(KeyboardInterrupt):
        memory.collection.flush()
    memory.collection.store.close()  # the process is gone
    assert find_bytes(tmp_path, ["zqxcanaryid"])  # the backup of the last complete save
    with memcore.open(path=tmp_path) as again:
        assert again.count() == 20
        assert "zqxcanaryid" not in {h.id for h in again.query(CANARIES[0], k=30)}
    assert_no_bytes(tmp_path, ["zqxcanaryid", *CANARIES])


def test_a_backup_left_by_a_save_cut_short_after_its_manifest_goes_at_the_next_close(tmp_path, monkeypatch):
    """Killed after the manifest was written, before ``.previous`` was deleted: the index
    loads as saved (unchanged, nothing to write) and its close still drops the backup."""
    import shutil

    from memcore.indexes import _handle as index_handle

    rmtree = shutil.rmtree
    memory = _memory_with_a_canary_id(tmp_path)
    with monkeypatch.context() as patch:  # the process dies before the backup is deleted
        patch.setattr(index_handle.shutil, "rmtree", lambda path, **kw: None if os.path.basename(path) == ".previous" else rmtree(path, **kw))
        memory.close()
    assert list(find_bytes(tmp_path, ["zqxcanaryid"])) == ["indexes/vector/.previous/ids.txt"]
    with memcore.open(path=tmp_path) as again:
        assert again.count() == 20
    assert_no_bytes(tmp_path, ["zqxcanaryid"])
