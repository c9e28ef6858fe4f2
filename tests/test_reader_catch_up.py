"""A read-only SQLite reader catches up cheaply and completely (``Store.read_tail``).

Each step: the reader searches (so its "nothing new" answer is primed), the writer commits
one kind of change, and the reader's next search must show it -- hits, scores and the
records attached -- as a fresh reader opened after the write does. And a search with
nothing new reads no snapshot: ``PRAGMA data_version`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

DIM = 8
SPACE = "dense"


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def record(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"r{i}", "text": f"record {i}", "vectors": {SPACE: unit(i)}, "metadata": {"i": i}, **extra}


def open_writer(path: Path, kind: str) -> Collection:
    col = Collection(SQLiteStore(path), {SPACE: Space(SPACE, DIM)}, get_registry(), path)
    options = {"space": SPACE} if kind == "exact" else {"space": SPACE, "factory": "HNSW32"}
    col.create_index("vec", "exact" if kind == "exact" else "faiss", **options)
    return col


def open_reader(path: Path) -> Collection:
    return Collection(SQLiteStore(path, SQLiteStoreConfig(read_only=True)), {SPACE: Space(SPACE, DIM)}, get_registry(), path)


def view(col: Collection, q: np.ndarray, k: int = 5) -> list[tuple[str, float, str, dict[str, Any], list[str], Any]]:
    hits = col.retrieve(Query(vectors={SPACE: q}, k=k), index="vec")
    return [(h.id, round(h.score, 5), h.record.text, h.record.metadata, [l.target for l in h.record.links], h.record.scope) for h in hits]


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


STEPS: list[tuple[str, Callable[[Collection], Any], np.ndarray]] = [
    ("insert", lambda w: w.insert([record(50)]), unit(50)),
    ("vector update", lambda w: w.update("r3", vectors={SPACE: unit(999)}), unit(999)),
    ("old vector gone", lambda w: None, unit(3)),
    ("metadata update", lambda w: w.update("r4", metadata={"i": 4, "changed": True}), unit(4)),
    ("text update", lambda w: w.update("r5", text="rewritten", vectors={SPACE: unit(5)}), unit(5)),
    ("link", lambda w: w.link("r6", "r7"), unit(6)),
    ("delete", lambda w: w.delete("r8"), unit(8)),
    ("forget a scope", lambda w: w.forget({"user_id": "bob"}), unit(102)),
    ("several batches", lambda w: [w.insert([record(60 + j)]) for j in range(3)], unit(61)),
    ("prune past the reader", lambda w: (w.insert([record(70)]), w.flush()), unit(70)),
]


@pytest.mark.parametrize("step", range(len(STEPS)), ids=[s[0] for s in STEPS])
def test_a_reader_sees_each_write_at_its_next_search(pair: Any, step: int) -> None:
    path, writer, reader = pair
    for _, write, q in STEPS[:step]:  # the steps before, each seen once by the reader
        view(reader, q)
        write(writer)
    name, write, q = STEPS[step]
    assert view(reader, q) == view(writer, q)  # primed: "nothing new" is answered from the mark
    write(writer)
    seen = view(reader, q)
    fresh = open_reader(path)
    try:
        assert seen == view(fresh, q) == view(writer, q), name
    finally:
        fresh.close()


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
