"""The ``pg_text`` index kind in whole memories: filters and scopes in the one statement,
updates, deletes and forgotten scopes seen at once (the ``tsvector`` lives in the store's
rows), user text that never breaks the query, typed errors, and a clear ConfigError on
another store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import memcore
from memcore import ConfigError, ValidationError
from memcore.testing import check_scope_forgotten, retrieve_by_index
from memcore.testing.forgetting import BOB_IDS, CANARIES

from memcore_postgres.pg_text import MAX_CHARS, PgTextIndex


def settings(url: str, schema: str, **index: Any) -> dict[str, Any]:
    return {
        "store": {"kind": "postgres", "url": url, "schema": schema},
        "indexes": {"text": {"kind": "pg_text", **index}},
    }


RECORDS = [
    {"id": "a", "text": "The cat sat on the mat", "metadata": {"topic": "pets", "n": 1}, "scope": {"user_id": "alice"}},
    {"id": "b", "text": "Dogs bark at cats during the night", "metadata": {"topic": "pets", "n": 2}, "scope": {"user_id": "bob"}},
    {"id": "c", "text": "Stock markets fell sharply", "metadata": {"topic": "finance", "n": 3}, "scope": {"user_id": "alice"}},
    {"id": "d", "text": "The cat chased a mouse", "metadata": {"topic": "wild", "n": 4}, "scope": {"user_id": "alice"}},
]


def ids(memory: Any, text: str, **kw: Any) -> list[str]:
    return [h.id for h in memory.query(text, index="text", **kw)]


def test_search_filter_scope_update_and_delete(pg_url: str, schema: str, pg_dir: Path) -> None:
    with memcore.open(settings(pg_url, schema), path=pg_dir) as memory:
        memory.insert(RECORDS)
        assert ids(memory, "cats on mats", k=1) == ["a"]  # stemmed: cats -> cat, mats -> mat
        assert set(ids(memory, "cat", k=10)) == {"a", "b", "d"}  # any term (OR), ranked
        assert set(ids(memory, "cat", k=10, where={"topic": "pets"})) == {"a", "b"}
        assert set(ids(memory, "cat mouse", k=10, where={"n": {"$gte": 2}}, scope={"user_id": "alice"})) == {"d"}
        assert ids(memory, "cat", k=10, scope={"user_id": "carol"}) == []
        memory.update("c", text="a cat market")
        assert set(ids(memory, "cat", k=10)) == {"a", "b", "c", "d"}
        assert ids(memory, "stock sharply", k=10) == []  # the old words are gone with the old text
        memory.delete("a")
        assert "a" not in ids(memory, "cat mat", k=10)
        hits = memory.query("cat", index="text", k=10)
        assert {h.source for h in memory.collection.index("text").search(memcore.Query(text="cat"), 10)} == {"text"}
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and all(h.score > 0 for h in hits)
        stats = memory.collection.index("text").stats()
        assert stats["size"] == 3 and stats["language"] == "english" and stats["scoring"] == "bm25"
    # nothing of the index but its small manifest in the memory directory
    index_files = [p for p in pg_dir.rglob("*") if p.is_file() and "indexes" in p.parts]
    assert sum(p.stat().st_size for p in index_files) < 4096, index_files


def test_match_all_and_ts_rank_cd(pg_url: str, schema: str, pg_dir: Path) -> None:
    with memcore.open(settings(pg_url, schema, match="all", scoring="ts_rank_cd"), path=pg_dir) as memory:
        memory.insert(RECORDS)
        assert set(ids(memory, "the cat", k=10)) == {"a", "b", "d"}  # 'the' is a stopword: 'cat' alone
        assert ids(memory, "cat mouse", k=10) == ["d"]  # every term
        assert ids(memory, "cat stock", k=10) == []


@pytest.mark.parametrize(
    "text",
    ["it's a 'cat'", "back\\slash \\' cat", "cat & | ! ( ) : * <-> <2> dog", "'''", "cat:* | !dog", "chat 猫 кошка 🐈", '-cat OR "dog"', "the and of"],
)
def test_user_text_never_breaks_the_query(pg_url: str, schema: str, pg_dir: Path, text: str) -> None:
    for match in ("any", "all"):
        with memcore.open(settings(pg_url, schema, match=match), path=pg_dir) as memory:
            if not memory.count():
                memory.insert(RECORDS + [{"id": "q", "text": "it's a back\\slash 'quoted' chat 猫 кошка"}])
            hits = ids(memory, text, k=5)
            assert isinstance(hits, list) and len(hits) <= 5
    if text == "the and of":
        assert hits == []  # only stopwords: nothing to search for


def test_bad_queries_are_typed_errors_and_change_nothing(pg_url: str, schema: str, pg_dir: Path) -> None:
    with memcore.open(settings(pg_url, schema), path=pg_dir) as memory:
        memory.insert(RECORDS)
        index = memory.collection.index("text")
        for bad in ("", "   "):
            with pytest.raises(ValidationError):
                memory.query(bad, index="text", k=3)
        for k in (0, -1):
            with pytest.raises(ValidationError):
                memory.query("cat", index="text", k=k)
        with pytest.raises(ValidationError):
            memory.query("nul \x00 byte", index="text", k=3)
        assert memory.count() == 4 and len(index) == 4


def test_unknown_language_and_another_store_are_config_errors(pg_url: str, schema: str, pg_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="klingon"):
        with memcore.open(settings(pg_url, schema, language="klingon"), path=pg_dir) as memory:
            memory.insert({"text": "x"})
    with pytest.raises(ConfigError):
        memcore.open(settings(pg_url, schema, language="english; drop table records"), path=pg_dir)
    with pytest.raises(ConfigError, match="postgres"):
        with memcore.open({"store": {"kind": "sqlite"}, "indexes": {"main": {"kind": "pg_text"}}}, path=tmp_path / "m") as memory:
            memory.insert({"text": "x"})
            memory.query("x", index="main", k=1)


def test_other_processes_and_languages(pg_url: str, schema: str, pg_dir: Path, tmp_path: Path) -> None:
    """A second memory object (another process) searches before any column exists (the
    tsvector computed in the statement), then sees the first one's writes at once; two
    languages keep two columns."""
    with memcore.open(settings(pg_url, schema), path=pg_dir) as first:
        with memcore.open(settings(pg_url, schema), path=tmp_path / "other") as second:
            assert ids(second, "cat", k=3) == []
            first.insert(RECORDS[:2])
            assert set(ids(second, "cats", k=3)) == {"a", "b"}
            second.insert(RECORDS[2:])
            assert set(ids(first, "cat", k=5, where={"topic": "wild"})) == {"d"}
    simple = {
        "store": {"kind": "postgres", "url": pg_url, "schema": schema},
        "indexes": {"text": {"kind": "pg_text"}, "raw": {"kind": "pg_text", "language": "simple"}},
        "pipeline": [{"kind": "recall", "index": "text"}, {"kind": "limit"}],
    }
    with memcore.open(simple, path=pg_dir) as memory:
        assert ids(memory, "cats", k=5) and [h.id for h in memory.query("cats", index="raw", k=5)] == ["b"]  # simple: no stemming
    with psycopg.connect(pg_url, autocommit=True) as conn:
        columns = {
            r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'records'", (schema,))
        }
    assert {"tsv_english", "tsv_simple"} <= columns


def test_the_plan_uses_the_gin_index_and_filters_in_one_statement(pg_url: str, schema: str, pg_dir: Path) -> None:
    with memcore.open(settings(pg_url, schema), path=pg_dir) as memory:
        memory.insert(RECORDS)
        index = memory.collection.index("text")
        assert isinstance(index, PgTextIndex) and index.applies_filters
        query = memcore.Query(text="cat", where={"topic": "pets"}, scope=memcore.Scope(user_id="alice"))
        statement, params = index.statement(query, 5, None)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
            conn.execute("SET enable_seqscan = off")  # four rows: without this the planner rightly scans
            plan = "\n".join(r[0] for r in conn.execute(sql.Composed([sql.SQL("EXPLAIN "), statement]), params))
            assert "records_tsv_english" in plan
            assert [r[0] for r in conn.execute(statement, params)] == ["a"]


def test_long_texts_are_indexed_up_to_the_limit(pg_url: str, schema: str, pg_dir: Path) -> None:
    """A text whose tsvector would pass PostgreSQL's 1 MB limit is stored whole and indexed up to MAX_CHARS characters."""
    words = [f"w{i:x}" for i in range(150_000)]  # ~1 MB of distinct words (memcore's longest text): 2.6 MB of tsvector
    long_text = ("needlefirst " + " ".join(words))[: 1_000_000 - len(" needlelast")] + " needlelast"
    with memcore.open(settings(pg_url, schema, language="simple"), path=pg_dir) as memory:
        cjk = " ".join(chr(0x4E00 + i % 20_000) for i in range(499_999))  # single-character words, all distinct in each 20,000
        memory.insert([{"id": "long", "text": long_text}, {"id": "short", "text": "needlelast here"}, {"id": "cjk", "text": cjk}])
        assert memory.get("long").text == long_text
        assert ids(memory, "needlefirst", k=3) == ["long"]
        assert ids(memory, "needlelast", k=3) == ["short"]  # past MAX_CHARS: not indexed
        assert ids(memory, chr(0x4E00 + 19_999), k=3) == ["cjk"]
    assert len(long_text) > MAX_CHARS


def test_forgetting_a_scope_leaves_no_tsvector(pg_url: str, schema: str, pg_dir: Path) -> None:
    check_scope_forgotten(lambda path: memcore.open(settings(pg_url, schema), path=path), pg_dir, retrieve=retrieve_by_index("text"))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
        rows = [r[0] for r in conn.execute("SELECT t::text FROM records t")]
        assert rows, "alice's records stay"
        for needle in (*CANARIES, *BOB_IDS):
            assert not any(needle.lower() in row.lower() for row in rows), needle
        for canary in ("zqxvelvetkey", "zqxorchidlock", "zqxmarbleknot", "piano", "garage", "doctor"):
            assert conn.execute("SELECT count(*) FROM records WHERE tsv_english @@ plainto_tsquery('english', %s)", (canary,)).fetchone() == (0,)
