"""``memcore migrate`` between memory directories (SQLite to SQLite with other store
settings): everything copied and verified, history when both keep it, the refusals, and a
failure that leaves nothing at the target. The PostgreSQL round trip is in
plugins/postgres/tests/test_migrate.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import memcore
from memcore import CorruptError
from memcore.api import _migrate
from memcore.cli import main
from memcore.stores._store import WriteBatch
from memcore.testing.migration import build_migration_memory, search_results, store_snapshot


def run(*args: str) -> tuple[int, str]:
    """Exit code and output (with --json and success: stdout alone, the JSON document)."""
    result = CliRunner().invoke(main, ["migrate", *args])
    return result.exit_code, result.stdout if "--json" in args and result.exit_code == 0 else result.output


def test_directory_to_directory_copies_everything_with_history(tmp_path: Path) -> None:
    build_migration_memory(tmp_path / "a")
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"), "--batch-size", "4", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["verified"] and report["records"] == 22 and report["vectors"] == {"v": 22, "w": 22}
    assert report["history"] > 22 and report["sample"] == {"checked": 22, "mismatched": []}
    assert {json.dumps(s["scope"], sort_keys=True): s["target"] for s in report["scopes"]}['{"agent_id": "a", "user_id": "u0"}'] > 0
    assert report["indexes"]["dense"] == {"source": 22, "target": 22}
    with memcore.open(path=tmp_path / "a") as a, memcore.open(path=tmp_path / "b") as b:
        assert store_snapshot(b.collection.store) == store_snapshot(a.collection.store)
        assert search_results(b) == search_results(a)
        assert b.history("r3") == a.history("r3") and [v["op"] for v in b.history("r7")] == ["insert", "delete"]
    assert not list(tmp_path.glob(".b.*"))  # the work directory became the target


def test_other_store_settings_without_history(tmp_path: Path) -> None:
    build_migration_memory(tmp_path / "a")
    (tmp_path / "nohistory.toml").write_text('[store]\nkind = "sqlite"\nhistory = false\n')
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"), "--to-config", str(tmp_path / "nohistory.toml"))
    assert code == 0, out
    assert "history: not copied (the target store keeps no history" in out and "verified: True" in out
    with memcore.open(path=tmp_path / "b") as b, memcore.open(path=tmp_path / "a") as a:
        assert b.settings.store["history"] is False  # the copy keeps its own store settings
        assert store_snapshot(b.collection.store, history=False) == store_snapshot(a.collection.store, history=False)
        assert search_results(b) == search_results(a)


def test_refuses_a_target_that_is_not_empty(tmp_path: Path) -> None:
    build_migration_memory(tmp_path / "a")
    build_migration_memory(tmp_path / "b", n=8)
    before = (tmp_path / "b" / "store.sqlite3").read_bytes()
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"))
    assert code == 2 and "is not empty" in out and "--replace" in out
    assert (tmp_path / "b" / "store.sqlite3").read_bytes() == before
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"), "--replace", "--json")
    assert code == 0, out
    with memcore.open(path=tmp_path / "b") as b:
        assert b.count() == 22


def test_bad_ends_are_typed_errors(tmp_path: Path) -> None:
    build_migration_memory(tmp_path / "a")
    code, out = run("--from", str(tmp_path / "nothing"), "--to", str(tmp_path / "b"))
    assert code == 2 and "no memory at" in out
    code, out = run("--from", str(tmp_path / "a"), "--to", "mysql://root:hunter2@db/x")
    assert code == 2 and "not a mysql:// URL" in out and "hunter2" not in out  # the schemes installed stores take are named
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "a"))
    assert code == 2 and "same directory" in out
    assert not (tmp_path / "b").exists()


def test_a_failure_midway_leaves_no_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_migration_memory(tmp_path / "a")

    def broken(*args: Any) -> int:
        raise CorruptError("disk on fire")

    monkeypatch.setattr(_migrate, "_copy_state", broken)
    code, out = run("--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"))
    assert code == 2 and "disk on fire" in out
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.*"))


def test_an_incomplete_copy_does_not_open(tmp_path: Path) -> None:
    """A store still carrying the mark of an unfinished migration is refused by memcore.open."""
    build_migration_memory(tmp_path / "a", n=8)
    with memcore.open(path=tmp_path / "a") as m:
        m.collection.store.apply(WriteBatch(state={_migrate.MARKER: {"complete": False, "source": "somewhere", "started": 0}}))
    with pytest.raises(CorruptError, match="incomplete copy made by `memcore migrate`"):
        memcore.open(path=tmp_path / "a")


def test_help() -> None:
    code, out = run("--help")
    assert code == 0 and "--replace" in out and "--to-schema" in out
