"""The verbs mem0 and Chroma users reach for: ``where_document`` text filters, ``get``
pages, ``retrieve_many`` and ``history`` on :class:`memcore.Memory` (both builtin stores,
scoped and unscoped; bad input is a typed error that changes nothing)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Mapping

import pytest

import memcore
from memcore import Service, hookimpl
from memcore.errors import ConfigError, FilterError, NotFoundError, ValidationError
from memcore.plugin import ComponentConfig, hit_to_dict
from memcore.testing import register_plugin
from memcore.api._memory import MAX_BATCH_QUERIES
from memcore.model._document import MAX_CONTAINS_CHARS
from memcore.model._checks import MAX_TEXT_CHARS
from memcore.stores._memory import MemoryStore
from memcore.stores._store import Store

ZEBRA = 5


@pytest.fixture(params=["sqlite", "memory"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memcore.Memory]:
    if request.param == "sqlite":
        m = memcore.open(path=tmp_path / "m")
    else:
        m = memcore.open(store={"kind": "memory"})
    yield m
    m.close()


def fill(m: memcore.Memory) -> list[str]:
    """30 records: 25 about apples (what the query asks for), 5 mentioning a zebra."""
    items: list[dict[str, Any]] = [{"text": f"apple pie recipe number {i} with apples", "metadata": {"n": i, "kind": "apple"}} for i in range(25)]
    items += [{"text": f"a zebra note {i}", "metadata": {"n": 100 + i, "kind": "zebra"}} for i in range(ZEBRA)]
    return list(m.insert(items))


def snapshot(m: memcore.Memory) -> list[tuple[str, str]]:
    return [(r.id, r.text) for r in m.get()]  # type: ignore[union-attr]


# -- where_document ----------------------------------------------------------------------------


def test_where_document_on_get_count_delete(memory: memcore.Memory) -> None:
    fill(memory)
    assert memory.count(where_document={"$contains": "zebra"}) == ZEBRA
    assert memory.count(where_document={"$not_contains": "zebra"}) == 25
    assert memory.count(where_document={"$and": [{"$contains": "zebra"}, {"$contains": "note 1"}]}) == 1
    assert memory.count(where_document={"$or": [{"$contains": "note 1"}, {"$contains": "number 24"}]}) == 2
    got = memory.get(where={"n": {"$gte": 101}}, where_document={"$not_contains": "note 4"})
    assert [r.metadata["n"] for r in got] == [101, 102, 103]  # type: ignore[union-attr]
    assert memory.delete(where_document={"$contains": "zebra"}) == ZEBRA
    assert memory.count() == 25 and memory.count(where_document={"$contains": "zebra"}) == 0


def test_where_document_on_get_with_ids(memory: memcore.Memory) -> None:
    ids = fill(memory)
    assert memory.get(ids[25], where_document={"$contains": "zebra"}).id == ids[25]  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        memory.get(ids[0], where_document={"$contains": "zebra"})
    assert memory.delete([ids[0], ids[25]], where_document={"$contains": "zebra"}) == 1
    assert memory.count() == 29


def test_retrieve_restricts_candidates_before_k(memory: memcore.Memory) -> None:
    fill(memory)
    # the query ranks every apple record above the zebras: a post-filter of the top 5 would return none
    hits = memory.retrieve("apple pie recipe with apples", k=ZEBRA, where_document={"$contains": "zebra"})
    assert len(hits) == ZEBRA and all("zebra" in h["text"] for h in hits)
    hits = memory.query("apple pie recipe with apples", k=3, where_document={"$contains": "zebra"})
    assert len(hits) == 3 and all("zebra" in h.record.text for h in hits)  # type: ignore[union-attr]
    both = memory.retrieve("apple", k=10, where={"n": {"$lt": 3}}, where_document={"$contains": "number 1"})
    assert [h["metadata"]["n"] for h in both] == [1]
    # the text filter binds for the call only
    assert len(memory.retrieve("apple pie recipe with apples", k=ZEBRA)) == ZEBRA
    assert all("apple" in h["text"] for h in memory.retrieve("apple pie recipe with apples", k=ZEBRA))


@pytest.mark.parametrize(
    "bad",
    [
        {"$contains": ""},
        {"$contains": "x" * (MAX_CONTAINS_CHARS + 1)},
        {"$contains": 3},
        {"$contains": "a\x00b"},
        {"$contains": "\ud800"},
        {"$regex": "a.*"},
        {"$contains": "a", "$not_contains": "b"},
        {},
        {"$and": []},
        {"$or": [{"$contains": "a"}, "b"]},
        "zebra",
        ["$contains", "zebra"],
    ],
    ids=repr,
)
def test_bad_where_document_is_a_filter_error_and_changes_nothing(memory: memcore.Memory, bad: Any) -> None:
    fill(memory)
    before = snapshot(memory)
    for call in (
        lambda: memory.delete(where_document=bad),
        lambda: memory.delete(where={"kind": "zebra"}, where_document=bad),
        lambda: memory.get(where_document=bad),
        lambda: memory.count(where_document=bad),
        lambda: memory.retrieve("apple", where_document=bad),
        lambda: memory.query("apple", where_document=bad),
        lambda: memory.retrieve_many(["apple"], where_document=bad),
    ):
        with pytest.raises(FilterError):
            call()
    assert snapshot(memory) == before


def test_where_document_is_scoped(memory: memcore.Memory) -> None:
    memory.insert([{"text": "alice went to Paris", "scope": {"user_id": "alice"}}, {"text": "bob went to Paris", "scope": {"user_id": "bob"}}])
    paris = {"$contains": "Paris"}
    assert memory.count(where_document=paris) == 2
    assert memory.count(where_document=paris, scope={"user_id": "alice"}) == 1
    assert [r.text for r in memory.get(where_document=paris, scope={"user_id": "bob"})] == ["bob went to Paris"]  # type: ignore[union-attr]
    assert [h["text"] for h in memory.retrieve("went", where_document=paris, scope={"user_id": "alice"})] == ["alice went to Paris"]
    assert memory.delete(where_document=paris, scope={"user_id": "alice"}) == 1
    assert [r.text for r in memory.get()] == ["bob went to Paris"]  # type: ignore[union-attr]


def test_where_document_through_a_service_that_is_not_default(memory: memcore.Memory) -> None:
    """The text filter is bound on the collection for the call: any service's searches see it."""
    fill(memory)
    with memory.collection.text_filtered({"$contains": "zebra"}):
        assert memory.collection.count() == ZEBRA
        hits = memory.collection.retrieve("apple pie recipe with apples", k=3)
        assert len(hits) == 3 and all("zebra" in h.record.text for h in hits)  # type: ignore[union-attr]
        with memory.collection.text_filtered({"$contains": "note 2"}):  # nests: AND
            assert memory.collection.ids() == memory.collection.ids(where={"n": 102})
    assert memory.collection.count() == 30


class OwnIndexConfig(ComponentConfig):
    """Settings of the test service ``own_index``."""

    kind: str = "own_index"


class OwnIndexService(Service):
    """A service that knows nothing of text filters: its own index, its own retrieve."""

    uses_pipeline = False

    @classmethod
    def required_indexes(cls, config: Any) -> dict[str, dict[str, Any]]:
        return {"own.items": {"kind": "exact", "space": "default"}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        return self.collection.insert([{"text": text, "metadata": dict(metadata or {}), **kwargs}], indexes=["own.items"])[0]

    def insert_many(self, items: list[Any]) -> list[str]:
        return self.collection.insert(items, indexes=["own.items"])

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        self.reject_unknown("retrieve", kwargs)
        return [hit_to_dict(h) for h in self.collection.retrieve(self.make_query(query, vector, where, k), index="own.items", k=k)]


def test_where_document_reaches_a_service_of_a_plugin(tmp_path: Path) -> None:
    """``Memory.retrieve(where_document=...)`` works through a service that never heard of it."""

    @hookimpl
    def register_services(register: Any) -> None:
        register("own_index", OwnIndexService, OwnIndexConfig)

    with register_plugin(SimpleNamespace(register_services=register_services), name="verbs-own-index"):
        with memcore.open(path=tmp_path / "m", service={"kind": "own_index"}) as m:
            fill(m)
            hits = m.retrieve("apple pie recipe with apples", k=3, where_document={"$contains": "zebra"})
            assert len(hits) == 3 and all("zebra" in h["text"] for h in hits)
            many = m.retrieve_many(["apple pie recipe with apples", "zebra"], k=2, where_document={"$not_contains": "zebra"})
            assert [len(hits) for hits in many] == [2, 2] and all("zebra" not in h["text"] for hits in many for h in hits)


# -- get pages ---------------------------------------------------------------------------------


def test_get_pages_are_stable_and_complete(memory: memcore.Memory) -> None:
    ids = fill(memory)
    memory.update(ids[3], text="apple pie changed")  # an update keeps the record's place
    pages = [memory.get(offset=start, limit=7) for start in range(0, 42, 7)]
    assert [r.id for page in pages for r in page] == ids  # type: ignore[union-attr]
    assert pages[-1] == []
    assert [r.id for r in memory.get(where={"kind": "zebra"}, offset=2, limit=2)] == ids[27:29]  # type: ignore[union-attr]
    assert [r.id for r in memory.get(ids[:5], offset=1, limit=2)] == ids[1:3]  # type: ignore[union-attr]
    assert memory.get(limit=0) == []


def test_get_pages_are_scoped(memory: memcore.Memory) -> None:
    ids = memory.insert([{"text": f"t{i}", "scope": {"user_id": "alice" if i % 2 else "bob"}} for i in range(10)])
    page = memory.get(scope={"user_id": "alice"}, offset=1, limit=2)
    assert [r.id for r in page] == [ids[3], ids[5]]  # type: ignore[union-attr]


@pytest.mark.parametrize("offset, limit", [(-1, None), (0, -1), ("1", None), (0, 1.5), (True, None), (0, True)])
def test_bad_page_is_a_validation_error(memory: memcore.Memory, offset: Any, limit: Any) -> None:
    fill(memory)
    with pytest.raises(ValidationError):
        memory.get(offset=offset, limit=limit)


# -- retrieve_many ------------------------------------------------------------------------------


def test_retrieve_many_is_a_loop_of_retrieve_in_one_embedder_batch(memory: memcore.Memory) -> None:
    fill(memory)
    queries = ["zebra note", "apple pie number 7", "zebra note", "recipe"]
    alone = [memory.retrieve(q, k=4, where={"n": {"$ne": 3}}) for q in queries]
    space = memory.collection.spaces["default"]
    calls: list[int] = []
    embed = space.embed_queries

    def counting(texts: Any) -> Any:
        calls.append(len(texts))
        return embed(texts)

    space.embed_queries = counting  # type: ignore[method-assign]
    try:
        many = memory.retrieve_many(queries, k=4, where={"n": {"$ne": 3}})
    finally:
        del space.embed_queries
    # the same ids, texts and metadata; the scores to float32 rounding (the batch's index search
    # is one matrix product, the loop's one matrix-vector product per query)
    assert [[{**r, "score": None} for r in hits] for hits in many] == [[{**r, "score": None} for r in hits] for hits in alone]
    assert [[r["score"] for r in hits] for hits in many] == [pytest.approx([r["score"] for r in hits], rel=1e-6) for hits in alone]
    assert calls == [3]  # one batch of the distinct texts
    zebras = memory.retrieve_many(["apple pie recipe with apples"], k=2, where_document={"$contains": "zebra"})
    assert [len(hits) for hits in zebras] == [2] and all("zebra" in h["text"] for h in zebras[0])


def test_retrieve_many_is_scoped(memory: memcore.Memory) -> None:
    memory.insert([{"text": "alice likes tea", "scope": {"user_id": "alice"}}, {"text": "bob likes tea", "scope": {"user_id": "bob"}}])
    results = memory.retrieve_many(["tea", "likes"], k=5, scope={"user_id": "bob"})
    assert [[h["text"] for h in hits] for hits in results] == [["bob likes tea"], ["bob likes tea"]]


@pytest.mark.parametrize(
    "queries",
    [[], "one text", ["ok", 3], ["ok", "  "], ["ok", "x" * (MAX_TEXT_CHARS + 1)], ["ok", "\ud800"], ["ok"] * (MAX_BATCH_QUERIES + 1), None],
    ids=["empty", "a-string", "not-text", "blank", "too-long", "surrogate", "too-many", "none"],
)
def test_retrieve_many_checks_before_any_work(memory: memcore.Memory, queries: Any) -> None:
    fill(memory)
    called: list[Any] = []
    original = memory.service.retrieve
    memory.service.retrieve = lambda *a, **kw: called.append(a) or original(*a, **kw)  # type: ignore[method-assign]
    with pytest.raises(ValidationError):
        memory.retrieve_many(queries)
    for bad in ({"k": 0}, {"where": {"$bad": 1}}, {"where_document": {"$contains": ""}}, {"scope": {"team": "x"}}, {"scope": 3}):
        with pytest.raises(ValidationError):
            memory.retrieve_many(["ok"], **bad)
    assert called == []


# -- history ------------------------------------------------------------------------------------


def test_history_of_every_verb(memory: memcore.Memory) -> None:
    rid = memory.insert("first", metadata={"v": 1})
    memory.update(rid, text="second")
    memory.update(rid, metadata={"v": 3}, merge_metadata=True)
    memory.upsert({"id": rid, "text": "third", "metadata": {"v": 3}})
    memory.upsert({"id": rid, "text": "third", "metadata": {"v": 3}})  # the same content: no new version
    assert [(v["op"], v["text"], v["metadata"]) for v in memory.history(rid)] == [
        ("insert", "first", {"v": 1}),
        ("update", "second", {"v": 1}),
        ("update", "second", {"v": 3}),
        ("update", "third", {"v": 3}),
    ]
    memory.delete(rid)
    versions = memory.history(rid)  # a deleted record's texts and metadata are erased, its versions stay
    assert [(v["op"], v["text"], v["metadata"]) for v in versions] == [("insert", None, None)] + [("update", None, None)] * 3 + [("delete", None, None)]
    seqs = [v["seq"] for v in versions]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(v["id"] == rid and isinstance(v["at"], float) for v in versions)
    new = memory.upsert({"id": "fresh", "text": "new by upsert"})
    assert [v["op"] for v in memory.history(new)] == ["insert"]  # type: ignore[arg-type]


def test_history_is_scoped(memory: memcore.Memory) -> None:
    rid = memory.insert("alice's secret", scope={"user_id": "alice"})
    assert [v["op"] for v in memory.history(rid, scope={"user_id": "alice"})] == ["insert"]
    assert memory.history(rid, scope={"user_id": "alice"})[0]["scope"] == {"user_id": "alice"}
    with pytest.raises(NotFoundError) as other:
        memory.history(rid, scope={"user_id": "bob"})
    with pytest.raises(NotFoundError) as unknown:
        memory.history("no-such-id", scope={"user_id": "bob"})
    assert str(other.value).replace(rid, "ID") == str(unknown.value).replace("no-such-id", "ID")
    with pytest.raises(NotFoundError):
        memory.history("no-such-id")
    for bad in ("", 3, None):
        with pytest.raises(ValidationError):
            memory.history(bad)  # type: ignore[arg-type]


def test_forgetting_a_scope_leaves_no_history(memory: memcore.Memory) -> None:
    gone = memory.insert("bob's deleted note", scope={"user_id": "bob"})
    memory.delete(gone)
    kept = memory.insert("bob's note", scope={"user_id": "bob"})
    other = memory.insert("alice's note", scope={"user_id": "alice"})
    memory.forget({"user_id": "bob"})
    for rid in (gone, kept):
        with pytest.raises(NotFoundError):
            memory.history(rid)
    assert [v["op"] for v in memory.history(other)] == ["insert"]


def test_forgotten_history_leaves_no_text_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "m"
    with memcore.open(path=path) as m:
        rid = m.insert("bob-secret-text-1", scope={"user_id": "bob"})
        m.update(rid, text="bob-secret-text-2")
        m.forget({"user_id": "bob"})
    for file in path.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert b"bob-secret-text" not in data, file


def test_history_survives_reopen_and_log_pruning(tmp_path: Path) -> None:
    path = tmp_path / "m"
    with memcore.open(path=path) as m:
        rid = m.insert("one")
        m.update(rid, text="two")
        m.collection.flush()  # indexes saved: the index op log is pruned
        m.collection.store.prune_log(m.collection.store.last_seq())
    with memcore.open(path=path) as m:
        assert [v["text"] for v in m.history(rid)] == ["one", "two"]


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_history_can_be_turned_off(tmp_path: Path, kind: str) -> None:
    with memcore.open(path=tmp_path / "m", store={"kind": kind, "history": False}) as m:
        rid = m.insert("one")
        m.update(rid, text="two")
        with pytest.raises(ConfigError, match="keeps no record history"):
            m.history(rid)
        assert m.get(rid).text == "two"  # type: ignore[union-attr]


def test_a_store_without_history_says_so() -> None:
    class NoHistory(MemoryStore):
        keeps_history = False
        history = Store.history

    with pytest.raises(ConfigError, match="keeps no record history"):
        NoHistory().history("x")
