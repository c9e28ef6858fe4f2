"""Two processes of one postgres memory: each follows the index definitions of the other.

Collection A drops an index, creates one, or drops one and creates it again under the same
name (records deleted and added in between, another metric); B's next search shows it, as
a collection opened afresh does (``memcore.testing.definitions``). A payload B saves for
the index's previous generation into the folder they share is refused by the next process
to open it, and the check costs no read when nothing changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from memcore import Collection
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.testing.catch_up import DIM, SPACE, record
from memcore.testing.definitions import check_drop_seen, check_new_index_seen, check_recreated_seen, indexed, recreate
from memcore_postgres import PostgresStore, PostgresStoreConfig


def collection(url: str, schema: str, path: Path) -> Collection:
    return Collection(PostgresStore(PostgresStoreConfig(url=url, schema=schema)), {SPACE: Space(SPACE, DIM)}, get_registry(), path)


@pytest.fixture
def pair(pg_url: str, schema: str, pg_dir: Path) -> Iterator[tuple[Callable[[], Collection], Collection, Collection]]:
    path = pg_dir / "memory"
    a = collection(pg_url, schema, path)
    a.create_index("vec", "exact", space=SPACE)
    a.insert([record(i) for i in range(40)])
    a.flush()
    b = collection(pg_url, schema, path)
    yield (lambda: collection(pg_url, schema, path)), a, b
    b.close()
    a.close()


def test_an_index_one_process_dropped_is_unknown_at_the_others_next_search(pair: Any) -> None:
    _, a, b = pair
    check_drop_seen(a, b)


def test_an_index_one_process_created_is_searchable_by_the_other(pair: Any) -> None:
    fresh, a, b = pair
    check_new_index_seen(a, b, fresh)


@pytest.mark.parametrize("options", [{}, {"metric": "l2"}], ids=["same definition", "other metric"])
def test_an_index_one_process_re_created_shows_its_new_members_to_the_other(pair: Any, options: dict[str, Any]) -> None:
    fresh, a, b = pair
    check_recreated_seen(a, b, fresh, "exact", **options)


def test_an_index_re_created_while_the_other_process_writes_is_followed(pair: Any) -> None:
    fresh, a, b = pair
    indexed(b, "vec", 1)
    recreate(a, "exact", metric="l2")
    b.insert([record(60)])  # b's write reaches the store's new index; b's copy follows it
    c = fresh()
    try:
        for seed in (1, 50, 60):
            assert indexed(b, "vec", seed) == indexed(a, "vec", seed) == indexed(c, "vec", seed), seed
    finally:
        c.close()


def test_a_payload_saved_for_an_earlier_generation_of_the_index_is_refused(pair: Any) -> None:
    fresh, a, b = pair
    a.insert([record(45)])
    indexed(b, "vec", 45)  # b's copy changed since it was loaded: its next save writes it whole
    recreate(a, "exact")
    a.flush()
    b._indexes["vec"].save()  # b has not searched since: it saves the old index into the shared folder
    c = fresh()
    try:
        for seed in (1, 50, 51):
            assert indexed(c, "vec", seed) == indexed(a, "vec", seed), seed
    finally:
        c.close()


def test_a_write_into_an_index_dropped_meanwhile_leaves_no_member_in_its_next_generation(pair: Any) -> None:
    fresh, a, b = pair
    indexed(b, "vec", 1)
    a.drop_index("vec")
    b.insert([record(60)])  # b has not seen the drop: its write names the old index
    assert [entry["name"] for entry in b.list_indexes()] == []
    a.create_index("vec", "exact", space=SPACE)  # empty: nothing of the old generation
    a.insert([record(61)])
    c = fresh()
    try:
        assert a.store.ids(index="vec") == ["r61"]
        for seed in (60, 61):
            assert indexed(b, "vec", seed) == indexed(a, "vec", seed) == indexed(c, "vec", seed), seed
    finally:
        c.close()
