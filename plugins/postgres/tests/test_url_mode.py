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


def test_roles_a_writer_without_create_on_the_database_and_a_reader(tcp_server: Any, pg_dir: Path, tmp_path: Path) -> None:
    """What docs/guides/postgres.md tells an administrator to grant: the writer owns a schema
    created for it (no CREATE on the database), the reader has USAGE and SELECT only."""
    import psycopg

    admin = tcp_server.url()
    app, reader = admin.replace("memcore:", "memcore_app:"), admin.replace("memcore:", "memcore_reader:")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE ROLE memcore_app LOGIN PASSWORD 'zqxTcpPassw0rd'")
        conn.execute("CREATE ROLE memcore_reader LOGIN PASSWORD 'zqxTcpPassw0rd'")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("REVOKE CREATE ON DATABASE postgres FROM PUBLIC")
        conn.execute("CREATE SCHEMA agent_memory AUTHORIZATION memcore_app")
        conn.execute("GRANT USAGE ON SCHEMA agent_memory TO memcore_reader")
        conn.execute("ALTER DEFAULT PRIVILEGES FOR ROLE memcore_app IN SCHEMA agent_memory GRANT SELECT ON TABLES TO memcore_reader")
    try:

        def config(url: str, read_only: bool = False) -> dict[str, Any]:
            return {"store": {"kind": "postgres", "url": url, "schema": "agent_memory", "read_only": read_only}, "indexes": {"main": {"kind": "pgvector"}}}

        with memcore.open(config(app), path=pg_dir) as memory:
            memory.insert([{"id": "a", "text": "the cat sat on the mat"}, {"id": "b", "text": "stock markets fell"}])
        with memcore.open(config(reader, read_only=True), path=tmp_path / "reader") as memory:
            assert [h["id"] for h in memory.retrieve("a cat on a mat", k=1)] == ["a"]
            with pytest.raises(memcore.ValidationError):
                memory.insert({"text": "a reader cannot write"})
        with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM agent_memory.records")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS agent_memory CASCADE")
            conn.execute("DROP OWNED BY memcore_app, memcore_reader")
            conn.execute("DROP ROLE memcore_app")
            conn.execute("DROP ROLE memcore_reader")
            conn.execute("GRANT CREATE ON DATABASE postgres TO PUBLIC")
