"""The everyday API on ``memcore.Memory``: insert / get / update / upsert / delete / count.

Unknown keyword arguments are errors on every method (never silently dropped). Every test
runs twice: on ``Memory`` and on ``AsyncMemory`` (driven through a synchronous face), which
must behave the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcore import NotFoundError, Record, ValidationError

SETTINGS = {"store": {"kind": "memory"}}


@pytest.fixture
def memory(open_memory):
    return open_memory(SETTINGS)


def test_insert_one_or_many_returns_ids(memory):
    one = memory.insert("Alice works at the bakery", metadata={"speaker": "Alice"})
    assert isinstance(one, str)
    many = memory.insert(
        ["Bob likes tea", {"text": "Carol plays chess", "id": "carol", "metadata": {"speaker": "Carol"}}, Record.create("Dan swims", id="dan")]
    )
    assert isinstance(many, list) and len(many) == 3 and many[1:] == ["carol", "dan"]
    assert memory.count() == 4 and len(memory) == 4
    assert memory.insert({"text": "Eve runs", "id": "eve"}, metadata={"speaker": "Eve"}) == "eve"
    assert memory.get("eve").metadata == {"speaker": "Eve"}


def test_insert_with_a_vector_and_a_scope(memory):
    vector = np.ones(memory.collection.spaces["default"].dim, dtype=np.float32)
    rid = memory.insert("with my own vector", vector=vector, scope={"user_id": "u1"})
    record = memory.get(rid)
    np.testing.assert_array_equal(record.vectors["default"], vector)
    assert record.scope.user_id == "u1"


def test_get_by_id_ids_and_where(memory):
    ids = memory.insert([{"text": f"turn {i}", "metadata": {"turn": i}} for i in range(5)])
    assert memory.get(ids[2]).text == "turn 2"
    assert [r.text for r in memory.get([ids[3], ids[0]])] == ["turn 3", "turn 0"]
    assert [r.metadata["turn"] for r in memory.get(where={"turn": {"$gte": 3}})] == [3, 4]
    assert len(memory.get(where={"turn": {"$gte": 1}}, limit=2)) == 2
    with pytest.raises(NotFoundError, match="nope"):
        memory.get("nope")
    with pytest.raises(NotFoundError):
        memory.get([ids[0], "nope"])
    with pytest.raises(NotFoundError, match="matching this where"):
        memory.get([ids[0]], where={"turn": 4})


def test_update_and_upsert(memory):
    rid = memory.insert("Alice works at the bakery", metadata={"speaker": "Alice"})
    updated = memory.update(rid, metadata={"mood": "happy"}, merge_metadata=True)
    assert updated.metadata == {"speaker": "Alice", "mood": "happy"}
    assert memory.update(rid, text="Alice works at the library").text == "Alice works at the library"
    assert memory.query("library", k=1)[0].id == rid
    with pytest.raises(NotFoundError):
        memory.update("missing", text="x")
    assert memory.upsert({"id": rid, "text": "Alice retired"}) == rid
    assert memory.get(rid).text == "Alice retired"
    assert memory.upsert([{"id": "new", "text": "brand new"}]) == ["new"]
    assert memory.count() == 2


def test_delete_by_ids_where_and_scope(memory):
    memory.insert([{"text": f"turn {i}", "id": f"t{i}", "metadata": {"turn": i}, "scope": {"user_id": "u1" if i < 4 else "u2"}} for i in range(6)])
    assert memory.delete("t0") == 1
    assert memory.delete(where={"turn": {"$gte": 2}}, scope={"user_id": "u1"}) == 2  # t2, t3 (u2's t4, t5 untouched)
    assert sorted(r.id for r in memory.get(where={})) == ["t1", "t4", "t5"]
    with pytest.raises(NotFoundError):
        memory.delete(["t4"], scope={"user_id": "u1"})  # another scope's record: nothing deleted
    assert memory.count() == 3
    assert memory.delete(scope={"user_id": "u2"}) == 2
    with pytest.raises(ValidationError, match="needs ids, a where filter or a scope"):
        memory.delete()
    assert memory.count() == 1
    assert memory.count(where={"turn": 1}) == 1


def test_unknown_keyword_arguments_are_errors(memory):
    memory.insert("Alice works at the bakery")
    with pytest.raises(ValidationError, match=r"unknown keyword argument\(s\) \['metdata'\]"):
        memory.insert("x", metdata={"a": 1})
    with pytest.raises(ValidationError, match=r"unknown keyword argument\(s\) \['wher'\]"):
        memory.retrieve("Alice", wher={"a": 1})
    for call in (
        lambda: memory.get("a", filter={}),
        lambda: memory.count(wher={}),
        lambda: memory.delete("a", filter={}),
        lambda: memory.update("a", txt="x"),
        lambda: memory.upsert("x", indexes=[]),
        lambda: memory.query("x", kk=3),
    ):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            call()
    assert memory.count() == 1  # nothing was written by the failed calls


def test_many_items_refuse_shared_arguments(memory):
    with pytest.raises(ValidationError, match="give each its own"):
        memory.insert(["a", "b"], metadata={"x": 1})
    with pytest.raises(ValidationError, match="given twice"):
        memory.insert({"text": "a", "metadata": {"x": 1}}, metadata={"x": 2})
    with pytest.raises(ValidationError, match="not a int"):
        memory.insert(5)
    assert memory.count() == 0
