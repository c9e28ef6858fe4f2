"""The core's filter suite (tests/test_filters.py: the same documents, filters and
hypothesis strategies) against the postgres store: SQL over jsonb gives exactly what the
core's Python evaluation gives."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from memcore import Record
from memcore.plugin import WriteBatch, matches, parse_filter
from memcore.testing import examples

CORE_SUITE = Path(__file__).resolve().parents[3] / "tests" / "test_filters.py"
if not CORE_SUITE.is_file():
    pytest.skip("the core's tests/test_filters.py is not beside this plugin", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("core_filter_suite", CORE_SUITE)
assert _spec is not None and _spec.loader is not None
core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(core)


def store_ids(store: Any, docs: list[dict[str, Any]], where: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """Write ``docs`` afresh (every other one in index ``ix``) and read the ids ``where`` matches."""
    records = [Record.create(f"doc {i}", id=f"d{i}", metadata=m) for i, m in enumerate(docs)]
    store.apply(WriteBatch(deletes=store.ids()))
    store.apply(WriteBatch(upserts=records, add_membership={"ix": [r.id for r in records[::2]]}))
    node = parse_filter(where)
    return [int(i[1:]) for i in store.ids(where=node)], [int(i[1:]) for i in store.ids(where=node, index="ix")], store.count(where=node)


def expected(docs: list[dict[str, Any]], where: dict[str, Any]) -> list[int]:
    node = parse_filter(where)
    return [i for i, m in enumerate(docs) if matches(node, m)]


SEMANTICS = core.test_semantics.pytestmark[0].args[1]


@pytest.mark.parametrize("where, want", SEMANTICS, ids=[str(w) for w, _ in SEMANTICS])
def test_semantics(pg_store: Any, where: dict[str, Any], want: list[int]) -> None:
    got, in_index, count = store_ids(pg_store, core.DOCS, where)
    assert got == want == expected(core.DOCS, where)
    assert in_index == [i for i in want if i % 2 == 0]
    assert count == len(want)


def test_edge_values_agree(pg_store: Any) -> None:
    """The core's regressions: 64-bit bounds against floats, NUL in filter texts, -0.0."""
    docs = core.EDGE_DOCS
    wheres = [
        *core.EDGE_WHERES,
        {"a": {"$gt": 4611686018427388928.0}},
        {"a": {"$lt": float("inf")}},
        {"a": {"$gt": float("-inf")}},
        {"a": {"$in": [2.0**63, 2**53 + 1, "a b"]}},
    ]
    for where in wheres:
        assert store_ids(pg_store, docs, where)[0] == expected(docs, where), where


def test_int_and_float_compare_exactly_above_2_53(pg_store: Any) -> None:
    """An integer between a large float's exact value and its shortest repr compares as in Python."""
    f = 2.0**62 + 1024  # exact 4611686018427388928, repr 4.611686018427389e+18
    docs = [{"a": 4611686018427388950}, {"a": f}, {"a": 4611686018427388900}]
    for where in ({"a": {"$gt": f}}, {"a": {"$lt": f}}, {"a": f}, {"a": {"$gte": 4611686018427388950}}, {"a": {"$lt": 4611686018427388950}}):
        assert store_ids(pg_store, docs, where)[0] == expected(docs, where), where
    assert pg_store.get(["d1"])[0].metadata == {"a": f}  # read back as the float written


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=core.st.lists(core.metadata, min_size=1, max_size=6), where=core.filters)
def test_store_agrees_with_python(pg_store: Any, docs: list[dict[str, Any]], where: dict[str, Any]) -> None:
    want = expected(docs, where)
    got, in_index, count = store_ids(pg_store, docs, where)
    assert got == want
    assert in_index == [i for i in want if i % 2 == 0]
    assert count == len(want)
