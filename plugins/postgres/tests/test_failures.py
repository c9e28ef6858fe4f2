"""Failures of the database as typed memcore errors, retried where safe, never a partial batch."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from memcore import LockedError, Record, StoreUnavailableError
from memcore.plugin import WriteBatch

from memcore_postgres import PostgresStore, PostgresStoreConfig


def snapshot(store: PostgresStore) -> dict[str, Any]:
    return {"seq": store.last_seq(), "ids": store.ids(), "state": store.state_items("ns"), "log": store.ops_since(0, "ix")}


def batch() -> WriteBatch:
    records = [Record.create(f"text {i}", id=f"new{i}", vectors={"dense": np.ones(4, dtype=np.float32) * i}) for i in range(50)]
    return WriteBatch(upserts=records, add_membership={"ix": [r.id for r in records]}, state={("ns", "k"): "after"})


def seeded(url: str, schema: str, **options: Any) -> PostgresStore:
    store = PostgresStore(PostgresStoreConfig(url=url, schema=schema, **options))
    store.apply(WriteBatch(upserts=[Record.create("old", id="old")], state={("ns", "k"): "before"}))
    return store


def hold_state_row(url: str, schema: str) -> psycopg.Connection[Any]:
    """A connection whose open transaction holds the row ("ns", "k") of ``state``: a batch
    writing that key writes its records first, then waits there (mid-batch)."""
    conn = psycopg.connect(url)
    conn.execute(sql.SQL("SELECT 1 FROM {}.state WHERE namespace = 'ns' AND key = 'k' FOR UPDATE").format(sql.Identifier(schema)))
    return conn


def backend_waiting(url: str) -> int:
    """The pid of the backend waiting on a row lock (the batch, mid-way)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(200):
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO state%' LIMIT 1").fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.05)
    raise AssertionError("the batch never waited on the held row")


def terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_connection_refused_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailableError, match="connecting"):
        PostgresStore(PostgresStoreConfig(url="postgresql://memcore:zqxpw@127.0.0.1:9/db", schema="x", connect_timeout=2, retries=0))


def test_a_connection_killed_mid_batch_is_retried_and_applied_once(pg_url: str, schema: str) -> None:
    store = seeded(pg_url, schema)
    holder = hold_state_row(pg_url, schema)
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(applied=store.apply(batch())))
    try:
        thread.start()
        terminate(pg_url, backend_waiting(pg_url))  # killed after writing its records, before its state row
        backend_waiting(pg_url)  # the retry, on a new connection, waits on the same row again
    finally:
        holder.rollback()
        holder.close()
    thread.join(30)
    assert result["applied"].seq == 2
    assert store.last_seq() == 2
    assert store.ids() == ["old"] + [f"new{i}" for i in range(50)]
    assert store.get_state("ns", "k") == "after"
    assert [op.record_id for op in store.ops_since(0, "ix")] == [f"new{i}" for i in range(50)]
    store.close()


def test_a_connection_killed_mid_batch_without_retries_leaves_nothing(pg_url: str, schema: str) -> None:
    store = seeded(pg_url, schema, retries=0)
    before = snapshot(store)
    holder = hold_state_row(pg_url, schema)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            store.apply(batch())
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    thread = threading.Thread(target=run)
    try:
        thread.start()
        terminate(pg_url, backend_waiting(pg_url))
        thread.join(30)
    finally:
        holder.rollback()
        holder.close()
    assert len(errors) == 1 and isinstance(errors[0], StoreUnavailableError), errors
    assert snapshot(store) == before  # not a record, vector, op or sequence number of the batch
    assert store.vectors(["new1"], "dense")[1].tolist() == [False]
    store.apply(batch())  # the store works on
    assert store.count() == 51
    store.close()


def test_a_row_held_too_long_is_a_locked_error_after_retries(pg_url: str, schema: str) -> None:
    store = seeded(pg_url, schema, lock_timeout=0.3, retries=1)
    before = snapshot(store)
    holder = psycopg.connect(pg_url)
    holder.execute(sql.SQL("SELECT 1 FROM {}.meta WHERE key = 'seq' FOR UPDATE").format(sql.Identifier(schema)))
    try:
        with pytest.raises(LockedError, match="another writer"):
            store.apply(batch())
    finally:
        holder.rollback()
        holder.close()
    assert snapshot(store) == before
    store.close()


def test_reads_survive_a_killed_connection(pg_url: str, schema: str) -> None:
    store = seeded(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")]
    for pid in pids:  # every connection of the pool (and of other tests' stores: none is open)
        terminate(pg_url, pid)
    assert store.ids() == ["old"]  # the dead pooled connection is replaced, the read retried
    store.close()
