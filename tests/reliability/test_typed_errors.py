"""Issue 13 item 9 and "Low": every failure is a typed memcore error, the store unchanged.

Damaged SQLite bytes surface as CorruptError naming the file (never a raw
sqlite3.DatabaseError, UnicodeDecodeError or JSON error); raw TypeError/RecursionError/
ValueError/FileExistsError cases of the probe become ValidationError/ConfigError.
"""

from __future__ import annotations

import sqlite3

import pytest

import memcore
from memcore import ConfigError, CorruptError, MemcoreError, ValidationError
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

from .conftest import settings, snapshot, vec


@pytest.fixture
def memory(directory):
    m = memcore.open(settings(), path=directory)
    m.collection.insert([{"id": f"r{i}", "text": f"r{i}", "metadata": {"n": i}, "vectors": {"v": vec(i)}} for i in range(5)])
    yield m
    m.close()


def _nested(depth):
    value = {"leaf": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


LOW = {
    "delete_none": lambda c: c.delete(None),
    "delete_int": lambda c: c.delete(5),
    "delete_ints": lambda c: c.delete([5]),
    "get_many_int": lambda c: c.get_many(5),
    "state_not_json": lambda c: c.set_state({("svc", "k"): object()}),
    "state_set": lambda c: c.set_state({("svc", "k"): {1, 2}}),
    "state_nan": lambda c: c.set_state({("svc", "k"): float("nan")}),
    "metadata_deep": lambda c: c.insert([{"text": "x", "metadata": _nested(990)}]),
    "metadata_int_key": lambda c: c.insert([{"text": "x", "metadata": {1: "a"}}]),
    "metadata_nested_empty_key": lambda c: c.insert([{"text": "x", "metadata": {"a": {"": 1}}}]),
    "metadata_nested_big_int": lambda c: c.insert([{"text": "x", "metadata": {"a": {"b": 2**64}}}]),
    "metadata_nested_nul_key": lambda c: c.insert([{"text": "x", "metadata": {"a": {"b\x00": 1}}}]),
    "metadata_nested_nul_value": lambda c: c.insert([{"text": "x", "metadata": {"a": ["b\x00"]}}]),
    "extras_list": lambda c: c.retrieve({"vectors": {"v": vec(1)}, "extras": [1]}, index="exact"),
    "extras_int_key": lambda c: c.retrieve({"vectors": {"v": vec(1)}, "extras": {1: 2}}, index="exact"),
}


@pytest.mark.parametrize("case", sorted(LOW))
def test_low_cases_are_validation_errors_and_change_nothing(memory, case):
    before = snapshot(memory)
    with pytest.raises(ValidationError):
        LOW[case](memory.collection)
    assert snapshot(memory) == before


def test_get_many_with_one_string_is_one_id(memory):
    assert [r.id for r in memory.collection.get_many("r1")] == ["r1"]


def test_yaml_top_level_list_is_a_config_error(tmp_path):
    path = tmp_path / "memcore.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError):
        memcore.load_settings(path)


def _damage(directory, sql, *args):
    db = sqlite3.connect(directory / "store.sqlite3")
    db.execute(sql, args)
    db.commit()
    db.close()


DAMAGE = {
    "metadata_not_json": ("UPDATE records SET metadata='{not json' WHERE id='r1'",),
    "text_bad_utf8": ("UPDATE records SET text=CAST(X'FFFE41' AS TEXT) WHERE id='r1'",),
    "seq_not_a_number": ("UPDATE meta SET value='x' WHERE key='seq'",),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_rows_are_corrupt_errors_naming_the_file(directory, case):
    with memcore.open(settings(), path=directory) as m:
        m.collection.insert([{"id": f"r{i}", "text": f"r{i}", "vectors": {"v": vec(i)}} for i in range(3)])
    _damage(directory, *DAMAGE[case])
    try:
        with memcore.open(settings(), path=directory) as m:
            m.collection.get_many(["r0", "r1", "r2"])
            m.collection.ids(where={"n": 1})
            m.collection.count(where={"n": 1})
    except MemcoreError as exc:
        assert isinstance(exc, CorruptError) and "store.sqlite3" in str(exc)
    else:
        pytest.fail("the damage went unnoticed")


def test_garbage_pages_are_corrupt_errors(directory):
    with memcore.open(settings(), path=directory) as m:
        m.collection.insert([{"id": f"r{i}", "text": "x" * 3000 + str(i), "vectors": {"v": vec(i)}} for i in range(30)])
    path = directory / "store.sqlite3"
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data), 4096):  # every page but the header's: garbage page headers
        data[offset : offset + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptError, match="store.sqlite3"):
        with memcore.open(settings(), path=directory) as m:
            m.collection.get_many(m.collection.ids())
            m.collection.count(where={"n": 1})


def test_integrity_check_reports_damage(directory):
    with memcore.open(settings(), path=directory) as m:
        m.collection.insert([{"id": f"r{i}", "text": "x" * 3000 + str(i), "vectors": {"v": vec(i)}} for i in range(30)])
    store = SQLiteStore(directory, SQLiteStoreConfig(read_only=True))
    assert store.integrity_check() == []
    store.close()
    path = directory / "store.sqlite3"
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data), 4096):  # garbage b-tree page headers after the first page
        data[offset : offset + 64] = b"\x13" * 64
    path.write_bytes(bytes(data))
    try:
        store = SQLiteStore(directory, SQLiteStoreConfig(read_only=True))
    except CorruptError:
        return  # refused at open already: typed, names the file
    try:
        assert store.integrity_check()
    except CorruptError:
        pass  # so damaged that the check itself cannot run: still typed
    finally:
        store.close()


@pytest.mark.parametrize("depth", [40, 990, 100_000])
def test_ingest_of_deeply_nested_metadata_is_a_clean_error(tmp_path, depth):
    from click.testing import CliRunner

    from memcore.cli import main

    data = tmp_path / "items.jsonl"
    data.write_text('{"text": "x", "metadata": ' + '{"k": ' * depth + "1" + "}" * depth + "}\n")
    result = CliRunner().invoke(main, ["ingest", str(data), "--path", str(tmp_path / "mem")])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, (SystemExit, MemcoreError)), repr(result.exception)
    assert "Traceback" not in result.output and "RecursionError" not in result.output
