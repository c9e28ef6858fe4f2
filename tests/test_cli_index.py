"""``memcore index list|add|drop|rebuild`` over a memory on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import memcore
from memcore.cli import main

ROWS = [{"id": f"t{i}", "text": f"turn {i} about topic {i % 3}", "metadata": {"turn": i}} for i in range(30)]


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args], env={"MEMCORE_LOG": None})
    assert result.exit_code == code, result.output + repr(result.exception)
    return result


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run("ingest", "-p", tmp_path / "mem", data)
    return tmp_path / "mem"


def listed(mem: Path, *extra) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(run("index", "list", "-p", mem, "--json", *extra).stdout)}


def test_add_fills_the_index_and_list_shows_it(mem):
    out = run("index", "add", "-p", mem, "near", "--kind", "exact", "--option", "metric=l2", "--json")
    assert json.loads(out.stdout)["records"] == len(ROWS)
    rows = listed(mem)
    assert rows["near"]["size"] == len(ROWS) and rows["near"]["config"]["metric"] == "l2"
    assert "Populating near" in out.stderr  # the progress bar (stderr)
    run("index", "add", "-p", mem, "empty", "--kind", "exact", "--no-populate")
    assert listed(mem)["empty"]["size"] == 0
    assert "already exists" in run("index", "add", "-p", mem, "near", "--kind", "exact", code=2).output
    assert "unknown index kind" in run("index", "add", "-p", mem, "x", "--kind", "exactt", code=2).output
    human = run("index", "list", "-p", mem).stdout
    assert "near" in human and "30 record(s)" in human


def test_drop_removes_the_index_not_the_records(mem):
    run("index", "add", "-p", mem, "near", "--kind", "exact", "--option", "metric=l2")
    run("index", "drop", "-p", mem, "near")
    assert "near" not in listed(mem)
    with memcore.open(path=mem) as memory:
        assert memory.count() == len(ROWS)
    assert "no index named 'nope'" in run("index", "drop", "-p", mem, "nope", code=2).output


def test_rebuild_applies_changed_build_time_options_from_the_settings(mem, tmp_path):
    config = tmp_path / "ip.toml"
    config.write_text('[indexes.vector]\nkind = "exact"\nmetric = "ip"\n')
    failed = run("query", "-c", config, "-p", mem, "topic", code=2)  # a build-time change: the error says what to run
    assert "memcore index rebuild vector" in failed.output and "stored 'cosine', new 'ip'" in failed.output
    out = run("index", "rebuild", "-p", mem, "-c", config, "vector", "--json")
    assert json.loads(out.stdout)["records"] == len(ROWS)
    assert "Rebuilding vector" in out.stderr
    rows = listed(mem, "-c", config)
    assert rows["vector"]["config"]["metric"] == "ip" and rows["vector"]["size"] == len(ROWS)
    run("query", "-c", config, "-p", mem, "topic")  # opens fine now


def test_commands_need_an_existing_collection(tmp_path):
    for sub in (["list"], ["drop", "x"], ["rebuild", "x"]):
        assert "no memcore collection" in run("index", *sub, "-p", tmp_path / "none", code=2).output
    assert not (tmp_path / "none").exists()
