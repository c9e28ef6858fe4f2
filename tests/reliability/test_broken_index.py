"""Issue 13, critical 3: a failure to load or rebuild one index never blocks opening the memory.

Stored definitions that no longer build (``HNSW0`` committed by an older memcore, an
index kind whose plugin was uninstalled) and indexes whose rebuild fails (damaged stored
vectors) leave the store and the other indexes usable; the index is reported (log event,
``list_indexes``, a BrokenIndexError naming it when searched) and can be rebuilt or dropped.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

import memcore
from memcore import BrokenIndexError
from memcore._util.log import configure_logging

from .conftest import settings, snapshot, vec


def _store_definition(directory, name, definition):
    """Write an index definition into the store as an older memcore (or a removed plugin) left it."""
    db = sqlite3.connect(directory / "store.sqlite3")
    db.execute("INSERT OR REPLACE INTO state VALUES ('indexes', ?, ?)", (name, json.dumps(definition)))
    db.commit()
    db.close()


def _filled(directory):
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(6)])


BAD_DEFINITIONS = {
    "hnsw0": {"kind": "faiss", "config": {"kind": "faiss", "space": "v", "factory": "HNSW0"}},
    "uninstalled": {"kind": "no-such-plugin-kind", "config": {"kind": "no-such-plugin-kind"}},
    "bad_option": {"kind": "exact", "config": {"kind": "exact", "space": "v", "metric": "hamming"}},
    "undeclared_space": {"kind": "exact", "config": {"kind": "exact", "space": "gone"}},
}


@pytest.mark.parametrize("case", sorted(BAD_DEFINITIONS))
def test_a_stored_definition_that_no_longer_builds_does_not_block_open(directory, case, capsys):
    _filled(directory)
    _store_definition(directory, "bad", BAD_DEFINITIONS[case])
    configure_logging("json")
    try:
        for read_only in (False, True):
            with memcore.open({**settings(), "store": {"read_only": read_only}}, path=directory) as memory:
                c = memory.collection
                assert c.count() == 6
                assert c.retrieve({"vectors": {"v": vec(3)}}, index="flat", k=1)[0].id == "r3"
                assert memory.retrieve(vector=vec(2), k=1)[0]["id"] == "r2"  # the pipeline over the healthy index
                entry = {i["name"]: i for i in c.list_indexes()}["bad"]
                assert entry["status"] == "broken" and entry["error"]
                with pytest.raises(BrokenIndexError, match="'bad'"):
                    c.retrieve({"vectors": {"v": vec(3)}}, index="bad")
    finally:
        configure_logging("off")
    assert '"event": "index.broken"' in capsys.readouterr().err
    with memcore.open(settings(), path=directory) as memory:  # writes while broken keep working
        memory.collection.insert([{"id": "new", "text": "new", "vectors": {"v": vec(50)}}])
        memory.collection.drop_index("bad")
        assert "bad" not in {i["name"] for i in memory.collection.list_indexes()}
    with memcore.open(settings(), path=directory) as memory:
        assert memory.collection.count() == 7
        assert memory.collection.retrieve({"vectors": {"v": vec(50)}}, index="flat", k=1)[0].id == "new"


def test_broken_index_files_are_left_alone_and_a_rebuild_repairs_it(directory):
    _filled(directory)
    with memcore.open(settings(), path=directory) as memory:
        memory.collection.create_index("later", "exact", space="v", populate=True)
    saved = sorted(p.name for p in (directory / "indexes" / "later").iterdir())
    definition = {"kind": "exact", "config": {"kind": "exact", "space": "v", "metric": "cosine"}}
    _store_definition(directory, "later", {**definition, "kind": "no-such-plugin-kind"})
    with memcore.open(settings(), path=directory) as memory:
        before = snapshot(memory)
        assert {i["name"]: i["status"] for i in memory.collection.list_indexes()}["later"] == "broken"
        memory.collection.insert([{"id": "x", "text": "x", "vectors": {"v": vec(77)}}])  # membership kept in the store
    assert sorted(p.name for p in (directory / "indexes" / "later").iterdir()) == saved
    _store_definition(directory, "later", definition)  # e.g. the plugin was installed again
    with memcore.open(settings(), path=directory) as memory:
        c = memory.collection
        assert {i["name"]: i["status"] for i in c.list_indexes()}["later"] == "ok"
        assert c.count(index="later") == before[0] + 1
        assert c.retrieve({"vectors": {"v": vec(77)}}, index="later", k=1)[0].id == "x"


def test_rebuild_of_a_still_broken_index_is_typed_and_keeps_it_reported(directory):
    _filled(directory)
    _store_definition(directory, "bad", BAD_DEFINITIONS["hnsw0"])
    with memcore.open(settings(), path=directory) as memory:
        with pytest.raises(BrokenIndexError, match="HNSW M"):
            memory.collection.rebuild_index("bad")
        assert {i["name"]: i["status"] for i in memory.collection.list_indexes()}["bad"] == "broken"


def test_an_index_update_failure_then_failing_rebuild_becomes_broken(directory):
    """A stale index whose rebuild fails is reported as broken, not a raw error on every call."""
    _filled(directory)
    with memcore.open(settings(), path=directory) as memory:
        c = memory.collection
        handle = c._indexes["flat"]
        handle.stale = True

        def boom(*a, **k):
            raise RuntimeError("simulated library failure")

        handle.rebuild = boom  # type: ignore[method-assign]
        with pytest.raises(BrokenIndexError, match="simulated library failure"):
            c.retrieve({"vectors": {"v": vec(1)}}, index="flat")
        assert c.retrieve({"vectors": {"v": vec(1)}}, index="exact", k=1)[0].id == "r1"
        assert c.rebuild_index("flat") == 6
        assert c.retrieve({"vectors": {"v": vec(1)}}, index="flat", k=1)[0].id == "r1"


def test_memcore_info_check_reports_a_broken_index_and_store_integrity(directory):
    from click.testing import CliRunner

    from memcore.cli import main

    _filled(directory)
    runner = CliRunner()
    ok = runner.invoke(main, ["info", "--path", str(directory), "--check", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["check"] == {"integrity": [], "indexes": {"exact": {"status": "ok"}, "flat": {"status": "ok"}}, "ok": True}
    _store_definition(directory, "bad", BAD_DEFINITIONS["hnsw0"])
    result = runner.invoke(main, ["info", "--path", str(directory), "--check", "--json"])
    assert result.exit_code == 1
    check = json.loads(result.stdout)["check"]
    assert check["indexes"]["bad"]["status"] == "broken" and "HNSW M" in check["indexes"]["bad"]["error"]
    text = runner.invoke(main, ["info", "--path", str(directory), "--check"])
    assert "bad: broken" in text.output and "Traceback" not in text.output


def test_an_index_whose_library_fails_to_count_is_reported_broken_not_raised(directory, monkeypatch):
    """Issue 27: ``list_indexes`` called ``len(index)`` unguarded, so a library error (Chroma's
    InternalError on a damaged file) escaped from it -- and from ``memcore.open``."""
    _filled(directory)
    with memcore.open(settings(), path=directory) as memory:
        c = memory.collection
        flat = type(c.index("flat"))

        def fail(self):
            raise RuntimeError("the library cannot read its files")

        monkeypatch.setattr(flat, "__len__", fail)
        entry = {i["name"]: i for i in c.list_indexes()}["flat"]
        assert entry["status"] == "broken" and "cannot read its files" in entry["error"]
        with pytest.raises(BrokenIndexError, match="'flat'"):
            c.retrieve({"vectors": {"v": vec(3)}}, index="flat")
        assert c.retrieve({"vectors": {"v": vec(3)}}, index="exact", k=1)[0].id == "r3"
        monkeypatch.undo()
        assert c.rebuild_index("flat") == 6
        assert c.retrieve({"vectors": {"v": vec(3)}}, index="flat", k=1)[0].id == "r3"


def test_saved_files_a_library_fails_to_read_are_rebuilt_at_open(directory, monkeypatch):
    """A library's own error while loading or first counting saved files (not a CorruptError)
    rebuilds the index from the store at open instead of failing the open."""
    _filled(directory)
    with memcore.open(settings(), path=directory) as memory:
        flat = type(memory.collection.index("flat"))
    original = flat.load

    def load(self, path):
        original(self, path)
        raise RuntimeError("InternalError: the library chokes on its file")

    monkeypatch.setattr(flat, "load", load)
    with memcore.open(settings(), path=directory) as memory:
        c = memory.collection
        assert {i["name"]: i["status"] for i in c.list_indexes()} == {"exact": "ok", "flat": "ok"}
        assert c.retrieve({"vectors": {"v": vec(3)}}, index="flat", k=1)[0].id == "r3"
