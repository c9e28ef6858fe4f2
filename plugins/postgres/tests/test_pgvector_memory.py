"""The ``pgvector`` index kind in whole memories: the postgres store with no local index
data, filters and scopes in the one statement, other processes' writes seen at once, and a
clear ConfigError on another store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memcore
from memcore import ConfigError

pytest.importorskip("pgvector")


def settings(url: str, schema: str, **index: Any) -> dict[str, Any]:
    return {
        "store": {"kind": "postgres", "url": url, "schema": schema},
        "indexes": {"main": {"kind": "pgvector", **index}},
    }


RECORDS = [
    {"id": "a", "text": "the cat sat on the mat", "metadata": {"topic": "pets", "n": 1}, "scope": {"user_id": "alice"}},
    {"id": "b", "text": "dogs bark at night", "metadata": {"topic": "pets", "n": 2}, "scope": {"user_id": "bob"}},
    {"id": "c", "text": "stock markets fell sharply", "metadata": {"topic": "finance", "n": 3}, "scope": {"user_id": "alice"}},
    {"id": "d", "text": "the cat chased a mouse", "metadata": {"topic": "wild", "n": 4}, "scope": {"user_id": "alice"}},
]


def test_search_filter_scope_and_update_through_a_memory(pg_url: str, schema: str, pg_dir: Path) -> None:
    with memcore.open(settings(pg_url, schema), path=pg_dir) as memory:
        memory.insert(RECORDS)
        assert [h["id"] for h in memory.retrieve("a cat on a mat", k=1)] == ["a"]
        assert {h["id"] for h in memory.retrieve("cat", k=4, where={"topic": "pets"})} == {"a", "b"}
        assert {h["id"] for h in memory.retrieve("cat", k=4, where={"n": {"$gte": 2}}, scope={"user_id": "alice"})} == {"c", "d"}
        assert memory.retrieve("cat", k=4, scope={"user_id": "carol"}) == []
        memory.delete("a")
        assert "a" not in {h["id"] for h in memory.retrieve("a cat on a mat", k=4)}
        memory.update("c", text="a cat sat on the mat")
        assert memory.retrieve("cat sat on the mat", k=1)[0]["id"] == "c"
        info = memory.collection.index("main").stats()
        assert info["size"] == 3 and info["method"] == "hnsw"
    # nothing of the index but its small manifest in the memory directory: no vectors
    index_files = [p for p in pg_dir.rglob("*") if p.is_file() and "indexes" in p.parts]
    assert sum(p.stat().st_size for p in index_files) < 4096, index_files


def test_a_second_process_sees_writes_at_once(pg_url: str, schema: str, pg_dir: Path, tmp_path: Path) -> None:
    other_dir = tmp_path / "other"
    with memcore.open(settings(pg_url, schema), path=pg_dir) as first, memcore.open(settings(pg_url, schema), path=other_dir) as second:
        first.insert(RECORDS[:2])
        assert {h["id"] for h in second.retrieve("cat", k=5)} == {"a", "b"}
        second.insert(RECORDS[2:])
        assert {h["id"] for h in first.retrieve("cat", k=5, where={"topic": "wild"})} == {"d"}


def test_another_store_is_a_clear_config_error(tmp_path: Path) -> None:
    config = {"store": {"kind": "sqlite"}, "indexes": {"main": {"kind": "pgvector"}}}
    with pytest.raises(ConfigError, match="postgres"):
        with memcore.open(config, path=tmp_path / "m") as memory:
            memory.insert({"text": "x"})
            memory.retrieve("x", k=1)


def test_searches_read_no_op_log(pg_url: str, schema: str, pg_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index reads the store's current rows (``reads_store``): another process's writes
    are seen without the op log being read before a search (no round trip, no records fetched)."""
    from memcore_postgres import PostgresStore

    with memcore.open(settings(pg_url, schema), path=pg_dir) as first, memcore.open(settings(pg_url, schema), path=tmp_path / "other") as second:
        first.insert(RECORDS[:2])
        reads: list[str] = []
        read_log = PostgresStore.read_log

        def spy(self: PostgresStore, seq: int, index: str) -> Any:
            reads.append(index)
            return read_log(self, seq, index)

        monkeypatch.setattr(PostgresStore, "read_log", spy)
        assert {h["id"] for h in second.retrieve("cat", k=5)} == {"a", "b"}
        first.insert(RECORDS[2:])
        assert {h["id"] for h in second.retrieve("cat", k=5, where={"topic": "wild"})} == {"d"}
        assert reads == []
