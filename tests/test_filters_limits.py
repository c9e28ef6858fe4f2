"""Large and deep filters: big ``$in`` lists and many fields work in every store; nesting,
size and list-length limits raise :class:`FilterError` (never a SQLite or Python error)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memcore import Collection, FilterError, Record
from memcore.cli import main
from memcore.model._filters import MAX_CONDITIONS, MAX_DEPTH, MAX_IN_VALUES
from memcore.plugin import matches, parse_filter
from memcore.plugin import WriteBatch
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore

N = 1500


def nested(op: str, depth: int, alternate: bool = False) -> dict:
    where: dict = {"a": {"$gte": 0}}
    for level in range(depth):
        this = ("$and" if level % 2 else "$or") if alternate else op
        where = {this: [where, {"b": {"$ne": level % 7}}]}
    return where


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path)
    records = [Record.create(f"t{i}", id=f"r{i}", metadata={"a": i, "b": i % 7, "s": f"v{i % 50}", "t": i % 2 == 0}) for i in range(N)]
    s.apply(WriteBatch(upserts=records))
    yield s, {r.id: r.metadata for r in records}
    s.close()


def expected(meta: dict, where: dict) -> list[str]:
    node = parse_filter(where)
    return [rid for rid, m in meta.items() if matches(node, m)]


@pytest.mark.parametrize(
    "where",
    [
        {"a": {"$in": list(range(997))}},
        {"a": {"$in": list(range(0, 3 * N, 3)) + [2.5, "r1", True, float("inf")]}},
        {"s": {"$in": [f"v{i}" for i in range(0, 5000, 2)] + ["a\x00b"]}},
        {"s": {"$nin": [f"v{i}" for i in range(0, 5000, 3)]}, "t": {"$in": [True, 0, 1]}},
        {"a": {"$in": list(range(MAX_IN_VALUES))}},
        {f"f{i}": {"$ne": i} for i in range(997)},
        {"$and": [{"a": {"$gte": i}} for i in range(MAX_CONDITIONS)]},
        {"$or": [{"a": i} for i in range(MAX_CONDITIONS)]},
        nested("$or", MAX_DEPTH),
        nested("$and", MAX_DEPTH),
        nested("$or", MAX_DEPTH, alternate=True),
    ],
    ids=["in-997", "in-mixed-kinds", "in-strings", "nin-and-bools", "in-max", "997-fields", "and-max", "or-max", "or-deep", "and-deep", "alternating-deep"],
)
def test_large_and_deep_filters_work_and_agree(store, where):
    s, meta = store
    node = parse_filter(where)
    want = expected(meta, where)
    assert s.ids(where=node) == want
    assert s.count(where=node) == len(want)


@pytest.mark.parametrize(
    "where, message",
    [
        (nested("$or", 100), "nested too deep"),
        (nested("$and", 2000), "nested too deep"),
        (nested("$or", MAX_DEPTH + 1, alternate=True), "nested too deep"),
        ({f"f{i}": i for i in range(MAX_CONDITIONS + 1)}, "too large"),
        ({"$or": [{"a": {"$gt": i, "$lt": i + 5}} for i in range(MAX_CONDITIONS // 2 + 1)]}, "too large"),
        ({"a": {"$in": list(range(MAX_IN_VALUES + 1))}}, "at most"),
        ({"a": {"$nin": ["x"] * (MAX_IN_VALUES + 1)}}, "at most"),
    ],
    ids=["or-100", "and-2000", "alternating", "fields", "or-of-ranges", "in", "nin"],
)
def test_limits_raise_filter_error(where, message):
    with pytest.raises(FilterError, match=message):
        parse_filter(where)


def test_collection_filters_past_the_limits_are_typed(tmp_path):
    col = Collection.create(tmp_path / "c")
    col.create_index("vec", "exact")
    col.insert([{"text": f"doc {i}", "metadata": {"a": i}} for i in range(20)])
    assert len(col.retrieve("doc", k=50, where={"a": {"$in": list(range(0, 2000, 2))}})) == 10
    for where in (nested("$and", 2000), nested("$or", 100)):
        with pytest.raises(FilterError):
            col.retrieve("doc", where=where)
        with pytest.raises(FilterError):
            col.ids(where=where)
    assert col.count() == 20
    col.close()


def test_cli_never_prints_a_traceback_for_huge_filters(tmp_path):
    runner = CliRunner()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"r{i}", "text": f"note {i}", "metadata": {"n": i}}) + "\n" for i in range(5)))
    env = {"MEMCORE_LOG": None, "MEMCORE_LOG_LEVEL": None}
    assert runner.invoke(main, ["ingest", "--path", str(tmp_path / "mem"), str(rows)], env=env).exit_code == 0
    big_in = json.dumps({"n": {"$in": list(range(997))}})
    ok = runner.invoke(main, ["query", "-p", str(tmp_path / "mem"), "-w", big_in, "--json", "note"], env=env)
    assert ok.exit_code == 0, ok.output
    assert len(json.loads(ok.stdout)) == 5
    deep = ['{"$and": [' * depth + '{"n": 1}' + "]}" * depth for depth in (100, 2000, 5000)]
    for text in [json.dumps(nested("$or", 100)), *deep]:
        result = runner.invoke(main, ["query", "-p", str(tmp_path / "mem"), "-w", text, "note"], env=env)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and "Error:" in result.stderr and ("nested too" in result.stderr)
