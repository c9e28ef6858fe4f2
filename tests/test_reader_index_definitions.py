"""A read-only SQLite reader follows the writer's index definitions (``memcore.testing.definitions``).

The writer drops an index, creates one, or drops one and creates it again under the same
name (records deleted and added in between, another metric): the reader's next search
shows it, as a reader opened afresh does; a payload saved for the index's previous
generation is refused, not loaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.testing.catch_up import DIM, SPACE, record
from memcore.testing.definitions import check_drop_seen, check_new_index_seen, check_recreated_seen, indexed, recreate


def open_reader(path: Path) -> Collection:
    return Collection(SQLiteStore(path, SQLiteStoreConfig(read_only=True)), {SPACE: Space(SPACE, DIM)}, get_registry(), path)


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    path = tmp_path / "memory"
    writer = Collection(SQLiteStore(path), {SPACE: Space(SPACE, DIM)}, get_registry(), path)
    writer.create_index("vec", "exact", space=SPACE)
    writer.insert([record(i) for i in range(40)])
    writer.flush()
    reader = open_reader(path)
    yield path, writer, reader
    reader.close()
    writer.close()


def test_an_index_the_writer_dropped_is_unknown_at_the_readers_next_search(pair: Any) -> None:
    _, writer, reader = pair
    check_drop_seen(writer, reader)


def test_an_index_the_writer_created_is_searchable_by_the_reader(pair: Any) -> None:
    path, writer, reader = pair
    check_new_index_seen(writer, reader, lambda: open_reader(path))


@pytest.mark.parametrize("options", [{}, {"metric": "l2"}], ids=["same definition", "other metric"])
def test_an_index_the_writer_re_created_shows_its_new_members_to_the_reader(pair: Any, options: dict[str, Any]) -> None:
    path, writer, reader = pair
    check_recreated_seen(writer, reader, lambda: open_reader(path), "exact", **options)


def test_a_payload_saved_for_an_earlier_generation_of_the_index_is_refused(pair: Any, tmp_path: Path) -> None:
    path, writer, reader = pair
    saved = tmp_path / "old-vec"
    shutil.copytree(path / "indexes" / "vec", saved)  # what a process still holding the old index saves
    recreate(writer, "exact")
    shutil.rmtree(path / "indexes" / "vec", ignore_errors=True)
    shutil.copytree(saved, path / "indexes" / "vec")  # the same definition, its seq still in the log
    fresh = open_reader(path)
    try:
        assert not fresh._indexes["vec"].loaded_from_disk
        for seed in (1, 50, 51):
            assert indexed(fresh, "vec", seed) == indexed(writer, "vec", seed)
    finally:
        fresh.close()


def test_a_memory_made_before_generations_opens_as_it_was_and_is_followed(tmp_path: Path) -> None:
    """No migration: a definition and an ``index.json`` without a generation, and no
    ``definitions_seq`` row in ``meta`` (what older versions wrote), load as they are; the
    next drop and re-creation are followed by a reader."""
    import json
    import sqlite3

    path = tmp_path / "memory"
    writer = Collection(SQLiteStore(path), {SPACE: Space(SPACE, DIM)}, get_registry(), path)
    writer.create_index("vec", "exact", space=SPACE)
    writer.insert([record(i) for i in range(20)])
    writer.close()
    db = sqlite3.connect(path / "store.sqlite3")
    (value,) = db.execute("SELECT value FROM state WHERE namespace='indexes' AND key='vec'").fetchone()
    db.execute(
        "UPDATE state SET value=? WHERE namespace='indexes' AND key='vec'", (json.dumps({k: v for k, v in json.loads(value).items() if k != "generation"}),)
    )
    db.execute("DELETE FROM meta WHERE key='definitions_seq'")
    db.commit()
    db.close()
    manifest = path / "indexes" / "vec" / "index.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items() if k != "generation"}))

    writer = Collection(SQLiteStore(path), {SPACE: Space(SPACE, DIM)}, get_registry(), path)
    reader = open_reader(path)
    try:
        assert writer._indexes["vec"].loaded_from_disk and writer._indexes["vec"].generation is None
        assert reader._indexes["vec"].loaded_from_disk
        assert indexed(reader, "vec", 3) == indexed(writer, "vec", 3)
        recreate(writer, "exact", metric="l2")
        for seed in (1, 50, 51):
            assert indexed(reader, "vec", seed) == indexed(writer, "vec", seed), seed
    finally:
        reader.close()
        writer.close()
