"""Two processes of one postgres memory: each search catches up with the other's writes.

Collection B searches (its indexes at the last sequence number), collection A commits one
kind of change, and B's next search must show it -- hits, scores and attached records --
as a collection opened after the write does. Each collection has its own store (its own
connections and space cache), as two processes have. Plus: the records a catch-up reads
carry the vectors of a space another process created after this one last read the space
map; a search with nothing new costs one read of the log and one of the hits' records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from memcore import Collection
from memcore.plugin import Record, WriteBatch
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.testing.catch_up import CATCH_UP_STEPS, DIM, SPACE, check_step_seen, record, unit, view
from memcore_postgres import PostgresStore, PostgresStoreConfig


def collection(url: str, schema: str, path: Path) -> Collection:
    return Collection(PostgresStore(PostgresStoreConfig(url=url, schema=schema)), {SPACE: Space(SPACE, DIM)}, get_registry(), path)


@pytest.fixture(params=["exact", "hnsw"])
def pair(request: pytest.FixtureRequest, pg_url: str, schema: str, pg_dir: Path) -> Iterator[tuple[Callable[[], Collection], Collection, Collection]]:
    if request.param == "hnsw":
        pytest.importorskip("memcore_faiss")
    path = pg_dir / "memory"
    a = collection(pg_url, schema, path)
    options = {"space": SPACE} if request.param == "exact" else {"space": SPACE, "factory": "HNSW32"}
    a.create_index("vec", "exact" if request.param == "exact" else "faiss", **options)
    a.insert([record(i) for i in range(40)] + [record(100 + i, scope={"user_id": "bob"}) for i in range(5)])
    a.flush()
    b = collection(pg_url, schema, path)
    yield (lambda: collection(pg_url, schema, path)), a, b
    b.close()
    a.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("step", range(len(CATCH_UP_STEPS)), ids=[s[0] for s in CATCH_UP_STEPS])
def test_each_write_of_one_process_is_seen_at_the_others_next_search(pair: Any, step: int) -> None:
    fresh_collection, a, b = pair
    check_step_seen(a, b, fresh_collection, step)


def test_records_read_after_another_process_made_a_space_carry_its_vectors(pg_url: str, schema: str) -> None:
    a = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema))
    b = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema))
    try:
        a.apply(WriteBatch(upserts=[Record(id="x", text="x", vectors={"one": unit(1)})], add_membership={"ix": ["x"]}))
        first = b.get(["x"])[0]
        assert first is not None and set(first.vectors) == {"one"}  # b's space cache now knows "one" only
        a.apply(WriteBatch(upserts=[Record(id="y", text="y", vectors={"one": unit(2), "two": unit(3)})], add_membership={"ix": ["y"]}))
        got = b.get(["y"])[0]
        assert got is not None and set(got.vectors) == {"one", "two"}
        assert np.array_equal(got.vectors["two"], unit(3))
        tail = b.read_tail({"ix": 1})
        assert [op.record_id for op in tail.logs["ix"].ops] == ["y"]
        assert set(tail.records["y"].vectors) == {"one", "two"}
        a.apply(WriteBatch(upserts=[Record(id="z", text="z", vectors={"three": unit(4)})], add_membership={"ix": ["z"]}))
        tail = b.read_tail({"ix": 2})
        assert set(tail.records["z"].vectors) == {"three"}  # a space new to b's cache, read through the catch-up
    finally:
        b.close()
        a.close()


def test_a_search_with_nothing_new_reads_the_log_once(pair: Any) -> None:
    _, a, b = pair
    q = unit(1)
    view(b, q)
    store = b.store
    reads: list[str] = []
    original = store.pool.read

    def counted(what: str, fn: Any) -> Any:
        reads.append(what)
        return original(what, fn)

    store.pool.read = counted  # type: ignore[method-assign]
    try:
        view(b, q)
        assert reads == ["reading the op log", "reading records"], reads
        a.insert([record(77)])
        reads.clear()
        assert view(b, unit(77))[0][0] == "r77"
        assert reads == ["reading the op log", "reading records"], reads  # the new record came with the log read
    finally:
        store.pool.read = original  # type: ignore[method-assign]
