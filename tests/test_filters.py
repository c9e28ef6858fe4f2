"""Metadata filters: parsing, and Python evaluation == SQLite compilation.

Every store must give the same answer for the same ``where``; the in-memory store
evaluates in Python (:func:`memcore.model._filters.matches`), SQLite runs the compiled SQL
(:func:`memcore.model._filters.to_sql`). Hypothesis generates metadata and filters and checks
both agree, with the raw SQL and through the two real stores.
"""

from __future__ import annotations

import json
import math
import sqlite3
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memcore import FilterError, Record
from memcore.model._filters import BoolNode, Cond, to_sql
from memcore.plugin import matches, parse_filter
from memcore.plugin import WriteBatch
from memcore.stores._memory import MemoryStore
from memcore.stores._sqlite import SQLiteStore
from memcore.testing import examples

# -- parsing ---------------------------------------------------------------------------


def test_parse_shapes():
    assert parse_filter(None) is None
    assert parse_filter({}) is None
    assert parse_filter({"a": 1}) == Cond("a", "$eq", 1)
    assert parse_filter({"a": {"$eq": 1}}) == Cond("a", "$eq", 1)
    assert parse_filter({"a": None}) == Cond("a", "$eq", None)
    assert parse_filter({"a": {"$in": [1, "x"]}}) == Cond("a", "$in", (1, "x"))
    assert parse_filter({"a": 1, "b": 2}) == BoolNode("$and", (Cond("a", "$eq", 1), Cond("b", "$eq", 2)))
    assert parse_filter({"a": {"$gt": 1, "$lt": 5}}) == BoolNode("$and", (Cond("a", "$gt", 1), Cond("a", "$lt", 5)))
    assert parse_filter({"$or": [{"a": 1}, {"b": {"$ne": "x"}}]}) == BoolNode("$or", (Cond("a", "$eq", 1), Cond("b", "$ne", "x")))
    assert parse_filter({"$and": [{"a": 1}], "b-c": 2}) == BoolNode("$and", (BoolNode("$and", (Cond("a", "$eq", 1),)), Cond("b-c", "$eq", 2)))
    assert parse_filter({"_x": {"$nin": ()}}) == Cond("_x", "$nin", ())


@pytest.mark.parametrize(
    "where, message",
    [
        ([{"a": 1}], "must be a dict"),
        ("a = 1", "must be a dict"),
        ({"a": {"$regex": "x"}}, "unknown operator '\\$regex'"),
        ({"a": {"$exists": True}}, "unknown operator"),
        ({"a": {"eq": 1}}, "unknown operator"),
        ({"$xor": [{"a": 1}]}, "unknown logical operator '\\$xor'"),
        ({"$not": {"a": 1}}, "unknown logical operator"),
        ({"$and": {"a": 1}}, "non-empty list"),
        ({"$and": []}, "non-empty list"),
        ({"$or": "a"}, "non-empty list"),
        ({"$and": [{}]}, "non-empty filters"),
        ({"$or": [{"a": 1}, {}]}, "non-empty filters"),
        ({"$and": [1]}, "must be a dict"),
        ({"a": {}}, "empty operator dict"),
        ({"a.b": 1}, "bad field name"),
        ({"a b": 1}, "bad field name"),
        ({"9a": 1}, "bad field name"),
        ({"": 1}, "bad field name"),
        ({"a'": 1}, "bad field name"),
        ({3: 1}, "bad field name"),
        ({"a": [1, 2]}, "\\$eq takes"),
        ({"a": {"$ne": {"x": 1}}}, "\\$ne takes"),
        ({"a": {"$gt": True}}, "\\$gt takes a number or a string"),
        ({"a": {"$lte": None}}, "\\$lte takes"),
        ({"a": {"$gte": [1]}}, "\\$gte takes"),
        ({"a": {"$in": "ab"}}, "\\$in takes a list"),
        ({"a": {"$nin": [None]}}, "\\$nin takes a list"),
        ({"a": {"$in": [[1]]}}, "\\$in takes a list"),
        ({"a": math.nan}, "NaN"),
        ({"a": {"$lt": math.nan}}, "NaN"),
        ({"a": {"$in": [1, math.nan]}}, "NaN"),
        ({"a": 2**63}, "64 bits"),
        ({"a": {"$nin": [-(2**63) - 1]}}, "64 bits"),
        ({"a": "\ud800"}, "Unicode"),
    ],
)
def test_parse_errors(where, message):
    with pytest.raises(FilterError, match=message):
        parse_filter(where)


def test_parse_errors_inside_nested_filters():
    with pytest.raises(FilterError, match="unknown operator"):
        parse_filter({"$or": [{"a": 1}, {"$and": [{"b": {"$like": "x"}}]}]})


def test_64_bit_bounds_are_accepted():
    assert parse_filter({"a": 2**63 - 1}).value == 2**63 - 1
    assert parse_filter({"a": {"$gt": -(2**63)}}).value == -(2**63)


EDGE_DOCS = [{"a": 2**63 - 1}, {"a": 2**53 + 1}, {"a": 2.0**63}, {"a": -(2**63)}, {"a": "a"}, {"a": "a b"}, {"a": -0.0}, {"a": 0}]
"""Documents at the edges of the value types: 64-bit bounds, floats past 2**53, -0.0, spaces (a
store's filter compiler is run on them too: plugins/postgres)."""
EDGE_WHERES = [
    {"a": 2.0**63},
    {"a": {"$lt": 2.0**63}},
    {"a": {"$gte": 2.0**63}},
    {"a": 2**53 + 1},
    {"a": {"$gt": 2.0**53}},
    {"a": {"$gt": 2**63 - 1}},
    {"a": {"$lte": -(2.0**63)}},
    {"a": "a\x00"},
    {"a": {"$gt": "a\x00"}},
    {"a": {"$lt": "a\x00b"}},
    {"a": 0.0},
    {"a": -0.0},
    {"a": {"$lt": 0}},
    {"a": {"$in": [0, "a"]}},
]
"""Filters over :data:`EDGE_DOCS` that once disagreed with Python somewhere."""


def test_edge_values_agree():
    """Regressions: 64-bit bounds against floats, NUL in filter texts, -0.0."""
    docs = EDGE_DOCS
    for where in EDGE_WHERES:
        node = parse_filter(where)
        assert sql_matches(node, docs) == [i for i, m in enumerate(docs) if matches(node, m)], where


def test_metadata_text_with_nul_is_rejected():
    from memcore import ValidationError

    with pytest.raises(ValidationError, match="NUL"):
        Record.create("x", metadata={"a": "a\x00b"})
    # nested values are held to the same rule as top-level ones (issue 13: one rule at every depth)
    with pytest.raises(ValidationError, match="NUL"):
        Record.create("x", metadata={"a": ["a\x00b"]})


def test_to_sql_of_nothing():
    assert to_sql(None) == ("1", [])


# -- semantics, spot checks ------------------------------------------------------------

DOCS = [
    {"s": "Alice", "n": 1, "b": True},
    {"s": "Bob", "n": 2.5, "b": False},
    {"s": "alice", "n": "3", "b": 1},
    {"n": None, "b": None},
    {"s": ["Alice"], "n": {"x": 1}},
    {},
]


@pytest.mark.parametrize(
    "where, expected",
    [
        ({"s": "Alice"}, [0]),
        ({"s": {"$ne": "Alice"}}, [1, 2, 3, 4, 5]),
        ({"n": 1.0}, [0]),
        ({"n": {"$gt": 1}}, [1]),
        ({"n": {"$gte": "3"}}, [2]),
        ({"n": {"$lt": 2.5}}, [0]),
        ({"n": None}, [3]),
        ({"n": {"$ne": None}}, [0, 1, 2, 4, 5]),
        ({"b": True}, [0]),
        ({"b": 1}, [2]),
        ({"b": {"$in": [True, False]}}, [0, 1]),
        ({"b": {"$nin": [True]}}, [1, 2, 3, 4, 5]),
        ({"s": {"$in": []}}, []),
        ({"s": {"$nin": []}}, [0, 1, 2, 3, 4, 5]),
        ({"$or": [{"s": "Bob"}, {"n": 1}]}, [0, 1]),
        ({"$and": [{"b": {"$ne": True}}, {"s": {"$gt": "A"}}]}, [1, 2]),
    ],
)
def test_semantics(where, expected):
    node = parse_filter(where)
    assert [i for i, m in enumerate(DOCS) if matches(node, m)] == expected
    assert sql_matches(node, DOCS) == expected


def sql_matches(node, docs) -> list[int]:
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE t (i INTEGER PRIMARY KEY, metadata TEXT NOT NULL)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [(i, json.dumps(m)) for i, m in enumerate(docs)])
        sql, params = to_sql(node, "metadata")
        return [row[0] for row in db.execute(f"SELECT i FROM t WHERE {sql} ORDER BY i", params)]
    finally:
        db.close()


# -- hypothesis: Python == SQL ---------------------------------------------------------

FIELDS = ["a", "b", "c-d", "_e"]
ALPHABET = st.sampled_from(["a", "b", "B", "z", "é", "ß", "中", "\U0001f600", " ", "0", "\x00", "\x7f", '"', "\\", "'"])
texts = st.text(ALPHABET, max_size=4)
ints = st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, -1.5, 1e300, 2.0**62, 2.0**63]), st.floats(allow_nan=False, allow_infinity=False))
numbers = st.one_of(ints, floats)
scalars = st.one_of(texts, numbers, st.booleans())
# stored texts never hold NUL, at any depth: Record.create rejects it (SQLite's JSON functions stop at NUL)
top_texts = texts.filter(lambda t: "\x00" not in t)
stored_scalars = st.one_of(top_texts, numbers, st.booleans())
nested = st.one_of(
    st.lists(st.one_of(st.none(), stored_scalars), max_size=2),
    st.dictionaries(st.sampled_from(FIELDS), st.one_of(st.none(), stored_scalars), max_size=2),
)
metadata = st.dictionaries(st.sampled_from(FIELDS), st.one_of(st.none(), top_texts, numbers, st.booleans(), nested), max_size=4)

filter_floats = st.one_of(floats, st.sampled_from([math.inf, -math.inf]))


def conditions():
    eq_value = st.one_of(st.none(), texts, ints, filter_floats, st.booleans())
    cmp_value = st.one_of(texts, ints, filter_floats)
    list_value = st.lists(st.one_of(texts, ints, floats, st.booleans()), max_size=3)
    op = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne"]), eq_value),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), cmp_value),
        st.tuples(st.sampled_from(["$in", "$nin"]), list_value),
    )
    bare = st.builds(lambda f, v: {f: v}, st.sampled_from(FIELDS), eq_value)
    ops = st.builds(lambda f, pairs: {f: dict(pairs)}, st.sampled_from(FIELDS), st.lists(op, min_size=1, max_size=2))
    multi = st.dictionaries(
        st.sampled_from(FIELDS),
        st.one_of(eq_value, st.dictionaries(st.sampled_from(["$gt", "$lte", "$ne"]), cmp_value, min_size=1, max_size=2)),
        min_size=2,
        max_size=3,
    )
    return st.one_of(bare, ops, multi)


filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=6,
)


@settings(max_examples=examples(400), deadline=None)
@given(docs=st.lists(metadata, min_size=1, max_size=8), where=filters)
def test_python_evaluation_equals_sqlite(docs, where):
    node = parse_filter(where)
    expected = [i for i, m in enumerate(docs) if matches(node, m)]
    assert sql_matches(node, docs) == expected


@pytest.fixture(scope="module")
def stores():
    """One MemoryStore and one SQLiteStore; each example writes its records afresh."""
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_store = SQLiteStore(tmp)
        yield MemoryStore(), sqlite_store
        sqlite_store.close()


@settings(max_examples=examples(150), deadline=None)
@given(docs=st.lists(metadata, min_size=1, max_size=6), where=filters)
def test_both_stores_agree_with_python(stores, docs, where):
    records = [Record.create(f"doc {i}", id=f"d{i}", metadata=m) for i, m in enumerate(docs)]
    node = parse_filter(where)
    expected = [r.id for r in records if matches(node, r.metadata)]
    for store in stores:
        store.apply(WriteBatch(deletes=store.ids()))
        store.apply(WriteBatch(upserts=records, add_membership={"ix": [r.id for r in records[::2]]}))
        assert store.ids(where=node) == expected
        assert store.count(where=node) == len(expected)
        assert store.ids(where=node, index="ix") == [i for i in expected if int(i[1:]) % 2 == 0]
