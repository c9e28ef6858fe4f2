"""Batches of several writers at once: they overlap, and the sequence numbers stay dense and in
commit order.

Each test stops a batch mid-way without timing: a test connection holds the ``state`` row the
batch writes after its records (the batch waits there, its records written but not
committed), and the test waits until PostgreSQL shows the batch (or a second one) waiting
on a lock. Then it checks what a reader sees before and after.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import psycopg
import pytest
from psycopg import sql

from memcore import Link, Record
from memcore.plugin import Applied, WriteBatch

from memcore_postgres import PostgresStore, PostgresStoreConfig

INDEX = "ix"


def record(rid: str, text: str = "", links: tuple[Link, ...] = ()) -> Record:
    return Record.create(text or f"text of {rid}", id=rid, vectors={"dense": np.full(4, len(rid), dtype=np.float32)}, links=links)


def open_store(url: str, schema: str, **options: Any) -> PostgresStore:
    return PostgresStore(PostgresStoreConfig(url=url, schema=schema, **options))


class Held:
    """A connection holding the ``state`` row ``("ns", "held")``: a batch writing that key
    waits there, after its records, vectors, links and membership, before its sequence number."""

    def __init__(self, url: str, schema: str, store: PostgresStore):
        store.apply(WriteBatch(state={("ns", "held"): 0}))
        self.conn = psycopg.connect(url)
        self.conn.execute(sql.SQL("SELECT 1 FROM {}.state WHERE namespace = 'ns' AND key = 'held' FOR UPDATE").format(sql.Identifier(schema)))

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


def waiting(url: str, statement: str, count: int = 1) -> None:
    """Return once ``count`` backends wait on a lock in a statement starting with ``statement``."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(600):
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s", (statement + "%",)).fetchone()
            if row is not None and row[0] >= count:
                return
            time.sleep(0.05)
    raise AssertionError(f"no batch waited in {statement!r}")


class Background:
    """``fn()`` on a thread; :meth:`result` joins it and returns (or raises) what it did."""

    def __init__(self, fn: Callable[[], Applied]):
        self.out: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, args=(fn,))
        self.thread.start()

    def _run(self, fn: Callable[[], Applied]) -> None:
        try:
            self.out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by result()
            self.out["error"] = exc

    def result(self) -> Applied:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the batch never finished"
        if "error" in self.out:
            raise self.out["error"]
        value: Applied = self.out["value"]
        return value


def seqs(store: PostgresStore) -> list[int]:
    return sorted({op.seq for op in store.ops_since(0, INDEX)})


@pytest.fixture
def stores(pg_url: str, schema: str) -> Any:
    """Two stores on one schema (two writers; ``lock_timeout`` short: a writer queued behind
    another's whole batch fails fast instead of waiting for it)."""
    a = open_store(pg_url, schema)
    b = open_store(pg_url, schema, lock_timeout=2, retries=0)
    a.apply(WriteBatch(upserts=[record("seed")], add_membership={INDEX: ["seed"]}))  # seq 1
    yield a, b
    a.close()
    b.close()


def test_a_batch_mid_way_holds_back_no_other_and_numbers_follow_commits(pg_url: str, schema: str, stores: Any) -> None:
    a, b = stores
    held = Held(pg_url, schema, a)  # seq 2
    try:
        first = Background(lambda: a.apply(WriteBatch(upserts=[record("a1"), record("a2")], add_membership={INDEX: ["a1", "a2"]}, state={("ns", "held"): 1})))
        waiting(pg_url, "INSERT INTO state")  # batch A: its records written, not committed
        applied = b.apply(WriteBatch(upserts=[record("b1")], add_membership={INDEX: ["b1"]}))  # batch B commits first
        assert applied.seq == 3
        # a reader now: B's number, B's records and ops, nothing of A
        assert b.last_seq() == 3
        log = b.read_log(0, INDEX)
        assert log.last == 3 and [(op.seq, op.record_id, op.op) for op in log.ops] == [(1, "seed", "add"), (3, "b1", "add")]
        assert b.ids() == ["seed", "b1"] and b.get(["a1"]) == [None]
    finally:
        held.release()
    later = first.result()
    assert later.seq == 4 and [(op.seq, op.record_id) for op in later.ops] == [(4, "a1"), (4, "a2")]
    assert a.last_seq() == 4
    assert [(op.seq, op.record_id) for op in a.ops_since(0, INDEX)] == [(1, "seed"), (3, "b1"), (4, "a1"), (4, "a2")]
    assert sorted(a.ids()) == ["a1", "a2", "b1", "seed"]
    assert a.get_state("ns", "held") == 1


def test_a_reader_sees_dense_numbers_and_every_batch_up_to_its_number(pg_url: str, schema: str, stores: Any) -> None:
    a, b = stores
    held = Held(pg_url, schema, a)  # seq 2
    try:
        first = Background(lambda: a.apply(WriteBatch(upserts=[record("slow")], add_membership={INDEX: ["slow"]}, state={("ns", "held"): 1})))
        waiting(pg_url, "INSERT INTO state")
        for i in range(5):  # five batches commit past the one waiting
            b.apply(WriteBatch(upserts=[record(f"fast{i}")], add_membership={INDEX: [f"fast{i}"]}))
            log = b.read_log(0, INDEX)
            assert log.last == 3 + i
            assert sorted({op.seq for op in log.ops} | {2}) == list(range(1, log.last + 1))  # dense: every number up to it
            assert b.count(index=INDEX) == 1 + i + 1  # seed + the fast ones: every batch up to the number, none after
    finally:
        held.release()
    assert first.result().seq == 8
    assert seqs(a) == [1, 3, 4, 5, 6, 7, 8]  # 2 wrote state only
    assert a.count(index=INDEX) == 7


def test_two_batches_inserting_one_new_id_end_as_add_then_update(pg_url: str, schema: str, stores: Any) -> None:
    a, _ = stores
    c = open_store(pg_url, schema, retries=3)
    held = Held(pg_url, schema, a)  # seq 2
    try:
        first = Background(lambda: a.apply(WriteBatch(upserts=[record("x", "from A")], add_membership={INDEX: ["x"]}, state={("ns", "held"): 1})))
        waiting(pg_url, "INSERT INTO state")
        second = Background(lambda: c.apply(WriteBatch(upserts=[record("x", "from B")], add_membership={INDEX: ["x"]})))
        waiting(pg_url, "INSERT INTO records")  # B waits on A's uncommitted row of the same id
    finally:
        held.release()
    assert first.result().seq == 3
    assert second.result().seq == 4  # B ran again after A committed: it found x and rewrote it
    assert [(op.seq, op.record_id, op.op) for op in a.ops_since(1, INDEX)] == [(3, "x", "add"), (4, "x", "update")]
    got = a.get(["x"])[0]
    assert got is not None and got.text == "from B"
    assert a.count() == 2 and a.memberships(["x"]) == {"x": {INDEX}}
    c.close()


def test_deleting_a_record_another_batch_links_to_waits_and_logs_the_linking_record(pg_url: str, schema: str, stores: Any) -> None:
    a, _ = stores
    c = open_store(pg_url, schema)
    a.apply(WriteBatch(upserts=[record("t"), record("s")], add_membership={INDEX: ["t", "s"]}))  # seq 2
    held = Held(pg_url, schema, a)  # seq 3
    try:
        first = Background(lambda: a.apply(WriteBatch(upserts=[record("s", "now linking", links=(Link("t", "cites"),))], state={("ns", "held"): 1})))
        waiting(pg_url, "INSERT INTO state")
        second = Background(lambda: c.apply(WriteBatch(deletes=["t"])))
        waiting(pg_url, "SELECT id, n, member_of FROM records")  # the delete waits for the link's target row
    finally:
        held.release()
    assert first.result().seq == 4
    deleted = second.result()
    assert deleted.seq == 5
    # the delete ran after the link was committed: it removed the link and logged the linking record
    assert [(op.record_id, op.op) for op in deleted.ops] == [("t", "remove"), ("s", "update")]
    got = a.get(["s"])[0]
    assert got is not None and got.links == () and a.get(["t"]) == [None]
    c.close()


def test_dropping_an_index_waits_for_batches_adding_to_it(pg_url: str, schema: str, stores: Any) -> None:
    a, _ = stores
    c = open_store(pg_url, schema)
    a.apply(WriteBatch(upserts=[record("r2")]))  # seq 2, in no index
    held = Held(pg_url, schema, a)  # seq 3
    try:
        first = Background(lambda: a.apply(WriteBatch(add_membership={INDEX: ["r2"]}, state={("ns", "held"): 1})))
        waiting(pg_url, "INSERT INTO state")
        second = Background(lambda: c.apply(WriteBatch(drop_indexes=[INDEX])))
        waiting(pg_url, "LOCK TABLE records")
    finally:
        held.release()
    assert first.result().seq == 4
    assert second.result().seq == 5
    assert a.memberships(["seed", "r2"]) == {"seed": set(), "r2": set()}  # the drop saw the add committed before it
    assert a.ops_since(0, INDEX) == []
    c.close()


def test_a_new_record_removed_and_added_in_one_batch_is_a_member(pg_store: PostgresStore) -> None:
    applied = pg_store.apply(WriteBatch(upserts=[record("n")], remove_membership={INDEX: ["n"]}, add_membership={INDEX: ["n", "n"], "other": ["n"]}))
    assert pg_store.memberships(["n"]) == {"n": {INDEX, "other"}}
    assert [(op.index, op.op) for op in applied.ops] == [(INDEX, "add"), ("other", "add")]
    pg_store.apply(WriteBatch(upserts=[record("q")], add_membership={INDEX: ["q"], 'we"ird\\': ["q"]}))
    assert pg_store.memberships(["q"]) == {"q": {INDEX, 'we"ird\\'}}
