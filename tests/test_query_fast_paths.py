"""The query's fast paths build what the general ones built (issue 14, small memories):
``Query.evolve`` (no ``dataclasses.replace``) and ``Collection.make_query`` of a text with
overrides (one ``Query`` built, not one and a copy)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memcore import Collection, Query, Scope
from memcore.errors import ValidationError


def full_query() -> Query:
    return Query(
        text="apples",
        vectors={"default": np.ones(8, dtype=np.float32)},
        k=7,
        where={"n": {"$gte": 1}},
        scope={"user_id": "u1"},
        extras={"bm25": {"min_score": 0.5}},
    )


def fields(q: Query) -> dict:
    return {f.name: getattr(q, f.name) for f in dataclasses.fields(Query) if f.init}


@pytest.mark.parametrize("change", [{}, {"k": 3}, {"text": "pears"}, {"where": None, "scope": None}, {"extras": {}}])
def test_evolve_equals_dataclasses_replace(change):
    q = full_query()
    got, expected = q.evolve(**change), dataclasses.replace(q, **change)
    assert fields(got).keys() == fields(expected).keys()
    for name, value in fields(expected).items():  # every init field carried over (vectors compared by value)
        if name == "vectors":
            assert got.vectors.keys() == value.keys() and all(np.array_equal(got.vectors[s], v) for s, v in value.items())
        else:
            assert getattr(got, name) == value, name
    assert got.parsed_where() == expected.parsed_where()
    with pytest.raises(TypeError):
        q.evolve(nope=1)
    with pytest.raises(ValidationError):
        q.evolve(k=0)


def test_make_query_of_a_text_with_overrides_equals_coerce_then_evolve():
    with Collection.create(None) as col:
        for kw in [{}, {"k": 4}, {"k": 2, "where": {"n": 1}, "scope": {"user_id": "u"}}]:
            got = col.make_query("apples and pears", **kw)
            expected = Query.coerce("apples and pears").evolve(**kw)
            assert fields(got) == fields(expected)
            assert got.parsed_where() == expected.parsed_where()
        assert col.make_query("x", scope={"user_id": "u"}).scope == Scope(user_id="u")
        for bad in [{"k": 0}, {"k": True}, {"where": {"$bad": 1}}]:
            with pytest.raises(ValidationError):
                col.make_query("apples", **bad)
