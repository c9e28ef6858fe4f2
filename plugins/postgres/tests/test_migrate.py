"""``memcore migrate`` to and from PostgreSQL: SQLite -> PostgreSQL -> SQLite gives the same
memory (records, vectors, links, membership, state, search results), a non-empty target is
refused, a bad URL is a typed error, a password is never shown or stored, and a copy that
failed midway is marked incomplete (memcore.open refuses it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

import memcore
from memcore import CorruptError
from memcore.api import _migrate
from memcore.cli import main
from memcore.testing import assert_no_bytes
from memcore.testing.migration import MIGRATION_SETTINGS, build_migration_memory, search_results, store_snapshot

PASSWORD = "zqxTcpPassw0rd"  # conftest.TcpServer's


def run(*args: str) -> tuple[int, str]:
    """Exit code and output (with --json and success: stdout alone, the JSON document)."""
    result = CliRunner().invoke(main, ["migrate", *args])
    return result.exit_code, result.stdout if "--json" in args and result.exit_code == 0 else result.output


def pg_settings(url: str, schema: str) -> dict[str, Any]:
    return {**MIGRATION_SETTINGS, "store": {"kind": "postgres", "url": url, "schema": schema}}


def test_sqlite_to_postgres_and_back_is_the_same_memory(tmp_path: Path, pg_url: str, schema: str) -> None:
    build_migration_memory(tmp_path / "a")
    code, out = run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema, "--batch-size", "4", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["verified"] and report["records"] == 22 and report["vectors"] == {"v": 22, "w": 22}
    assert report["history"] is None and "target store keeps no history" in report["history_note"]
    assert report["sample"] == {"checked": 22, "mismatched": []} and all(s["source"] == s["target"] > 0 for s in report["scopes"])

    code, out = run("--from", pg_url, "--from-schema", schema, "--to", str(tmp_path / "b"), "--json")
    assert code == 0, out
    assert json.loads(out)["verified"]

    with memcore.open(path=tmp_path / "a") as a, memcore.open(path=tmp_path / "b") as b:
        with memcore.open(pg_settings(pg_url, schema)) as pg:  # its indexes rebuilt from the store
            expected = search_results(a)
            assert search_results(pg) == expected
            assert store_snapshot(pg.collection.store, history=False) == store_snapshot(a.collection.store, history=False)
        assert search_results(b) == expected
        assert store_snapshot(b.collection.store, history=False) == store_snapshot(a.collection.store, history=False)
        assert b.collection.store.get_state("memory", "settings")["store"]["kind"] == "sqlite"


def test_the_copy_opens_with_its_stored_settings(tmp_path: Path, pg_url: str, schema: str) -> None:
    """The settings document the copy keeps names the postgres store (without the url, a
    secret): opened with only the store's place, it is the same memory."""
    build_migration_memory(tmp_path / "a", n=8)
    assert run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema)[0] == 0
    with memcore.open(store={"kind": "postgres", "url": pg_url, "schema": schema}) as pg:
        document = pg.collection.store.get_state("memory", "settings")
        assert document["store"] == {**document["store"], "kind": "postgres", "schema": schema} and "url" not in document["store"]
        assert document["omitted"] == ["store.url"]
        assert sorted(pg.collection.spaces) == ["v", "w"] and {i["name"] for i in pg.collection.list_indexes()} == {"dense", "small"}
        assert pg.count() == 7


def test_a_target_that_is_not_empty_is_refused_then_replaced(tmp_path: Path, pg_url: str, schema: str) -> None:
    build_migration_memory(tmp_path / "a")
    build_migration_memory(tmp_path / "small", n=8)
    assert run("--from", str(tmp_path / "small"), "--to", pg_url, "--to-schema", schema)[0] == 0
    code, out = run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema)
    assert code == 2 and "holds a memory already" in out and "--replace" in out
    with memcore.open(pg_settings(pg_url, schema)) as pg:
        assert pg.count() == 7
    code, out = run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema, "--replace", "--json")
    assert code == 0, out
    with memcore.open(pg_settings(pg_url, schema)) as pg, memcore.open(path=tmp_path / "a") as a:
        assert store_snapshot(pg.collection.store, history=False) == store_snapshot(a.collection.store, history=False)


def test_a_bad_url_is_a_typed_error_without_the_password(tmp_path: Path, tcp_server: Any) -> None:
    build_migration_memory(tmp_path / "a", n=8)
    wrong = tcp_server.url("zqxWrongPw")
    code, out = run("--from", str(tmp_path / "a"), "--to", wrong, "--to-schema", "nowhere")
    assert code == 2 and out.startswith("Error:") and "password" in out
    assert "zqxWrongPw" not in out and "Traceback" not in out
    refused = f"postgresql://memcore:{PASSWORD}@127.0.0.1:1/postgres"  # nothing listens on port 1
    code, out = run("--from", refused, "--to", str(tmp_path / "b"))
    assert code == 2 and out.startswith("Error:") and PASSWORD not in out
    assert not (tmp_path / "b").exists()


def test_the_password_is_never_printed_or_stored(tmp_path: Path, tcp_server: Any) -> None:
    build_migration_memory(tmp_path / "a", n=8)
    url = tcp_server.url()
    code, out = run("--from", str(tmp_path / "a"), "--to", url, "--to-schema", "migrated")
    assert code == 0 and PASSWORD not in out and "memcore:***@" in out
    code, out = run("--from", url, "--from-schema", "migrated", "--to", str(tmp_path / "b"), "--json")
    assert code == 0 and PASSWORD not in out
    assert json.loads(out)["from"].startswith("postgresql://memcore:***@127.0.0.1")
    assert_no_bytes(tmp_path / "b", [PASSWORD])
    with memcore.open(pg_settings(url, "migrated")) as pg:
        assert PASSWORD not in json.dumps(pg.collection.store.state_items("memory"))


def test_a_failure_midway_leaves_the_database_marked_incomplete(tmp_path: Path, pg_url: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    build_migration_memory(tmp_path / "a")

    def broken(*args: Any) -> int:
        raise CorruptError("the network went away")

    monkeypatch.setattr(_migrate, "_copy_state", broken)
    code, out = run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema)
    assert code == 2 and "the network went away" in out and "marked incomplete" in out
    with pytest.raises(CorruptError, match="incomplete copy"):
        memcore.open(pg_settings(pg_url, schema))
    monkeypatch.undo()
    code, out = run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema, "--replace")
    assert code == 0, out
    with memcore.open(pg_settings(pg_url, schema)) as pg:
        assert pg.count() == 22


def test_between_two_postgres_schemas(pg_url: str, schema: str, tmp_path: Path) -> None:
    build_migration_memory(tmp_path / "a", n=8)
    assert run("--from", str(tmp_path / "a"), "--to", pg_url, "--to-schema", schema)[0] == 0
    other = schema + "_copy"
    try:
        code, out = run("--from", pg_url, "--from-schema", schema, "--to", pg_url, "--to-schema", other, "--json")
        assert code == 0 and json.loads(out)["verified"], out
        with memcore.open(pg_settings(pg_url, schema)) as one, memcore.open(pg_settings(pg_url, other)) as two:
            assert store_snapshot(two.collection.store, history=False) == store_snapshot(one.collection.store, history=False)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(other)))


def test_between_two_directories_sqlite_to_embedded_postgres(tmp_path: Path, pg_dir: Path) -> None:
    """A directory target with other store settings (--to-config): the embedded PostgreSQL
    is started in the work directory, stopped, and the directory renamed into place."""
    build_migration_memory(tmp_path / "a", n=8)
    (tmp_path / "pg.toml").write_text('[store]\nkind = "postgres"\n')
    target = pg_dir / "mem"
    code, out = run("--from", str(tmp_path / "a"), "--to", str(target), "--to-config", str(tmp_path / "pg.toml"), "--json")
    assert code == 0, out
    assert (target / "pgdata" / "PG_VERSION").is_file() and not list(pg_dir.glob(".mem.*"))
    assert json.loads((target / "store.json").read_text())["store"] == {"kind": "postgres"}  # the copy names its store
    with memcore.open({**MIGRATION_SETTINGS, "store": {"kind": "postgres"}}, path=target) as pg, memcore.open(path=tmp_path / "a") as a:
        assert search_results(pg) == search_results(a)
        assert store_snapshot(pg.collection.store, history=False) == store_snapshot(a.collection.store, history=False)
    with memcore.open(path=target) as pg:  # the copy names its store (store.json): its path alone opens it
        assert pg.settings.store["kind"] == "postgres" and pg.count() == 7
    back = tmp_path / "back"  # and the embedded-PostgreSQL directory is a source by its path alone
    code, out = run("--from", str(target), "--to", str(back), "--json")
    assert code == 0, out
    with memcore.open(path=back) as copy, memcore.open(path=tmp_path / "a") as a:
        assert search_results(copy) == search_results(a)


def test_an_index_living_in_postgres_is_refused_by_a_sqlite_target_unless_dropped(tmp_path: Path, pg_url: str, schema: str) -> None:
    """A pgvector index cannot live in a SQLite directory: the copy is refused before anything
    is written, naming it; --drop-index leaves it out (definition, membership, settings entry)
    and the copy opens with the rest; an unknown name to drop is refused."""
    settings = pg_settings(pg_url, schema)
    settings["indexes"] = {**settings["indexes"], "pgv": {"kind": "pgvector", "space": "v"}}
    build_migration_memory(tmp_path / "unused", settings=settings)  # the path is unused: the memory lives in the schema
    target = tmp_path / "copy"

    code, out = run("--from", pg_url, "--from-schema", schema, "--to", str(target))
    assert code == 2, out
    assert "cannot hold pgv (kind pgvector, lives in a postgres store)" in out and "--drop-index" in out
    assert not target.exists() and not list(tmp_path.glob(".copy.migrating-*"))

    code, out = run("--from", pg_url, "--from-schema", schema, "--to", str(target), "--drop-index", "nope")
    assert code == 2 and "no index 'nope' in the source memory" in out, out
    assert not target.exists()

    code, out = run("--from", pg_url, "--from-schema", schema, "--to", str(target), "--drop-index", "pgv", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["verified"] and set(report["indexes"]) == {"dense", "small"}
    with memcore.open(path=target) as copy:
        assert {entry["name"] for entry in copy.collection.list_indexes()} == {"dense", "small"}
        assert "pgv" not in copy.collection.store.state_items("indexes")
        assert all("pgv" not in members for members in copy.collection.store.memberships(copy.collection.store.ids()).values())
        with memcore.open(settings) as pg:
            assert search_results(copy) == search_results(pg)
