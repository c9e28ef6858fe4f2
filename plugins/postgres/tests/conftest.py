"""One embedded PostgreSQL for the whole test session (stopped at its end) and a fresh
schema per test, dropped afterwards."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
from psycopg import sql

from memcore_postgres import PostgresStore, PostgresStoreConfig

pgserver = pytest.importorskip("pgserver")


@pytest.fixture
def pg_dir() -> Iterator[Path]:
    """A directory of its own for a memory with an embedded server, removed afterwards.

    Not pytest's ``tmp_path``: pytest removes older numbered base directories while other
    pytest runs of the same user go on, and a server's data directory must outlive that."""
    path = Path(tempfile.mkdtemp(prefix="memcore-pg-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URI of an embedded PostgreSQL started for this session (stopped at its end)."""
    base = Path(tempfile.mkdtemp(prefix="memcore-pg-session-"))
    pgdata = base / "pgdata"
    pgdata.mkdir()
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def drop_schema(url: str, schema: str) -> None:
    """Drop a test's schema and everything in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A schema name no other test uses (dropped after the test)."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def pg_store(pg_url: str, schema: str) -> Iterator[PostgresStore]:
    """A fresh, empty postgres store in its own schema."""
    store = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema))
    yield store
    store.close()
