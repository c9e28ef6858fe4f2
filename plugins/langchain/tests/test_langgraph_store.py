"""MemcoreStore behaves as LangGraph documents its long-term memory store: each behaviour is
checked on LangGraph's own InMemoryStore (the reference) and on MemcoreStore, which must give
the same results; then what memcore adds (search through the memory's retrieval, scopes)."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import memcore
from memcore import ValidationError
from memcore_langchain import MemcoreStore

HASHING = {"store": {"kind": "memory"}, "spaces": {"default": {"embedder": "hashing"}}}


@pytest.fixture(params=["InMemoryStore", "MemcoreStore"])
def store(request):
    if request.param == "InMemoryStore":
        yield InMemoryStore()
        return
    memcore_store = MemcoreStore(config=HASHING)
    yield memcore_store
    memcore_store.close()


def keys(items):
    return [item.key for item in items]


def test_put_get_overwrite_delete(store: BaseStore):
    store.put(("users", "alice"), "prefs", {"food": "pizza", "n": 1})
    item = store.get(("users", "alice"), "prefs")
    assert (item.namespace, item.key, item.value) == (("users", "alice"), "prefs", {"food": "pizza", "n": 1})
    created = item.created_at
    store.put(("users", "alice"), "prefs", {"food": "sushi"})
    again = store.get(("users", "alice"), "prefs")
    assert again.value == {"food": "sushi"} and again.updated_at >= created
    assert store.get(("users", "bob"), "prefs") is None
    store.delete(("users", "alice"), "prefs")
    assert store.get(("users", "alice"), "prefs") is None
    store.delete(("users", "alice"), "prefs")  # deleting what is gone is fine


def test_search_by_namespace_prefix_with_limit_and_offset(store: BaseStore):
    for i in range(5):
        store.put(("docs", "a"), f"k{i}", {"i": i})
    store.put(("docs", "b"), "other", {"i": 9})
    store.put(("notes",), "n", {"i": 0})
    assert keys(store.search(("docs", "a"), limit=10)) == [f"k{i}" for i in range(5)]
    assert keys(store.search(("docs", "a"), limit=2, offset=1)) == ["k1", "k2"]
    assert set(keys(store.search(("docs",), limit=10))) == {*(f"k{i}" for i in range(5)), "other"}
    assert len(store.search((), limit=100)) == 7
    assert store.search(("nothing",)) == []


def test_filters_exact_operators_and_nested(store: BaseStore):
    store.put(("t",), "a", {"status": "active", "score": 5, "meta": {"lang": "en"}, "tags": ["x", "y"]})
    store.put(("t",), "b", {"status": "active", "score": 2, "meta": {"lang": "fr"}, "tags": ["x"]})
    store.put(("t",), "c", {"status": "done", "score": 4.5})
    assert keys(store.search(("t",), filter={"status": "active"})) == ["a", "b"]
    assert keys(store.search(("t",), filter={"score": {"$gte": 4.5}})) == ["a", "c"]
    assert keys(store.search(("t",), filter={"status": "active", "score": {"$lt": 3}})) == ["b"]
    assert keys(store.search(("t",), filter={"status": {"$ne": "active"}})) == ["c"]
    assert keys(store.search(("t",), filter={"meta": {"lang": "fr"}})) == ["b"]
    assert keys(store.search(("t",), filter={"tags": ["x", "y"]})) == ["a"]


def test_list_namespaces_prefix_suffix_wildcards_depth(store: BaseStore):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x", "c"), ("z", "b", "c")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "x", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "x", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x", "c")]


def test_a_batch_reads_before_its_puts(store: BaseStore):
    store.put(("b",), "k", {"v": 1})
    results = store.batch([PutOp(("b",), "k", {"v": 2}), GetOp(("b",), "k"), SearchOp(("b",))])
    assert results[0] is None and results[1].value == {"v": 1} and [i.value for i in results[2]] == [{"v": 1}]
    assert store.get(("b",), "k").value == {"v": 2}
    store.batch([PutOp(("b",), "k", {"v": 3}), PutOp(("b",), "k", None)])  # the last put of a key wins
    assert store.get(("b",), "k") is None


def test_the_async_methods(store: BaseStore):
    async def main():
        await store.aput(("u",), "k", {"v": "async"})
        assert (await store.aget(("u",), "k")).value == {"v": "async"}
        assert keys(await store.asearch(("u",))) == ["k"]
        assert await store.alist_namespaces() == [("u",)]
        await store.adelete(("u",), "k")
        assert await store.aget(("u",), "k") is None

    asyncio.run(main())


# -- what memcore adds -------------------------------------------------------------------


def test_a_query_searches_through_the_memorys_retrieval():
    store = MemcoreStore(config=HASHING, index={"fields": ["text"]})
    store.put(("alice", "memories"), "1", {"text": "Alice loves hiking in the Alps", "kind": "hobby"})
    store.put(("alice", "memories"), "2", {"text": "Alice works as a nurse", "kind": "job"})
    store.put(("bob", "memories"), "3", {"text": "Bob loves hiking too", "kind": "hobby"})
    found = store.search(("alice",), query="hiking in the Alps", limit=2)
    assert keys(found) == ["1", "2"] and found[0].score >= found[1].score and found[0].score is not None
    assert keys(store.search(("alice",), query="hiking", filter={"kind": "job"})) == ["2"]
    ranked = keys(store.search((), query="hiking", limit=3))
    assert sorted(ranked) == ["1", "2", "3"] and keys(store.search((), query="hiking", limit=1, offset=1)) == ranked[1:2]
    store.close()


def test_scope_fields_make_namespaces_memcore_scopes():
    with memcore.open(HASHING) as memory:
        store = MemcoreStore(memory=memory, scope_fields=("user_id",))
        store.put(("alice", "memories"), "m", {"text": "alice's secret"})
        store.put(("bob", "memories"), "m", {"text": "bob's secret"})
        assert {r.scope.user_id for r in memory.get()} == {"alice", "bob"}
        with memory.collection.scoped({"user_id": "alice"}):
            assert keys(store.search(())) == ["m"] and store.search(())[0].namespace == ("alice", "memories")
            assert store.get(("bob", "memories"), "m") is None
        memory.forget({"user_id": "alice"})
        assert store.get(("alice", "memories"), "m") is None and store.get(("bob", "memories"), "m").value == {"text": "bob's secret"}
        with pytest.raises(ValidationError, match="shorter"):
            MemcoreStore(memory=memory, scope_fields=("user_id", "agent_id")).put(("x",), "k", {"v": 1})


@pytest.mark.parametrize("fields", [("tenant",), ("user_id", "user_id")])
def test_scope_fields_are_checked(fields):
    with memcore.open(HASHING) as memory, pytest.raises(ValidationError, match="scope_fields"):
        MemcoreStore(memory=memory, scope_fields=fields)


def test_items_survive_a_reopen(tmp_path):
    store = MemcoreStore(path=tmp_path / "m", config={"spaces": {"default": {"embedder": "hashing"}}})
    store.put(("a",), "k", {"v": [1, 2, {"x": None}]})
    store.close()
    reopened = MemcoreStore(path=tmp_path / "m", config={"spaces": {"default": {"embedder": "hashing"}}})
    assert reopened.get(("a",), "k").value == {"v": [1, 2, {"x": None}]}
    reopened.close()
