"""url mode against a second PostgreSQL the test starts on a TCP port, with a password."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memcore
from memcore import StoreUnavailableError
from memcore.testing import assert_no_bytes

from memcore_postgres import PostgresStore, PostgresStoreConfig

PASSWORD = "zqxTcpPassw0rd"  # conftest.TcpServer's


def settings(url: str) -> dict[str, Any]:
    return {"store": {"kind": "postgres", "url": url, "schema": "tcp_memory"}, "indexes": {"main": {"kind": "exact"}}}


def test_a_memory_on_a_tcp_server(tcp_server: Any, pg_dir: Path) -> None:
    with memcore.open(settings(tcp_server.url()), path=pg_dir) as memory:
        memory.insert([{"id": "a", "text": "tea with lemon", "metadata": {"n": 1}}, {"id": "b", "text": "coffee with milk", "metadata": {"n": 2}}])
        assert [h.id for h in memory.collection.retrieve("lemon tea", k=1, index="main")] == ["a"]
        assert memory.count(where={"n": {"$gt": 1}}) == 1
    assert not (pg_dir / "pgdata").exists()  # no embedded server in url mode
    assert_no_bytes(pg_dir, [PASSWORD])
    with memcore.open(settings(tcp_server.url()), path=pg_dir) as memory:
        assert memory.count() == 2


def test_a_wrong_password_is_store_unavailable_without_the_password(tcp_server: Any) -> None:
    with pytest.raises(StoreUnavailableError, match="password") as info:
        PostgresStore(PostgresStoreConfig(url=tcp_server.url("zqxWrongPw"), schema="tcp_memory", retries=0))
    assert "zqxWrongPw" not in str(info.value)


def test_a_stopped_server_is_store_unavailable_and_the_store_recovers(tcp_server: Any) -> None:
    store = PostgresStore(PostgresStoreConfig(url=tcp_server.url(), schema="tcp_stop", retries=1, connect_timeout=2))
    try:
        from memcore import Record
        from memcore.plugin import WriteBatch

        store.apply(WriteBatch(upserts=[Record.create("one", id="one")]))
        seq = store.last_seq()
        tcp_server.stop()
        try:
            with pytest.raises(StoreUnavailableError):
                store.apply(WriteBatch(upserts=[Record.create("two", id="two")]))
            with pytest.raises(StoreUnavailableError):
                store.ids()
        finally:
            tcp_server.start()
        assert store.ids() == ["one"] and store.last_seq() == seq  # nothing of the failed batch
        store.apply(WriteBatch(upserts=[Record.create("two", id="two")]))
        assert store.ids() == ["one", "two"]
    finally:
        store.close()
