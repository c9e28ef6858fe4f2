"""Schema version 2 -> 3 of the SQLite store (issue 25: the vectors once on disk), and the
older index saves over it: a collection written by memcore before the change opens with the
same records, vectors and search results; its saved indexes load (the ``exact`` format 1,
ids only, adopts the store's rows; the faiss format 1 -- an HNSW graph saved without its
vectors plus its tombstones, a Flat index saved as ids only -- is refilled from the store's
vectors) and are rewritten in the current formats at the next save.

The fixture ``tests/fixtures/store_v2/collection`` was written at schema version 2 by
``tests/fixtures/store_v2/make_v2.py`` (which also wrote ``expected.json``: what the old code
returned for every read and search)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores import _sqlite_schema
from memcore.stores._sqlite import SCHEMA_VERSION, SQLiteStore

pytest.importorskip("faiss")

FIXTURE = Path(__file__).parent / "fixtures" / "store_v2"
SPACES = {"dense": Space("dense", 8), "small": Space("small", 4)}
INDEX_SPACE = {"vec": "dense", "few": "small", "hnsw": "dense", "flat": "dense"}


@pytest.fixture
def v2(old_store: Callable[[str], Path]) -> Path:
    return old_store("store_v2")


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((FIXTURE / "expected.json").read_text())


def _hits(col: Collection, expected: dict) -> dict:
    return {
        name: [[h.id, round(h.score, 5)] for h in col.search_index(name, Query(vectors={INDEX_SPACE[name]: np.asarray(q, dtype=np.float32)}, k=20), 20)]
        for name, q in expected["queries"].items()
    }


def test_the_fixture_is_version_2_with_format_1_saves(v2, expected, schema_version: Callable[[Path], str]):
    assert schema_version(v2) == "2" and not (v2 / "vectors").exists()
    assert {name: saved["format_version"] for name, saved in expected["saved"].items()} == {"vec": 1, "few": 1, "hnsw": 1, "flat": 1}
    assert "tombstones.npy" in expected["saved"]["hnsw"]["files"] and "index.faiss" not in expected["saved"]["flat"]["files"]


def test_a_version_2_collection_opens_migrated_with_the_same_records_and_results(v2, expected, schema_version: Callable[[Path], str]):
    col = Collection(SQLiteStore(v2), SPACES, get_registry(), v2)
    try:
        assert schema_version(v2) == str(SCHEMA_VERSION) == "4"
        for name in INDEX_SPACE:
            handle = col._handle(name)
            assert handle.loaded_from_disk and handle.load_error is None, (name, handle.load_error)
        store = col.store
        assert store.last_seq() == expected["last_seq"] and store.ids() == expected["ids"]
        assert [r.to_dict(with_vectors=True) for r in store.get(store.ids())] == expected["records"]
        assert _hits(col, expected) == expected["hits"]
    finally:
        col.close()
    database = (v2 / "store.sqlite3").read_bytes()
    for record in expected["records"]:
        for values in record["vectors"].values():
            assert np.asarray(values, dtype=np.float32).tobytes() not in database  # the vectors left the database...
    assert sorted(p.name for p in (v2 / "vectors").iterdir()) == ["0.f32", "1.f32"]  # ...for one file per space
    manifests = {name: json.loads((v2 / "indexes" / name / "index.json").read_text()) for name in INDEX_SPACE}
    assert {name: m["format_version"] for name, m in manifests.items()} == {"vec": 3, "few": 3, "hnsw": 2, "flat": 2}  # rewritten at the close
    assert sorted(manifests["vec"]["files"]) == ["ids.json", "ids.txt", "rows.npy", "scale.npy"] and sorted(manifests["few"]["files"]) == [
        "ids.json",
        "ids.txt",
        "rows.npy",
    ]
    col = Collection(SQLiteStore(v2), SPACES, get_registry(), v2)
    try:
        assert all(col._handle(name).loaded_from_disk for name in INDEX_SPACE)
        assert _hits(col, expected) == expected["hits"]
        col.insert([{"id": "after", "text": "written after the migration", "vectors": {"dense": np.ones(8, dtype=np.float32)}}], indexes=["vec", "hnsw"])
        assert col.search_index("vec", Query(vectors={"dense": np.ones(8, dtype=np.float32)}, k=1), 1)[0].id == "after"
    finally:
        col.close()


def test_a_migration_cut_short_leaves_the_version_2_file_and_runs_again(v2, expected, monkeypatch, schema_version: Callable[[Path], str]):
    real = _sqlite_schema._migrate_2_to_3

    def cut_short(cur, directory):
        real(cur, directory)  # the space files are written...
        raise OSError(28, "No space left on device")  # ...and the transaction never commits

    monkeypatch.setattr(_sqlite_schema, "_migrate_2_to_3", cut_short)
    with pytest.raises(Exception, match="No space left"):
        SQLiteStore(v2)
    assert schema_version(v2) == "2"
    monkeypatch.undo()
    store = SQLiteStore(v2)
    try:
        assert schema_version(v2) == str(SCHEMA_VERSION) == "4"
        assert [r.to_dict(with_vectors=True) for r in store.get(store.ids())] == expected["records"]
    finally:
        store.close()
