"""A read-only SQLite reader catches up cheaply and completely (``Store.read_tail``).

Each step: the reader searches (so its "nothing new" answer is primed), the writer commits
one kind of change, and the reader's next search must show it -- hits, scores and the
records attached -- as a fresh reader opened after the write does. And a search with
nothing new reads no snapshot: ``PRAGMA data_version`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig
from memcore.testing.catch_up import CATCH_UP_STEPS, DIM, SPACE, check_step_seen, record, unit, view


def open_writer(path: Path, kind: str) -> Collection:
    col = Collection(SQLiteStore(path), {SPACE: Space(SPACE, DIM)}, get_registry(), path)
    options = {"space": SPACE} if kind == "exact" else {"space": SPACE, "factory": "HNSW32"}
    col.create_index("vec", "exact" if kind == "exact" else "faiss", **options)
    return col


def open_reader(path: Path) -> Collection:
    return Collection(SQLiteStore(path, SQLiteStoreConfig(read_only=True)), {SPACE: Space(SPACE, DIM)}, get_registry(), path)


@pytest.fixture(params=["exact", "hnsw"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "hnsw":
        pytest.importorskip("memcore_faiss")
    path = tmp_path / "memory"
    writer = open_writer(path, request.param)
    writer.insert([record(i) for i in range(40)] + [record(100 + i, scope={"user_id": "bob"}) for i in range(5)])
    writer.flush()
    reader = open_reader(path)
    yield path, writer, reader
    reader.close()
    writer.close()


@pytest.mark.parametrize("step", range(len(CATCH_UP_STEPS)), ids=[s[0] for s in CATCH_UP_STEPS])
def test_a_reader_sees_each_write_at_its_next_search(pair: Any, step: int) -> None:
    path, writer, reader = pair
    check_step_seen(writer, reader, lambda: open_reader(path), step)  # "nothing new" primed, then the write


def test_a_search_with_nothing_new_reads_no_snapshot(pair: Any) -> None:
    _, writer, reader = pair
    q = unit(1)
    view(reader, q)
    statements: list[str] = []
    reader.store.db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    try:
        view(reader, q)
        assert statements and all(s == "PRAGMA data_version" for s in statements), statements
        writer.insert([record(77)])
        statements.clear()
        assert view(reader, unit(77))[0][0] == "r77"
        log_reads = [s for s in statements if "oplog" in s]
        assert len(log_reads) == 1, statements  # one read of the log for the search, not one per step
    finally:
        reader.store.db.set_trace_callback(None)  # type: ignore[attr-defined]


def test_an_index_the_reader_holds_is_caught_up_by_list_indexes_too(pair: Any) -> None:
    _, writer, reader = pair
    assert reader.list_indexes()[0]["size"] == 45
    writer.insert([record(80), record(81)])
    assert reader.list_indexes()[0]["size"] == 47
    writer.delete(["r80"])
    assert reader.list_indexes()[0]["size"] == 46
