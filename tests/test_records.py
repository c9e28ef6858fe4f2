"""The data model: Record.create validation, content ids, Link, Scope, Query, Hit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memcore import Contribution, DimensionError, Hit, Link, Query, Record, Scope, ValidationError
from memcore.model._checks import MAX_TEXT_CHARS, as_vector
from memcore.model._record import content_id
from memcore.plugin import validate_k
from memcore.testing import examples

# -- Record.create ---------------------------------------------------------------------


def test_create_fills_fields():
    r = Record.create(
        "hello",
        id="h1",
        metadata={"a": 1, "nested": {"b": [1, 2.5, None, "x"]}},
        vectors={"default": [1, 2, 3]},
        links=["t1", Link("t2", "cites", 0.5), {"target": "t3", "relation": "near"}],
        scope={"user_id": "u"},
    )
    assert r.id == "h1" and r.text == "hello"
    assert r.metadata == {"a": 1, "nested": {"b": [1, 2.5, None, "x"]}}
    assert r.vectors["default"].dtype == np.float32
    np.testing.assert_array_equal(r.vectors["default"], [1, 2, 3])
    assert r.links == (Link("t1", "related", 1.0), Link("t2", "cites", 0.5), Link("t3", "near", 1.0))
    assert all(isinstance(l.weight, float) for l in r.links)
    assert r.scope == Scope(user_id="u")
    assert r.created_at == r.updated_at > 0


def test_duplicate_links_collapse_to_one_edge():
    r = Record.create("x", id="me", links=["t", Link("t", "related", 0.5), {"target": "t", "relation": "cites"}])
    assert r.links == (Link("t", "related", 0.5), Link("t", "cites", 1.0))


def test_create_copies_metadata():
    meta = {"a": [1]}
    r = Record.create("x", metadata=meta)
    meta["a"].append(2)
    assert r.metadata == {"a": [1]}


def test_empty_scope_becomes_none():
    assert Record.create("x", scope={}).scope is None
    assert Record.create("x", scope=Scope()).scope is None
    assert Record.create("x", scope={"user_id": None}).scope is None


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"text": ""}, "empty"),
        ({"text": "   \n\t"}, "empty"),
        ({"text": None}, "must be a string"),
        ({"text": b"bytes"}, "must be a string"),
        ({"text": 3}, "must be a string"),
        ({"text": "x" * (MAX_TEXT_CHARS + 1)}, "limit"),
        ({"text": "a\udc80b"}, "Unicode"),
        ({"id": ""}, "record id"),
        ({"id": 1}, "record id"),
        ({"id": "x" * 513}, "record id"),
        ({"id": "\ud800"}, "Unicode"),
        ({"metadata": [1]}, "must be a dict"),
        ({"metadata": "a=1"}, "must be a dict"),
        ({"metadata": {"a": {1, 2}}}, "JSON-safe"),
        ({"metadata": {"a": math.nan}}, "JSON-safe"),
        ({"metadata": {"a": [math.inf]}}, "JSON-safe"),
        ({"metadata": {"a": object()}}, "JSON-safe"),
        ({"metadata": {"": 1}}, "non-empty strings"),
        ({"metadata": {"a": 2**64}}, "64 bits"),
        ({"metadata": {"a": "\ud800"}}, "Unicode"),
        ({"metadata": {"a": "x\x00"}}, "NUL"),
        ({"vectors": [1, 2]}, "dict"),
        ({"vectors": {"d": [1, math.nan]}}, "NaN"),
        ({"vectors": {"d": [math.inf]}}, "NaN or infinite"),
        ({"vectors": {"d": []}}, "non-empty 1-d"),
        ({"vectors": {"d": [[1, 2]]}}, "1-d"),
        ({"vectors": {"d": "abc"}}, "not numeric"),
        ({"vectors": {"d": [1j, 2]}}, "complex"),
        ({"links": "t1"}, "list of links"),
        ({"links": 5}, "list of links"),
        ({"links": {"target": "t"}}, "list of links"),
        ({"links": [5]}, "a link must be"),
        ({"links": ["me"]}, "itself"),
        ({"links": [{"target": ""}]}, "non-empty"),
        ({"links": [{"target": "t", "relation": ""}]}, "relation"),
        ({"links": [{"target": "t", "weight": math.nan}]}, "finite"),
        ({"links": [{"target": "t", "weight": "1"}]}, "finite"),
        ({"links": [{"target": "t", "colour": "red"}]}, "unknown link fields"),
        ({"scope": {"user": "u"}}, "unknown scope fields"),
        ({"scope": {"user_id": 1}}, "must be a string"),
        ({"scope": "u"}, "Scope or a dict"),
    ],
)
def test_create_rejects(kwargs, error):
    args = {"text": "some text", "id": "me", **kwargs}
    text = args.pop("text")
    with pytest.raises(ValidationError, match=error):
        Record.create(text, **args)


def test_dimension_errors_are_validation_errors():
    with pytest.raises(DimensionError):
        as_vector([[1.0]])
    with pytest.raises(DimensionError, match="expected 3"):
        as_vector([1.0, 2.0], dim=3)
    assert issubclass(DimensionError, ValidationError)
    np.testing.assert_array_equal(as_vector((1, 2), dim=2), np.array([1, 2], dtype=np.float32))


def test_text_at_the_limit_is_accepted():
    assert len(Record.create("y" * MAX_TEXT_CHARS).text) == MAX_TEXT_CHARS


def test_same_content_ignores_vectors_times_and_link_order():
    a = Record.create("t", id="x", metadata={"k": 1}, links=["p", "q"], vectors={"d": [1.0]})
    b = Record.create("t", id="x", metadata={"k": 1}, links=["q", "p"], vectors={"d": [2.0]})
    assert a.same_content(b)
    assert not a.same_content(Record.create("t", id="x", metadata={"k": 2}, links=["p", "q"]))
    assert not a.same_content(Record.create("t", id="x", metadata={"k": 1}, links=["p", "q"], scope={"run_id": "r"}))
    assert not a.same_content(Record.create("t", id="x", metadata={"k": 1}, links=["p"]))
    assert not a.same_content(Record.create("u", id="x", metadata={"k": 1}, links=["p", "q"]))


def test_to_dict_is_json_safe():
    r = Record.create("t", id="x", metadata={"k": [1]}, links=[Link("y", "r", 0.5)], scope={"agent_id": "a"}, vectors={"d": [1.0, 2.0]})
    d = r.to_dict()
    assert d == {
        "id": "x",
        "text": "t",
        "metadata": {"k": [1]},
        "links": [{"target": "y", "relation": "r", "weight": 0.5}],
        "scope": {"agent_id": "a"},
        "created_at": r.created_at,
        "updated_at": r.updated_at,
    }
    json.dumps(d)
    assert r.to_dict(with_vectors=True)["vectors"] == {"d": [1.0, 2.0]}
    assert r.evolve(text="u").text == "u" and r.text == "t"


# -- content ids -----------------------------------------------------------------------


def test_content_ids_are_deterministic():
    a = Record.create("same text", metadata={"b": 2, "a": 1})
    b = Record.create("same text", metadata={"a": 1, "b": 2})
    assert a.id == b.id == content_id("same text", {"a": 1, "b": 2})
    assert len(a.id) == 32 and all(c in "0123456789abcdef" for c in a.id)
    # stable across versions: a stored collection relies on it
    assert content_id("hello") == content_id("hello", {}, None) == content_id("hello", None, Scope())


def test_content_ids_depend_on_text_metadata_and_scope():
    base = Record.create("text")
    assert Record.create("text ").id != base.id
    assert Record.create("Text").id != base.id
    assert Record.create("text", metadata={"a": 1}).id != base.id
    assert Record.create("text", metadata={"a": 1}).id != Record.create("text", metadata={"a": 1.5}).id
    user_a = Record.create("text", scope={"user_id": "a"})
    user_b = Record.create("text", scope={"user_id": "b"})
    agent_a = Record.create("text", scope={"agent_id": "a"})
    assert len({base.id, user_a.id, user_b.id, agent_a.id}) == 4
    assert Record.create("text", scope={"user_id": "a"}).id == user_a.id
    # vectors and links do not change the id
    assert Record.create("text", vectors={"d": [1.0]}).id == base.id


@settings(max_examples=examples(200), deadline=None)
@given(
    text=st.text(min_size=1, max_size=30).filter(lambda t: t.strip()),
    meta=st.dictionaries(
        st.text(min_size=1, max_size=5).filter(lambda t: "\x00" not in t),
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5).filter(lambda t: "\x00" not in t), st.booleans(), st.none()),
        max_size=3,
    ),
    user=st.one_of(st.none(), st.text(max_size=5)),
)
def test_content_id_property(text, meta, user):
    scope = {"user_id": user} if user is not None else None
    r1 = Record.create(text, metadata=meta, scope=scope)
    r2 = Record.create(text, metadata=dict(reversed(list(meta.items()))), scope=scope)
    assert r1.id == r2.id
    other_scope = {"user_id": (user or "") + "x"}
    assert Record.create(text, metadata=meta, scope=other_scope).id != r1.id


# -- Scope and Link --------------------------------------------------------------------


def test_scope_covers():
    q = Scope(user_id="u")
    assert q.covers(Scope(user_id="u", agent_id="a"))
    assert not q.covers(Scope(user_id="v"))
    assert not q.covers(None)
    assert Scope().covers(None) and Scope().covers(Scope(run_id="r"))
    assert Scope(user_id="u", run_id="r").as_dict() == {"user_id": "u", "run_id": "r"}
    assert Scope.coerce(None) is None
    assert Scope.coerce({"agent_id": "a"}) == Scope(agent_id="a")
    with pytest.raises(ValidationError):
        Scope(user_id=5)
    with pytest.raises(ValidationError):
        Scope.coerce(["u"])


# -- Query -----------------------------------------------------------------------------


def test_query_defaults_and_coercion():
    q = Query(text="hi")
    assert (q.k, q.where, q.scope, q.vectors, q.extras) == (10, None, None, {}, {})
    assert Query.coerce("hi", k=3).k == 3
    assert Query.coerce({"text": "hi", "k": 2}, k=5).k == 2
    assert Query.coerce({"text": "hi"}, k=5).k == 5
    same = Query(text="x")
    assert Query.coerce(same) is same
    q = Query(text="x", vectors={"d": [1, 2]}, scope={"user_id": "u"})
    assert q.vectors["d"].dtype == np.float32 and q.scope == Scope(user_id="u")
    assert q.evolve(k=4).k == 4 and q.k == 10


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"k": 0}, "positive integer"),
        ({"k": -2}, "positive integer"),
        ({"k": 2.0}, "positive integer"),
        ({"k": True}, "positive integer"),
        ({"k": "5"}, "positive integer"),
        ({"k": None}, "positive integer"),
        ({"text": 5}, "must be a string"),
        ({"text": "x" * (MAX_TEXT_CHARS + 1)}, "limit"),
        ({"text": "\ud800"}, "Unicode"),
        ({"vectors": {"d": [math.nan]}}, "NaN"),
        ({"vectors": {"d": [[1.0]]}}, "1-d"),
        ({"vectors": [1.0]}, "dict"),
        ({"scope": {"who": "x"}}, "unknown scope fields"),
    ],
)
def test_query_rejects(kwargs, error):
    with pytest.raises(ValidationError, match=error):
        Query(**{"text": "q", **kwargs})
    with pytest.raises(ValidationError, match=error):
        Query.coerce({"text": "q", **kwargs})


def test_query_coerce_rejects_other_types_and_fields():
    with pytest.raises(ValidationError, match="unknown query fields"):
        Query.coerce({"text": "q", "top_k": 5})
    with pytest.raises(ValidationError):
        Query.coerce(5)
    with pytest.raises(ValidationError):
        Query.coerce(None)
    with pytest.raises(ValidationError):
        Query(text="q").evolve(k=0)


def test_validate_k():
    assert validate_k(3) == 3
    assert validate_k(np.int32(2)) == 2
    for bad in (0, -1, 1.0, True, np.float64(2.0), "1", None):
        with pytest.raises(ValidationError):
            validate_k(bad)


# -- Hit -------------------------------------------------------------------------------


def test_hit_explain_and_to_dict():
    h = Hit("r1", 0.0325, raw=0.0325, source="rrf", provenance=(Contribution("dense", 1, 0.91), Contribution("bm25", 3, 12.5)))
    assert h.explain() == "r1: score 0.0325 from rrf <- dense#1 (0.91), bm25#3 (12.5)"
    d = h.to_dict()
    assert d == {
        "id": "r1",
        "score": 0.0325,
        "raw": 0.0325,
        "source": "rrf",
        "provenance": [{"source": "dense", "rank": 1, "score": 0.91}, {"source": "bm25", "rank": 3, "score": 12.5}],
    }
    json.dumps(d)
    h.record = Record.create("the text", id="r1", metadata={"m": 1})
    d = h.to_dict()
    assert d["text"] == "the text" and d["metadata"] == {"m": 1}
    json.dumps(d)


def test_hit_explain_without_provenance_or_source():
    assert Hit("x", 1.0).explain() == "x: score 1 from ?"
    assert Hit("x", -0.5, source="a").explain() == "x: score -0.5 from a"
    assert Hit("x", 1.0).to_dict()["provenance"] == []
