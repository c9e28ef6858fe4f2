"""One test module, two memories: ``memcore.Memory`` in process and ``RemoteMemory`` over HTTP.

Every test runs against both (the ``mem`` fixture is parametrised): the same methods,
arguments, return types and errors.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import memcore
from memcore import DimensionError, DuplicateIdError, FilterError, Hit, NotFoundError, Record, Scope, ValidationError
from memcore_server import RemoteMemory


@pytest.fixture(params=["local", "remote"])
def mem(request: pytest.FixtureRequest, memory: memcore.Memory, served: Any) -> Iterator[Any]:
    if request.param == "local":
        yield memory
        return
    server = served(memory)
    with RemoteMemory(server.url, retries=0) as remote:
        yield remote


@pytest.fixture
def dim(memory: memcore.Memory) -> int:
    return int(memory.collection.spaces["default"].dim)


def test_insert_one_text_returns_its_id(mem: Any) -> None:
    rid = mem.insert("the cat sat on the mat", metadata={"topic": "cats"})
    assert isinstance(rid, str)
    record = mem.get(rid)
    assert isinstance(record, Record) and record.text == "the cat sat on the mat" and record.metadata == {"topic": "cats"}
    assert record.scope is None and record.created_at > 0


def test_insert_with_options_vector_and_scope(mem: Any, dim: int) -> None:
    vector = np.linspace(0.1, 1.0, dim).astype(np.float32)
    rid = mem.insert("with a vector", vector=vector, id="v1", scope={"user_id": "u"})
    assert rid == "v1"
    record = mem.get("v1")
    assert record.scope == Scope(user_id="u")
    assert np.allclose(record.vectors["default"], vector / np.linalg.norm(vector)) or np.allclose(record.vectors["default"], vector)


def test_insert_a_dict_a_record_and_many(mem: Any) -> None:
    assert mem.insert({"text": "from a dict", "id": "d1", "metadata": {"n": 1}}) == "d1"
    assert mem.insert(Record.create("from a record", id="r1", metadata={"n": 2})) == "r1"
    ids = mem.insert(["plain text", {"text": "dict in a list", "id": "d2"}, Record.create("record in a list", id="r2")])
    assert isinstance(ids, list) and len(ids) == 3 and ids[1:] == ["d2", "r2"]
    with pytest.raises(ValidationError, match="empty"):
        mem.insert([])
    assert mem.count() == 5 and len(mem) == 5


def test_insert_errors(mem: Any) -> None:
    mem.insert("x", id="x")
    with pytest.raises(DuplicateIdError):
        mem.insert("different", id="x")
    with pytest.raises(ValidationError):
        mem.insert("   ")
    with pytest.raises(ValidationError, match="twice"):
        mem.insert({"text": "t", "metadata": {}}, metadata={"a": 1})
    with pytest.raises(ValidationError):
        mem.insert(["a", "b"], metadata={"a": 1})
    with pytest.raises(ValidationError):
        mem.insert(Record.create("r"), metadata={"a": 1})
    with pytest.raises(ValidationError):
        mem.insert({"id": "no text"})
    with pytest.raises(ValidationError):
        mem.insert("t", colour="red")
    with pytest.raises(DimensionError):
        mem.insert("bad vector", vector=[1.0, 2.0])
    assert mem.count() == 1


def test_get_by_ids_where_scope_and_limit(mem: Any) -> None:
    mem.insert([{"text": f"memory {i}", "id": f"m{i}", "metadata": {"even": i % 2 == 0}, "scope": {"user_id": "u" if i < 3 else "w"}} for i in range(5)])
    records = mem.get(["m3", "m0"])
    assert [r.id for r in records] == ["m3", "m0"]
    assert [r.id for r in mem.get(where={"even": True})] == ["m0", "m2", "m4"]
    assert [r.id for r in mem.get(scope={"user_id": "w"})] == ["m3", "m4"]
    assert [r.id for r in mem.get(where={"even": True}, scope={"user_id": "u"})] == ["m0", "m2"]
    assert [r.id for r in mem.get(limit=2)] == ["m0", "m1"]
    assert mem.get(limit=0) == []
    with pytest.raises(NotFoundError):
        mem.get("missing")
    with pytest.raises(NotFoundError):
        mem.get(["m0", "missing"])
    with pytest.raises(NotFoundError):
        mem.get("m3", scope={"user_id": "u"})
    with pytest.raises(NotFoundError):
        mem.get(["m1"], where={"even": True})
    with pytest.raises(ValidationError):
        mem.get(limit=-1)
    with pytest.raises(FilterError):
        mem.get(where={"even": {"$bogus": 1}})


def test_update_and_merge_metadata(mem: Any) -> None:
    mem.insert("old text", id="u1", metadata={"a": 1})
    updated = mem.update("u1", text="new text", metadata={"b": 2}, merge_metadata=True)
    assert isinstance(updated, Record) and updated.text == "new text" and updated.metadata == {"a": 1, "b": 2}
    assert mem.update("u1", metadata={"c": 3}).metadata == {"c": 3}
    assert mem.get("u1").text == "new text"
    with pytest.raises(NotFoundError):
        mem.update("missing", text="x")
    mem.insert("scoped", id="s1", scope={"user_id": "u"})
    with pytest.raises(NotFoundError):
        mem.update("s1", text="y", scope={"user_id": "w"})


def test_upsert_single_and_many(mem: Any) -> None:
    assert mem.upsert({"text": "first", "id": "p1"}) == "p1"
    assert mem.upsert([{"text": "changed", "id": "p1"}, {"text": "second", "id": "p2"}]) == ["p1", "p2"]
    assert mem.get("p1").text == "changed" and mem.count() == 2
    assert mem.upsert("a plain text") == mem.upsert("a plain text")
    mem.insert("owned by u", id="o1", scope={"user_id": "u"})
    with pytest.raises(NotFoundError):
        mem.upsert({"text": "taken", "id": "o1"}, scope={"user_id": "w"})
    assert mem.get("o1").text == "owned by u"


def test_delete_by_ids_where_and_scope(mem: Any) -> None:
    mem.insert([{"text": f"memory {i}", "id": f"m{i}", "metadata": {"i": i}, "scope": {"user_id": "u" if i < 4 else "w"}} for i in range(6)])
    assert mem.delete("m0") == 1
    assert mem.delete(["m1", "m2"]) == 2
    with pytest.raises(NotFoundError):
        mem.delete(["m3", "missing"])
    assert mem.count() == 3
    assert mem.delete(["m3"], where={"i": 99}) == 0
    assert mem.delete(where={"i": 3}) == 1
    with pytest.raises(NotFoundError):
        mem.delete("m4", scope={"user_id": "u"})
    assert mem.delete(scope={"user_id": "w"}) == 2
    assert mem.count() == 0
    with pytest.raises(ValidationError):
        mem.delete()


def test_forget_a_scope(mem: Any) -> None:
    mem.insert([{"text": "bob's", "scope": {"user_id": "bob"}}, {"text": "ann's", "scope": {"user_id": "ann"}}])
    gone = mem.forget({"user_id": "bob"})
    assert gone["records"] == 1 and mem.count() == 1
    with pytest.raises(ValidationError):
        mem.forget({})
    with pytest.raises(ValidationError):
        mem.forget(None)


def test_count_where_scope_and_index(mem: Any) -> None:
    mem.insert([{"text": f"t{i}", "metadata": {"odd": bool(i % 2)}, "scope": {"user_id": "u"} if i else None} for i in range(4)])
    assert mem.count() == 4
    assert mem.count(where={"odd": True}) == 2
    assert mem.count(scope={"user_id": "u"}) == 3
    assert mem.count(index="vector") == 4
    with pytest.raises(NotFoundError):
        mem.count(index="missing")


def test_retrieve_by_text_vector_where_and_scope(mem: Any, dim: int) -> None:
    mem.insert(
        [
            {"text": "the cat sat on the mat", "id": "cat", "metadata": {"topic": "cats"}},
            {"text": "dogs bark at the moon", "id": "dog", "metadata": {"topic": "dogs"}, "scope": {"user_id": "u"}},
        ]
    )
    results = mem.retrieve("a cat on the mat", k=2)
    assert isinstance(results, list) and results[0]["id"] == "cat"
    assert set(results[0]) >= {"id", "text", "score", "metadata"} and isinstance(results[0]["score"], float)
    assert [r["id"] for r in mem.retrieve("cat", where={"topic": "dogs"})] == ["dog"]
    assert [r["id"] for r in mem.retrieve("cat", scope={"user_id": "u"})] == ["dog"]
    stored = mem.get("dog", scope={"user_id": "u"}).vectors["default"]
    assert mem.retrieve(vector=stored, k=1)[0]["id"] == "dog"
    with pytest.raises(ValidationError):
        mem.retrieve()
    with pytest.raises(ValidationError):
        mem.retrieve("cat", k=0)
    with pytest.raises(ValidationError):
        mem.retrieve("cat", colour="red")


def test_query_returns_hits_with_provenance(mem: Any) -> None:
    mem.insert([{"text": "the cat sat on the mat", "id": "cat"}, {"text": "dogs bark", "id": "dog", "scope": {"user_id": "u"}}])
    hits = mem.query("cat on a mat", k=2)
    assert all(isinstance(h, Hit) for h in hits) and hits[0].id == "cat"
    assert hits[0].provenance and hits[0].provenance[0].source
    assert hits[0].explain().startswith("cat: score")
    assert [h.id for h in mem.query("cat", k=5, scope={"user_id": "u"})] == ["dog"]
    assert [h.id for h in mem.query("cat", k=5, index="vector", where={"missing": 1})] == []
    with pytest.raises(NotFoundError):
        mem.query("cat", index="missing")


def test_query_hits_equal_in_process(mem: Any, memory: memcore.Memory) -> None:
    mem.insert([f"memory number {i} about topic {i % 3}" for i in range(20)])

    def plain(hits: list[Hit]) -> list[tuple[Any, ...]]:  # the attached records, vectors aside
        return [(h.id, h.score, h.raw, h.source, h.provenance, h.record and h.record.to_dict()) for h in hits]

    assert plain(mem.query("topic 1", k=5)) == plain(memory.query("topic 1", k=5))
    assert plain(mem.query("topic", k=3, index="vector")) == plain(memory.query("topic", k=3, index="vector"))
    assert mem.retrieve("topic 2", k=5) == memory.retrieve("topic 2", k=5)
    assert [r.to_dict(with_vectors=True) for r in mem.get(limit=3)] == [r.to_dict(with_vectors=True) for r in memory.get(limit=3)]


def test_history_of_a_record(mem: Any) -> None:
    mem.insert("first text", id="h1", metadata={"v": 1}, scope={"user_id": "u"})
    mem.update("h1", text="second text", metadata={"v": 2})
    versions = mem.history("h1")
    assert [v["op"] for v in versions] == ["insert", "update"]
    assert [v["text"] for v in versions] == ["first text", "second text"] and versions[1]["metadata"] == {"v": 2}
    assert set(versions[0]) == {"id", "seq", "op", "text", "metadata", "scope", "at"}
    assert versions[0]["id"] == "h1" and versions[0]["scope"] == {"user_id": "u"} and isinstance(versions[0]["at"], float)
    assert versions[0]["seq"] < versions[1]["seq"]
    assert mem.history("h1", scope={"user_id": "u"}) == versions
    mem.delete("h1")
    after = mem.history("h1")
    assert [v["op"] for v in after] == ["insert", "update", "delete"] and after[0]["text"] is None
    with pytest.raises(NotFoundError):
        mem.history("missing")
    mem.insert("kept", id="h2", scope={"user_id": "u"})
    with pytest.raises(NotFoundError):
        mem.history("h2", scope={"user_id": "w"})


def test_get_pages_with_offset_and_limit(mem: Any) -> None:
    mem.insert([{"text": f"memory {i}", "id": f"m{i}", "metadata": {"even": i % 2 == 0}} for i in range(7)])
    pages = [[r.id for r in mem.get(offset=offset, limit=3)] for offset in (0, 3, 6, 9)]
    assert pages == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"], []]
    assert [r.id for r in mem.get(where={"even": True}, offset=1, limit=2)] == ["m2", "m4"]
    assert [r.id for r in mem.get(["m5", "m1", "m3"], offset=1)] == ["m1", "m3"]
    assert [r.id for r in mem.get(offset=5)] == ["m5", "m6"]
    with pytest.raises(ValidationError):
        mem.get(offset=-1)


def test_where_document_on_get_count_delete_retrieve_and_query(mem: Any) -> None:
    mem.insert(
        [
            {"text": "the cat sat on the mat", "id": "cat", "metadata": {"pet": True}},
            {"text": "a cat chased the dog", "id": "chase", "metadata": {"pet": True}},
            {"text": "dogs bark at the moon", "id": "dog", "metadata": {"pet": False}},
        ]
    )
    cats = {"$contains": "cat"}
    assert [r.id for r in mem.get(where_document=cats)] == ["cat", "chase"]
    assert [r.id for r in mem.get(where_document={"$not_contains": "cat"})] == ["dog"]
    assert [r.id for r in mem.get(where_document={"$and": [cats, {"$contains": "dog"}]})] == ["chase"]
    assert mem.count(where_document=cats) == 2 and mem.count(where_document=cats, where={"pet": False}) == 0
    assert {r["id"] for r in mem.retrieve("cat", k=10, where_document={"$contains": "moon"})} == {"dog"}
    assert {h.id for h in mem.query("cat", k=10, where_document={"$contains": "moon"})} == {"dog"}
    with pytest.raises(NotFoundError):
        mem.get(["dog"], where_document=cats)
    with pytest.raises(FilterError):
        mem.get(where_document={"$bogus": "x"})
    with pytest.raises(FilterError):
        mem.count(where_document={"$contains": 3})
    assert mem.delete(where_document={"$contains": "mat"}) == 1
    assert mem.count() == 2


def test_min_score_on_retrieve_and_query(mem: Any) -> None:
    mem.insert([f"memory number {i} about topic {i % 3}" for i in range(10)])
    everything = mem.retrieve("topic 1", k=10)
    cut = everything[3]["score"]
    kept = mem.retrieve("topic 1", k=10, min_score=cut)
    assert kept and all(r["score"] >= cut for r in kept) and kept == [r for r in everything if r["score"] >= cut]
    assert mem.retrieve("topic 1", k=10, min_score=1e9) == []
    hits = mem.query("topic 1", k=10)
    assert [h.id for h in mem.query("topic 1", k=10, min_score=hits[2].score)] == [h.id for h in hits if h.score >= hits[2].score]
    for bad in (float("nan"), float("inf"), True, "high"):
        with pytest.raises(ValidationError):
            mem.retrieve("topic", min_score=bad)
        with pytest.raises(ValidationError):
            mem.query("topic", min_score=bad)


def assert_same_results(many: list[list[dict[str, Any]]], alone: list[list[dict[str, Any]]]) -> None:
    """The same ids, texts and metadata in the same order; the scores to float32 rounding (a
    batch's index search is one matrix product, a loop's one matrix-vector product per query)."""
    assert [[{**r, "score": None} for r in hits] for hits in many] == [[{**r, "score": None} for r in hits] for hits in alone]
    assert [[r["score"] for r in hits] for hits in many] == [pytest.approx([r["score"] for r in hits], rel=1e-6) for hits in alone]


def test_retrieve_many_of_vectors_is_a_loop_of_retrieve(mem: Any, dim: int) -> None:
    rng = np.random.default_rng(2)
    mem.insert([{"text": f"note {i}", "id": f"n{i}", "vectors": {"default": rng.normal(size=dim).astype(np.float32)}} for i in range(20)])
    queries = rng.normal(size=(4, dim)).astype(np.float32)
    assert_same_results(mem.retrieve_many(vectors=queries, k=5), [mem.retrieve(vector=q, k=5) for q in queries])
    texts = ["note 1", "note 2", "note 3", "note 4"]
    assert_same_results(mem.retrieve_many(texts, vectors=queries, k=3), [mem.retrieve(t, vector=q, k=3) for t, q in zip(texts, queries)])
    for bad in ({"vectors": []}, {"vectors": queries[:, :3]}, {"queries": texts[:2], "vectors": queries}):
        with pytest.raises(ValidationError):
            mem.retrieve_many(**bad)


def test_retrieve_many_is_a_loop_of_retrieve(mem: Any) -> None:
    mem.insert(
        [
            {"text": "the cat sat on the mat", "id": "cat", "metadata": {"topic": "cats"}},
            {"text": "dogs bark at the moon", "id": "dog", "metadata": {"topic": "dogs"}, "scope": {"user_id": "u"}},
            {"text": "fish swim in the sea", "id": "fish", "metadata": {"topic": "fish"}},
        ]
    )
    queries = ["a cat on the mat", "barking dogs", "the sea"]
    answers = mem.retrieve_many(queries, k=2)
    assert isinstance(answers, list) and len(answers) == 3
    assert_same_results(answers, [mem.retrieve(q, k=2) for q in queries])
    assert [a[0]["id"] for a in answers] == ["cat", "dog", "fish"]
    assert_same_results(mem.retrieve_many(queries, k=3, where={"topic": "fish"}), [mem.retrieve(q, k=3, where={"topic": "fish"}) for q in queries])
    assert [[r["id"] for r in a] for a in mem.retrieve_many(queries, scope={"user_id": "u"})] == [["dog"]] * 3
    assert [[r["id"] for r in a] for a in mem.retrieve_many(queries, where_document={"$contains": "moon"})] == [["dog"]] * 3
    cut = answers[0][0]["score"]
    assert_same_results(mem.retrieve_many(queries[:1], k=2, min_score=cut), [[r for r in answers[0] if r["score"] >= cut]])
    for bad in ([], "one text", ["ok", "  "], ["ok", 3]):
        with pytest.raises(ValidationError):
            mem.retrieve_many(bad)
    with pytest.raises(ValidationError):
        mem.retrieve_many(queries, k=0)
    with pytest.raises(ValidationError):
        mem.retrieve_many(queries, min_score=float("nan"))
    with pytest.raises(FilterError):
        mem.retrieve_many(queries, where={"topic": {"$bogus": 1}})
    with pytest.raises(ValidationError):
        mem.retrieve_many(queries, colour="red")
