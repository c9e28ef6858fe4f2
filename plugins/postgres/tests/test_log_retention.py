"""The shared op log keeps what was written within ``log_retention_s``: a process closing
(its flush prunes the log) does not make the other processes of the memory rebuild their
in-process indexes; a forgotten scope's ops still go at the next prune."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import memcore
from memcore.plugin import ConfigError


def settings(pg_url: str, schema: str, **store: Any) -> dict[str, Any]:
    return {"store": {"kind": "postgres", "url": pg_url, "schema": schema, **store}, "indexes": {"main": {"kind": "exact"}}}


def log_start(pg_url: str, schema: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT value FROM {}.meta WHERE key = 'log_start'").format(sql.Identifier(schema))).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("retention", [3600.0, 0.0], ids=["kept", "pruned"])
def test_another_process_closing_does_not_make_this_one_rebuild(pg_url: str, schema: str, tmp_path: Path, retention: float) -> None:
    conf = settings(pg_url, schema, log_retention_s=retention)
    writer = memcore.open(conf, path=tmp_path / "writer")
    reader = memcore.open(conf, path=tmp_path / "reader")
    try:
        writer.insert([{"id": f"a{i}", "text": f"alpha number {i}"} for i in range(20)])
        assert reader.retrieve("alpha number 3", k=1)[0]["id"] == "a3"
        handle = reader.collection._indexes["main"]  # type: ignore[attr-defined]
        index_before = handle.index
        writer.insert([{"id": f"b{i}", "text": f"beta number {i}"} for i in range(20)])
        writer.close()  # its flush prunes the shared log as far as its own indexes applied
        assert reader.retrieve("beta number 7", k=1)[0]["id"] == "b7"  # every committed write seen, either way
        assert reader.count() == 40
        if retention:
            assert handle.index is index_before  # caught up from the log: no rebuild
            assert log_start(pg_url, schema) == 0
        else:
            assert handle.index is not index_before  # a gap in the log: rebuilt from the store
            assert log_start(pg_url, schema) > 0
    finally:
        writer.close()
        reader.close()


def test_ops_older_than_the_retention_are_pruned(pg_url: str, schema: str, tmp_path: Path) -> None:
    with memcore.open(settings(pg_url, schema, log_retention_s=1), path=tmp_path / "m") as memory:
        memory.insert([{"id": "x", "text": "first write"}])
        memory.collection.flush()  # notes the log's end now; nothing is older than a second yet
        assert log_start(pg_url, schema) == 0
        time.sleep(2.2)  # the retention (1 s) passes: not a timing threshold, a clock the prune reads
        memory.insert([{"id": "y", "text": "second write"}])
        memory.collection.flush()
        start = log_start(pg_url, schema)
        assert start >= 1  # the first write's ops went
        assert start < memory.collection._store.last_seq()  # type: ignore[attr-defined]  # the second's stay
        assert [h["id"] for h in memory.retrieve("second write", k=1)] == ["y"]


def test_forgetting_a_scope_prunes_its_ops_whatever_the_retention(pg_url: str, schema: str, tmp_path: Path) -> None:
    with memcore.open(settings(pg_url, schema), path=tmp_path / "m") as memory:
        memory.insert([{"id": "bob-secret-id", "text": "bob's note", "scope": {"user_id": "bob"}}])
        memory.insert([{"id": "alice-id", "text": "alice's note", "scope": {"user_id": "alice"}}])
        memory.forget({"user_id": "bob"})
        memory.insert([{"id": "alice-2", "text": "alice again", "scope": {"user_id": "alice"}}])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = [r[0] for r in conn.execute(sql.SQL("SELECT t::text FROM {}.oplog t").format(sql.Identifier(schema)))]
    assert rows and not any("bob-secret-id" in row for row in rows)  # gone; later ops kept
    assert any("alice-2" in row for row in rows)


def test_a_bad_retention_is_refused(pg_url: str, schema: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="log_retention_s"):
        memcore.open(settings(pg_url, schema, log_retention_s=-1), path=tmp_path / "m")
