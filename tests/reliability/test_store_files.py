"""Issue 13 items 5, 6 and the store part of "Low": the writer lock, a missing or empty
store beside index folders, and where the database file may live."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import memcore
from memcore import ConfigError, CorruptError, LockedError
from memcore.stores._sqlite import SQLiteStore

from .conftest import settings, vec


def _filled(directory):
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(4)])


def test_deleting_writer_lock_does_not_let_a_second_writer_in(directory):
    _filled(directory)
    first = memcore.open(settings(), path=directory)
    try:
        (directory / "writer.lock").unlink()  # it "looks stale": it only holds a pid
        with pytest.raises(LockedError):
            memcore.open(settings(), path=directory)
        child = textwrap.dedent(
            f"""
            import memcore
            try:
                SQLiteStore = __import__("memcore.stores._sqlite", fromlist=["SQLiteStore"]).SQLiteStore
                SQLiteStore({str(directory)!r})
            except memcore.LockedError:
                print("locked")
            """
        )
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "locked", out.stderr
        first.collection.insert([{"id": "after", "text": "after", "vectors": {"v": vec(9)}}])
    finally:
        first.close()
    with memcore.open(settings(), path=directory) as again:  # released on close
        assert again.collection.count() == 5


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_missing_or_empty_store_beside_indexes_is_corrupt_and_nothing_is_deleted(directory, damage):
    _filled(directory)
    store = directory / "store.sqlite3"
    if damage == "delete":
        store.unlink()
    else:
        store.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        store.with_name(store.name + suffix).unlink(missing_ok=True)
    before = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.name != "writer.lock")
    for read_only in (False, True):
        with pytest.raises((CorruptError, memcore.NotFoundError)) as info:
            memcore.open({**settings(), "store": {"read_only": read_only}}, path=directory)
        if not read_only or damage == "truncate":
            assert isinstance(info.value, CorruptError) and "store.sqlite3" in str(info.value)
    after = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.name != "writer.lock")
    assert after == before


def test_a_new_directory_still_opens(directory):
    with memcore.open(settings(), path=directory) as memory:
        assert memory.collection.count() == 0


@pytest.mark.parametrize("name", ["../outside.sqlite3", "/tmp/abs.sqlite3", "a\x00b", "sub/dir.sqlite3", "..", ""])
def test_store_filename_stays_inside_the_collection(directory, name):
    with pytest.raises(ConfigError):
        memcore.open({**settings(), "store": {"filename": name}}, path=directory)
    assert not (directory.parent / "outside.sqlite3").exists()


def test_collection_path_that_is_a_file_is_a_config_error(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ConfigError):
        SQLiteStore(path)
    with pytest.raises(ConfigError):
        memcore.open(settings(), path=path)


def test_files_the_store_does_not_know_are_set_aside_not_deleted(directory):
    _filled(directory)
    stray = directory / "indexes" / "extra"
    stray.mkdir(parents=True)
    (stray / "notes.txt").write_text("mine")
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.create_index("extra", "exact", space="v")
    kept = [p for p in (directory / "indexes").iterdir() if p.name.startswith(".orphan-extra-")]
    assert len(kept) == 1 and (kept[0] / "notes.txt").read_text() == "mine"
