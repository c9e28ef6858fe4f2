"""Whole memories on the postgres store: the embedded server, url mode, the secret, forgetting a scope."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import memcore
from memcore import ConfigError
from memcore.testing import assert_no_bytes, check_scope_forgotten
from memcore.testing.forgetting import BOB_IDS, CANARIES

from memcore_postgres import PostgresStore, PostgresStoreConfig


def settings(**store: Any) -> dict[str, Any]:
    return {"store": {"kind": "postgres", **store}, "indexes": {"main": {"kind": "exact"}}}


def postmasters(directory: Path) -> list[str]:
    """Running postgres server processes whose data directory is under ``directory``."""
    out = subprocess.run(["pgrep", "-a", "postgres"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(directory) in line]


def test_embedded_server_starts_in_the_memory_directory_and_stops_on_close(pg_dir: Path) -> None:
    with memcore.open(settings(), path=pg_dir) as memory:
        memory.insert([{"id": "a", "text": "the cat sat on the mat"}, {"id": "b", "text": "dogs bark at night"}])
        assert [h["id"] for h in memory.retrieve("cat on a mat", k=1)] == ["a"]
        assert (pg_dir / "pgdata" / "PG_VERSION").is_file()
        assert postmasters(pg_dir)
    assert postmasters(pg_dir) == []
    with memcore.open(settings(), path=pg_dir) as memory:  # the data outlives the server
        assert memory.count() == 2
        assert memory.get("b").text == "dogs bark at night"
    assert postmasters(pg_dir) == []


def test_url_is_a_secret_never_written_to_the_memory_directory(pg_url: str, schema: str, pg_dir: Path) -> None:
    parts = urlsplit(pg_url)
    password = "zqxSecretPassw0rd"
    url = urlunsplit(parts._replace(netloc=f"postgres:{password}@{parts.netloc.split('@')[-1]}"))  # trust auth ignores it
    with memcore.open(settings(url=url, schema=schema), path=pg_dir) as memory:
        memory.insert({"text": "a record"})
        config = memory.collection._store.config  # type: ignore[attr-defined]
        assert password not in repr(config) and password not in str(config.model_dump(mode="json"))
        assert password not in repr(memory.collection._store.pool.__dict__.keys())  # type: ignore[attr-defined]
    assert_no_bytes(pg_dir, [password])


def test_url_env_names_the_variable(pg_url: str, schema: str, pg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMCORE_TEST_PG_URL", pg_url)
    with memcore.open(settings(url_env="MEMCORE_TEST_PG_URL", schema=schema), path=pg_dir) as memory:
        memory.insert({"id": "x", "text": "hello"})
        assert memory.count() == 1
    monkeypatch.delenv("MEMCORE_TEST_PG_URL")
    with pytest.raises(ConfigError, match="MEMCORE_TEST_PG_URL"):
        memcore.open(settings(url_env="MEMCORE_TEST_PG_URL", schema=schema), path=pg_dir)


def test_bad_schema_names_are_refused() -> None:
    for bad in ("Upper", "a-b", "pg_catalog", "x;drop", ""):
        with pytest.raises(ConfigError):
            memcore.open(settings(url="postgresql://nobody@/x", schema=bad))


def test_one_schema_per_memory(pg_url: str, pg_dir: Path) -> None:
    try:
        with (
            memcore.open(settings(url=pg_url, schema="mem_one"), path=pg_dir / "one") as one,
            memcore.open(settings(url=pg_url, schema="mem_two"), path=pg_dir / "two") as two,
        ):
            one.insert({"id": "r", "text": "in one"})
            two.insert([{"id": "r", "text": "in two"}, {"id": "s", "text": "also two"}])
            assert (one.count(), two.count()) == (1, 2)
            assert one.get("r").text == "in one"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS mem_one, mem_two CASCADE")


def test_forgetting_a_scope_leaves_none_of_its_rows(pg_url: str, schema: str, pg_dir: Path) -> None:
    check_scope_forgotten(lambda path: memcore.open(settings(url=pg_url, schema=schema), path=path), pg_dir)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))]
        assert {"records", "links", "oplog", "state"} <= set(tables)
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} t").format(sql.Identifier(schema), sql.Identifier(table))
            rows = [r[0] for r in conn.execute(query)]
            for needle in (*CANARIES, *BOB_IDS):
                assert not any(needle in row for row in rows), (table, needle)
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}.records WHERE user_id = 'bob'").format(sql.Identifier(schema))).fetchone() == (0,)


def test_a_reader_cannot_write_and_needs_the_schema(pg_url: str, schema: str) -> None:
    with pytest.raises(ConfigError, match="no memcore schema"):
        PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema, read_only=True))
    PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema)).close()
    reader = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema, read_only=True))
    try:
        from memcore.plugin import ValidationError, WriteBatch

        with pytest.raises(ValidationError):
            reader.apply(WriteBatch(state={("ns", "k"): 1}))
    finally:
        reader.close()


def test_a_postgres_memory_reopens_by_its_path_alone(pg_dir: Path) -> None:
    with memcore.open(settings(schema="notes"), path=pg_dir) as memory:
        memory.insert([{"id": "a", "text": "the cat sat on the mat"}, {"id": "b", "text": "dogs bark at night"}])
    assert json.loads((pg_dir / "store.json").read_text())["store"] == {"kind": "postgres", "schema": "notes"}
    with memcore.open(path=pg_dir) as memory:  # the directory names its store: no --config needed
        assert memory.settings.store["kind"] == "postgres" and memory.count() == 2
        assert [h["id"] for h in memory.retrieve("cat on a mat", k=1)] == ["a"]
    counted = subprocess.run(["memcore", "count", "--path", str(pg_dir), "--json"], capture_output=True, text=True, timeout=300)
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout)["count"] == 2
    assert postmasters(pg_dir) == []


def test_a_url_memory_reopened_by_path_asks_for_its_url(pg_url: str, schema: str, pg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with memcore.open(settings(url=pg_url, schema=schema), path=pg_dir) as memory:
        memory.insert({"id": "x", "text": "hello"})
    named = json.loads((pg_dir / "store.json").read_text())
    assert named == {"format": 1, "store": {"kind": "postgres", "schema": schema}, "omitted": ["store.url"]}
    with pytest.raises(ConfigError, match=r"store\.url is a secret.*MEMCORE_STORE__URL"):
        memcore.open(path=pg_dir)  # never an embedded server in the URL's place
    assert not (pg_dir / "pgdata").exists()
    monkeypatch.setenv("MEMCORE_STORE__URL", pg_url)
    with memcore.open(path=pg_dir) as memory:
        assert memory.get("x").text == "hello"
