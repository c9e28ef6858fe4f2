"""Every Collection operation, on the in-memory and the SQLite store.

Two exact indexes make the multi-index behaviour visible: ``a`` (cosine on the default
256-d hashing space) and ``b`` (L2 on a second, 64-d hashing space ``small``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memcore import (
    Collection,
    ConfigError,
    DuplicateIdError,
    FilterError,
    Hit,
    Link,
    NotFoundError,
    Query,
    Record,
    Scope,
    UnknownComponentError,
    ValidationError,
)
from memcore.plugin import matches, parse_filter
from memcore.testing import fused

TEXTS = [
    "the cat sat on the mat",
    "a dog barked at the mailman",
    "quantum computers use qubits",
    "the stock market fell sharply today",
    "fresh bread from the bakery smells great",
    "the cat chased a mouse in the kitchen",
]


@pytest.fixture(params=["memory", "sqlite"])
def make(request, tmp_path, make_spaces):
    """A factory of empty collections (both spaces, no index) on the parametrized store."""
    opened: list[Collection] = []

    def factory(*, indexes: bool = True) -> Collection:
        path = None if request.param == "memory" else tmp_path / f"c{len(opened)}"
        coll = Collection.create(path, spaces=make_spaces())
        opened.append(coll)
        if indexes:
            coll.create_index("a", "exact")
            coll.create_index("b", "exact", space="small", metric="l2")
        return coll

    factory.kind = request.param
    yield factory
    for coll in opened:
        coll.close()


@pytest.fixture
def coll(make) -> Collection:
    return make()


def ids_of(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


def snapshot(c: Collection) -> tuple:
    """Everything observable about the data: records, memberships and the log position."""
    ids = c.ids()
    records = [(r.id, r.text, r.metadata, r.scope, tuple(r.links)) for r in c.get_many(ids)]
    members = {i["name"]: c.ids(index=i["name"]) for i in c.list_indexes()}
    return records, members, c.store.last_seq()


# -- indexes ---------------------------------------------------------------------------


def test_create_list_and_drop_index(make):
    c = make(indexes=False)
    assert c.list_indexes() == []
    c.create_index("a", "exact")
    c.create_index("b", "exact", space="small", metric="l2")
    listed = {i["name"]: i for i in c.list_indexes()}
    assert set(listed) == {"a", "b"}
    assert listed["a"]["kind"] == "exact"
    assert listed["a"]["config"]["metric"] == "cosine"
    assert listed["b"]["config"] == {"kind": "exact", "space": "small", "metric": "l2"}
    assert listed["a"]["requires"]["spaces"] == ["default"]
    assert listed["b"]["requires"]["spaces"] == ["small"]
    assert listed["a"]["size"] == 0
    assert c.has_index("a") and not c.has_index("zzz")

    c.insert(TEXTS)
    assert {i["name"]: i["size"] for i in c.list_indexes()} == {"a": len(TEXTS), "b": len(TEXTS)}

    c.drop_index("b")
    assert [i["name"] for i in c.list_indexes()] == ["a"]
    assert c.count() == len(TEXTS)  # records stay
    with pytest.raises(NotFoundError):
        c.count(index="b")
    with pytest.raises(NotFoundError):
        c.drop_index("b")
    # re-created under the same name, it starts empty
    c.create_index("b", "exact", space="small")
    assert c.count(index="b") == 0
    assert c.retrieve("cat", index="b") == []


def test_create_index_exist_ok_semantics(make):
    c = make(indexes=False)
    c.create_index("a", "exact", metric="ip")
    with pytest.raises(ConfigError, match="already exists"):
        c.create_index("a", "exact", metric="ip")
    c.create_index("a", "exact", exist_ok=True, metric="ip")  # same definition: fine
    with pytest.raises(ConfigError, match="already exists"):
        c.create_index("a", "exact", exist_ok=True, metric="l2")  # other options
    with pytest.raises(ConfigError, match="already exists"):
        c.create_index("a", "exact", exist_ok=True, metric="ip", space="small")
    assert [(i["name"], i["config"]["metric"]) for i in c.list_indexes()] == [("a", "ip")]


def test_create_index_rejects_bad_definitions(make):
    c = make(indexes=False)
    for bad in ("", "has space", "a/b", "x" * 200, "-leading"):
        with pytest.raises(ValidationError):
            c.create_index(bad, "exact")
    with pytest.raises(UnknownComponentError):
        c.create_index("a", "exactt")
    with pytest.raises(ConfigError, match="indexes.a.metric"):
        c.create_index("a", "exact", metric="hamming")
    with pytest.raises(ConfigError, match="not declared"):
        c.create_index("a", "exact", space="nope")
    assert c.list_indexes() == []


def test_create_index_populate(make):
    c = make(indexes=False)
    c.create_index("a", "exact")
    ids = c.insert(TEXTS)
    c.create_index("b", "exact", space="small", populate=True)
    assert c.ids(index="b") == ids
    assert ids_of(c.retrieve(TEXTS[2], index="b", k=1)) == [ids[2]]


# -- insert ----------------------------------------------------------------------------


def test_insert_strings_dicts_and_records(coll):
    ids = coll.insert(
        [
            "plain string",
            {"text": "from a dict", "metadata": {"n": 1}, "id": "d1"},
            Record.create("from a record", id="r1", metadata={"n": 2}),
        ]
    )
    assert ids[1:] == ["d1", "r1"]
    assert coll.count() == 3
    assert coll.ids() == ids  # insertion order
    assert coll.get(ids[0]).text == "plain string"
    assert coll.get("d1").metadata == {"n": 1}
    assert coll.get("r1").text == "from a record"
    # a single item is accepted too
    (one,) = coll.insert("a single string")
    assert coll.get(one).text == "a single string"
    assert coll.count(index="a") == coll.count(index="b") == 4


def test_insert_rejects_unknown_dict_fields_and_types(coll):
    before = snapshot(coll)
    with pytest.raises(ValidationError):
        coll.insert([{"text": "x", "colour": "red"}])
    with pytest.raises(ValidationError):
        coll.insert([{"metadata": {}}])
    with pytest.raises(ValidationError):
        coll.insert([42])
    with pytest.raises(ValidationError):
        coll.insert([])
    assert snapshot(coll) == before


def test_insert_identical_content_without_id_is_idempotent(coll):
    first = coll.insert(["same text", {"text": "meta", "metadata": {"x": 1}}])
    before = snapshot(coll)
    second = coll.insert(["same text", {"text": "meta", "metadata": {"x": 1}}])
    assert first == second
    assert snapshot(coll) == before  # nothing written, not even a log entry
    assert coll.count() == 2
    assert coll.count(index="a") == 2
    # different metadata or scope -> a different content id
    (other,) = coll.insert([{"text": "meta", "metadata": {"x": 2}}])
    (scoped,) = coll.insert(["same text"], scope={"user_id": "u"})
    assert len({first[0], first[1], other, scoped}) == 4
    assert coll.count() == 4


def test_reinsert_adds_membership_only(coll):
    (rid,) = coll.insert(["only in a"], indexes="a")
    assert coll.ids(index="b") == []
    assert coll.insert(["only in a"], indexes=["b"]) == [rid]
    assert coll.ids(index="a") == [rid]
    assert coll.ids(index="b") == [rid]
    assert ids_of(coll.retrieve("only in a", index="b", k=1)) == [rid]
    assert coll.count() == 1


def test_duplicate_explicit_id_with_different_content(coll):
    coll.insert([{"id": "x", "text": "original"}])
    before = snapshot(coll)
    with pytest.raises(DuplicateIdError):
        coll.insert([{"id": "x", "text": "changed"}])
    with pytest.raises(DuplicateIdError):
        coll.insert([{"id": "x", "text": "original", "metadata": {"k": 1}}])
    with pytest.raises(DuplicateIdError):  # a batch with a good record is all-or-nothing
        coll.insert([{"id": "fresh", "text": "new"}, {"id": "x", "text": "changed"}])
    assert snapshot(coll) == before
    # identical content under the same id is fine
    assert coll.insert([{"id": "x", "text": "original"}]) == ["x"]
    assert coll.get("x").text == "original"


def test_insert_to_chosen_indexes(coll):
    a_only = coll.insert(["alpha one", "alpha two"], indexes="a")
    b_only = coll.insert(["beta one"], indexes=["b"])
    none = coll.insert(["nowhere"], indexes=[])
    both = coll.insert(["everywhere"])
    assert coll.ids(index="a") == a_only + both
    assert coll.ids(index="b") == b_only + both
    assert coll.count() == 5
    assert none[0] in coll.ids()
    assert coll.count(index="a") == 3 and coll.count(index="b") == 2
    # unknown index name: nothing written
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.insert(["x"], indexes=["a", "nope"])
    assert snapshot(coll) == before
    # a record outside an index never comes back from it
    assert none[0] not in ids_of(coll.retrieve("nowhere", index="a", k=10))


def test_insert_with_vectors_and_vector_queries(coll):
    rng = np.random.default_rng(0)
    vec = rng.normal(size=256).astype(np.float32)
    coll.insert(TEXTS, indexes="a")
    (rid,) = coll.insert([{"id": "v", "text": "given vector", "vectors": {"default": vec}}], indexes="a")
    stored = coll.get(rid).vectors["default"]
    np.testing.assert_array_equal(stored, vec)
    hits = coll.retrieve(Query(vectors={"default": vec}, k=1), index="a")
    assert ids_of(hits) == ["v"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    # the small space is filled when the record joins an index on it
    coll.insert_to_index("b", "v")
    assert coll.get("v").vectors["small"].shape == (64,)


def test_insert_scope_argument(coll):
    ids = coll.insert(["scoped one", Record.create("own scope", scope={"user_id": "bob"})], scope={"user_id": "alice"})
    assert coll.get(ids[0]).scope == Scope(user_id="alice")
    assert coll.get(ids[1]).scope == Scope(user_id="bob")  # a record's own scope wins
    assert coll.count(scope={"user_id": "alice"}) == 1


# -- insert_to_index / remove_from_index -----------------------------------------------


def test_insert_to_index(coll):
    ids = coll.insert(TEXTS, indexes="a")
    coll.insert_to_index("b", ids[:2])
    assert coll.ids(index="b") == ids[:2]
    coll.insert_to_index("b", [ids[1], ids[2]])  # an existing member is left alone
    assert coll.ids(index="b") == ids[:3]
    assert ids_of(coll.retrieve(TEXTS[2], index="b", k=1)) == [ids[2]]
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.insert_to_index("b", [ids[3], "missing"])
    with pytest.raises(NotFoundError):
        coll.insert_to_index("nope", ids[3])
    assert snapshot(coll) == before


def test_remove_from_index_keeps_record(coll):
    ids = coll.insert(TEXTS)
    coll.remove_from_index("a", ids[0])
    assert coll.get(ids[0]).text == TEXTS[0]
    assert coll.count() == len(TEXTS)
    assert ids[0] not in coll.ids(index="a")
    assert ids[0] in coll.ids(index="b")
    assert ids[0] not in ids_of(coll.retrieve(TEXTS[0], index="a", k=len(TEXTS)))
    assert ids_of(coll.retrieve(TEXTS[0], index="b", k=1)) == [ids[0]]
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.remove_from_index("a", ids[0])  # no longer a member
    with pytest.raises(NotFoundError):
        coll.remove_from_index("a", [ids[1], ids[0]])  # one bad id: nothing removed
    with pytest.raises(NotFoundError):
        coll.remove_from_index("a", "unknown")
    with pytest.raises(NotFoundError):
        coll.remove_from_index("nope", ids[1])
    assert snapshot(coll) == before
    assert ids[1] in coll.ids(index="a")


# -- delete ----------------------------------------------------------------------------


def test_delete_removes_from_every_index_and_links(coll):
    ids = coll.insert(TEXTS)
    coll.link(ids[1], ids[0], "mentions")
    coll.link(ids[0], ids[2])
    coll.link(ids[3], ids[2])
    assert coll.delete(ids[0]) == 1
    assert coll.get_many([ids[0]]) == [None]
    with pytest.raises(NotFoundError):
        coll.get(ids[0])
    for name in ("a", "b"):
        assert ids[0] not in coll.ids(index=name)
        assert ids[0] not in ids_of(coll.retrieve(TEXTS[0], index=name, k=len(TEXTS)))
    assert coll.get(ids[1]).links == ()  # incoming link gone
    assert coll.get(ids[3]).links == (Link(ids[2], "related", 1.0),)  # unrelated link kept
    # deleting a record that others link to drops those links too; the linking record stays
    assert coll.delete([ids[2]]) == 1
    assert coll.get(ids[3]).links == ()
    assert coll.count() == len(TEXTS) - 2
    # the linking records are still searchable
    assert ids_of(coll.retrieve(TEXTS[3], index="a", k=1)) == [ids[3]]


def test_delete_unknown_ids_deletes_nothing(coll):
    ids = coll.insert(TEXTS)
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.delete([ids[0], "missing"])
    with pytest.raises(NotFoundError):
        coll.delete("missing")
    assert snapshot(coll) == before
    assert coll.delete([]) == 0
    assert coll.delete([ids[0], ids[0]]) == 1  # repeated ids count once


def test_scoped_delete_never_touches_another_scope(coll):
    (alice,) = coll.insert(["shared words here"], scope={"user_id": "alice"})
    (bob,) = coll.insert(["shared words here"], scope={"user_id": "bob"})
    (nobody,) = coll.insert(["unscoped record"])
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.delete([bob], scope={"user_id": "alice"})
    with pytest.raises(NotFoundError):
        coll.delete([alice, bob], scope={"user_id": "alice"})
    with pytest.raises(NotFoundError):
        coll.delete([nobody], scope={"user_id": "alice"})
    assert snapshot(coll) == before
    assert coll.delete([alice], scope={"user_id": "alice"}) == 1
    assert coll.ids() == [bob, nobody]
    assert coll.delete([bob], scope=Scope(user_id="bob", agent_id=None)) == 1


# -- update / upsert -------------------------------------------------------------------


def test_update_text_reembeds_and_keeps_memberships(coll):
    ids = coll.insert(TEXTS[:3], indexes="a")
    coll.insert(TEXTS[3:])
    old_vec = coll.get(ids[0]).vectors["default"]
    new = coll.update(ids[0], text="volcanic eruptions reshape islands")
    assert new.text == "volcanic eruptions reshape islands"
    assert not np.array_equal(new.vectors["default"], old_vec)
    hits = coll.retrieve("volcanic eruptions reshape islands", index="a", k=1)
    assert ids_of(hits) == [ids[0]]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].record.text == "volcanic eruptions reshape islands"
    # still only in "a": memberships kept, none added
    assert ids[0] in coll.ids(index="a")
    assert ids[0] not in coll.ids(index="b")
    assert "small" not in coll.get(ids[0]).vectors
    # the old text no longer finds it first
    assert ids_of(coll.retrieve(TEXTS[0], index="a", k=1)) != [ids[0]]
    assert coll.count() == len(TEXTS)


def test_update_metadata_only_keeps_vectors(coll):
    (rid,) = coll.insert([{"text": "meta record", "metadata": {"a": 1, "b": 2}}])
    rec = coll.get(rid)
    updated = coll.update(rid, metadata={"c": 3})
    assert updated.metadata == {"c": 3}
    np.testing.assert_array_equal(updated.vectors["default"], rec.vectors["default"])
    merged = coll.update(rid, metadata={"d": 4}, merge_metadata=True)
    assert merged.metadata == {"c": 3, "d": 4}
    assert merged.created_at == rec.created_at
    assert ids_of(coll.retrieve("meta record", index="a", where={"d": 4})) == [rid]
    assert coll.retrieve("meta record", index="a", where={"a": 1}) == []
    with pytest.raises(NotFoundError):
        coll.update("missing", text="x")


def test_upsert_inserts_and_replaces(coll):
    ids = coll.upsert([{"id": "u1", "text": "first version"}, {"id": "u2", "text": "second record"}], indexes="a")
    assert ids == ["u1", "u2"]
    assert coll.ids(index="a") == ["u1", "u2"] and coll.ids(index="b") == []
    # replacing keeps memberships (no indexes given: none added)
    coll.upsert([{"id": "u1", "text": "replacement text about rockets", "metadata": {"v": 2}}])
    assert coll.get("u1").text == "replacement text about rockets"
    assert coll.get("u1").metadata == {"v": 2}
    assert coll.ids(index="b") == []
    assert ids_of(coll.retrieve("replacement text about rockets", index="a", k=1)) == ["u1"]
    # explicit indexes add memberships
    coll.upsert([{"id": "u1", "text": "replacement text about rockets"}], indexes="b")
    assert coll.ids(index="b") == ["u1"]
    assert ids_of(coll.retrieve("rockets", index="b", k=1)) == ["u1"]
    # a new record without indexes goes to all
    coll.upsert(["brand new"])
    assert coll.count(index="a") == 3 and coll.count(index="b") == 2
    assert coll.count() == 3


# -- reads -----------------------------------------------------------------------------


def test_get_get_many_count_ids(coll):
    ids = coll.insert([{"text": t, "metadata": {"i": i, "even": i % 2 == 0}} for i, t in enumerate(TEXTS)])
    assert [r.text for r in coll.get_many(ids)] == TEXTS
    assert coll.get_many([ids[1], "missing", ids[0]])[1] is None
    assert [r.id for r in coll.get_many([ids[1], ids[0]])] == [ids[1], ids[0]]
    with pytest.raises(NotFoundError):
        coll.get("missing")
    assert coll.count() == len(coll) == len(TEXTS)
    assert coll.count(where={"even": True}) == 3
    assert coll.ids(where={"i": {"$gte": 4}}) == ids[4:]
    assert coll.count(index="a", where={"i": {"$lt": 2}}) == 2
    with pytest.raises(NotFoundError):
        coll.ids(index="zzz")
    with pytest.raises(FilterError):
        coll.count(where={"i": {"$regex": "x"}})


def test_retrieve_k_order_scores_and_records(coll):
    ids = coll.insert(TEXTS)
    hits = coll.retrieve("the cat", index="a", k=3)
    assert len(hits) == 3
    assert set(ids_of(hits[:2])) == {ids[0], ids[5]}
    assert all(h.source == "a" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.record is not None and h.record.text in TEXTS for h in hits)
    assert all(h.record.vectors == {} for h in hits)  # records come without vectors
    # k larger than the index returns everything
    assert sorted(ids_of(coll.retrieve("the cat", index="a", k=100))) == sorted(ids)
    # l2 index: scores are negative squared distances
    (best,) = coll.retrieve(TEXTS[4], index="b", k=1)
    assert best.id == ids[4] and best.score == pytest.approx(0.0, abs=1e-5) and best.score <= 0
    bare = coll.retrieve("the cat", index="a", k=2, with_records=False)
    assert [h.record for h in bare] == [None, None]
    # a Query or a dict works too
    assert ids_of(coll.retrieve(Query(text="the cat", k=2), index="a")) == ids_of(hits[:2])
    assert ids_of(coll.retrieve({"text": "the cat", "k": 2}, index="a")) == ids_of(hits[:2])


def test_retrieve_needs_index_name_with_several(coll):
    coll.insert(TEXTS)
    with pytest.raises(ValidationError, match="index"):
        coll.retrieve("cat")
    with pytest.raises(NotFoundError):
        coll.retrieve("cat", index="zzz")


def test_retrieve_single_index_default(make):
    c = make(indexes=False)
    c.create_index("only", "exact")
    ids = c.insert(TEXTS)
    assert ids_of(c.retrieve(TEXTS[3], k=1)) == [ids[3]]


def test_retrieve_where_and_empty_result(coll):
    ids = coll.insert([{"text": t, "metadata": {"i": i}} for i, t in enumerate(TEXTS)])
    hits = coll.retrieve("the cat", index="a", k=10, where={"i": {"$gt": 2}})
    assert set(ids_of(hits)) == set(ids[3:])
    assert coll.retrieve("the cat", index="a", where={"i": 99}) == []
    # the filter applies to the index's members only
    coll.remove_from_index("a", ids[5])
    assert set(ids_of(coll.retrieve("the cat", index="a", k=10, where={"i": {"$gt": 2}}))) == set(ids[3:5])


def test_scope_isolation_in_retrieve(coll):
    alice = coll.insert(["the cat sat on the mat", "alice likes cats"], scope={"user_id": "alice", "agent_id": "x"})
    bob = coll.insert(["the cat sat on the mat", "bob likes cats"], scope={"user_id": "bob", "agent_id": "x"})
    shared = coll.insert(["the cat sat on the mat, unscoped"])
    for name in ("a", "b"):
        got = ids_of(coll.retrieve("the cat sat on the mat", index=name, k=10, scope={"user_id": "alice"}))
        assert set(got) == set(alice)
        got = ids_of(coll.retrieve("cats", index=name, k=10, scope=Scope(agent_id="x")))
        assert set(got) == set(alice + bob)
        got = ids_of(coll.retrieve("cats", index=name, k=10, scope={"user_id": "carol"}))
        assert got == []
        got = ids_of(coll.retrieve("cats", index=name, k=10, scope={"user_id": "bob", "run_id": "r"}))
        assert got == []
    # no scope: everything
    assert set(ids_of(coll.retrieve("cats", index="a", k=10))) == set(alice + bob + shared)
    # scope inside a Query
    q = Query(text="cats", k=10, scope=Scope(user_id="bob"))
    assert set(ids_of(coll.retrieve(q, index="a"))) == set(bob)
    # scope with a where filter, and in a fused retrieval
    got = fused(coll, ["a", "b"], "cats", k=10, scope={"user_id": "alice"})
    assert set(ids_of(got)) == set(alice)
    assert coll.count(scope={"user_id": "alice"}) == 2


# -- fused retrieval over several indexes (memcore.testing.fused: recall stages + fuse) --


def test_fused_rrf(coll):
    ids = coll.insert(TEXTS[:3], indexes="a") + coll.insert(TEXTS[3:], indexes="b") + coll.insert(["the cat is everywhere"])
    hits = fused(coll, ["a", "b"], "the cat", fusion="rrf", k=10)
    assert set(ids_of(hits)) == set(ids)
    assert all(h.source == "rrf" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    by_id = {h.id: h for h in hits}
    everywhere = by_id[ids[-1]]
    assert {c.source for c in everywhere.provenance} == {"a", "b"}
    for rid in ids[:3]:
        assert [c.source for c in by_id[rid].provenance] == ["a"]
    for rid in ids[3:6]:
        assert [c.source for c in by_id[rid].provenance] == ["b"]
    # rrf score = sum of 1/(60 + rank)
    for h in hits:
        assert h.score == pytest.approx(sum(1 / (60 + c.rank) for c in h.provenance))
        assert h.record is not None
        assert "<-" in h.explain()
    # in both lists (ranks <= 4 each), it beats every record found by one list only
    assert hits[0].id == ids[-1]
    assert len(fused(coll, ["a", "b"], "the cat", k=2)) == 2
    # a weighted config dict
    weighted = fused(coll, ["a", "b"], "the cat", fusion={"kind": "rrf", "weights": {"b": 0.0}}, k=10)
    assert {h.id for h in weighted if h.score > 0} == set(ids[:3]) | {ids[-1]}


def test_fused_concat(coll):
    coll.insert(TEXTS[:3], indexes="a")
    coll.insert(TEXTS[3:], indexes="b")
    la = ids_of(coll.retrieve("the stock cat", index="a", k=10))
    lb = ids_of(coll.retrieve("the stock cat", index="b", k=10))
    hits = fused(coll, ["a", "b"], "the stock cat", fusion="concat", k=10)
    assert ids_of(hits) == la + lb
    assert [h.score for h in hits] == [-float(i) for i in range(len(hits))]
    for h in hits:
        assert len(h.provenance) == 1
        assert h.provenance[0].source == ("a" if h.id in la else "b")
    # depth cuts each list before concatenation, in the order the indexes are given
    hits = fused(coll, ["b", "a"], "the stock cat", fusion="concat", k=3, depth=1)
    assert ids_of(hits) == lb[:1] + la[:1]


def test_fused_errors(coll):
    coll.insert(TEXTS)
    with pytest.raises(ValidationError):
        fused(coll, [], "cat", k=3)
    with pytest.raises(NotFoundError):
        fused(coll, ["a", "nope"], "cat")
    with pytest.raises(UnknownComponentError):
        fused(coll, ["a"], "cat", fusion="rrff")
    with pytest.raises(ValidationError):
        fused(coll, ["a"], "cat", k=0)
    with pytest.raises(ValidationError):
        fused(coll, ["a"], "cat", depth=0)


# -- links -----------------------------------------------------------------------------


def test_link_and_unlink(coll):
    ids = coll.insert(TEXTS[:3])
    coll.link(ids[0], ids[1])
    coll.link(ids[0], ids[2], "cites", 0.5)
    assert set(coll.get(ids[0]).links) == {Link(ids[1], "related", 1.0), Link(ids[2], "cites", 0.5)}
    coll.link(ids[0], ids[2], "cites", 2.0)  # re-weight
    assert set(coll.get(ids[0]).links) == {Link(ids[1], "related", 1.0), Link(ids[2], "cites", 2.0)}
    coll.link(ids[0], ids[2], "related")
    assert coll.unlink(ids[0], ids[2], "cites") == 1
    assert set(coll.get(ids[0]).links) == {Link(ids[1], "related", 1.0), Link(ids[2], "related", 1.0)}
    assert coll.unlink(ids[0], ids[2], "cites") == 0
    assert coll.unlink(ids[0], ids[1]) == 1
    assert coll.unlink(ids[0], ids[2]) == 1
    assert coll.get(ids[0]).links == ()
    # memberships and search are unaffected by links
    assert coll.ids(index="a") == ids
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.link(ids[0], "missing")
    with pytest.raises(NotFoundError):
        coll.link("missing", ids[0])
    with pytest.raises(ValidationError):
        coll.link(ids[0], ids[0])
    with pytest.raises(ValidationError):
        coll.link(ids[0], ids[1], weight=math.nan)
    assert snapshot(coll) == before


def test_insert_with_links(coll):
    ids = coll.insert([{"id": "t", "text": "target"}, {"id": "s", "text": "source", "links": ["t", {"target": "t", "relation": "cites", "weight": 0.3}]}])
    assert ids == ["t", "s"]
    assert set(coll.get("s").links) == {Link("t"), Link("t", "cites", 0.3)}
    before = snapshot(coll)
    with pytest.raises(NotFoundError):
        coll.insert([{"text": "dangling", "links": ["nowhere"]}])
    assert snapshot(coll) == before
    # a repeated edge is stored once, the same in every store
    coll.insert([{"id": "d", "text": "double", "links": ["t", "t", {"target": "t", "weight": 2.0}]}])
    assert coll.get("d").links == (Link("t", "related", 2.0),)


# -- rebuild ---------------------------------------------------------------------------


def test_rebuild_index_gives_same_results(coll):
    ids = coll.insert([{"text": t, "metadata": {"i": i}} for i, t in enumerate(TEXTS)])
    coll.remove_from_index("a", ids[1])
    coll.delete(ids[2])
    coll.update(ids[3], text="the cat market")
    queries = ["the cat", "market", "bread bakery", "dog"]
    for name in ("a", "b"):
        before = [[(h.id, round(h.score, 5)) for h in coll.retrieve(q, index=name, k=10)] for q in queries]
        filtered = ids_of(coll.retrieve("the cat", index=name, k=10, where={"i": {"$ne": 0}}))
        assert coll.rebuild_index(name) == coll.count(index=name)
        after = [[(h.id, round(h.score, 5)) for h in coll.retrieve(q, index=name, k=10)] for q in queries]
        assert after == before
        assert ids_of(coll.retrieve("the cat", index=name, k=10, where={"i": {"$ne": 0}})) == filtered
    seen = []
    coll.rebuild_index("a", progress=seen.append)
    assert sum(seen) == coll.count(index="a")
    with pytest.raises(NotFoundError):
        coll.rebuild_index("zzz")


# -- metadata filters through retrieve -------------------------------------------------

META = [
    {"speaker": "Alice", "ts": 1, "score": 0.5, "ok": True, "tag": "x"},
    {"speaker": "Bob", "ts": 2, "score": 1.5, "ok": False},
    {"speaker": "Alice", "ts": 3, "score": 2.5, "ok": True, "tag": None},
    {"speaker": "Carol", "ts": 4, "ok": False, "tag": "y"},
    {"ts": 5, "score": 1, "tag": "x", "ok": 1},
    {"speaker": "bob", "ts": "6", "score": "1.5"},
]

FILTERS = [
    {"speaker": "Alice"},
    {"speaker": {"$eq": "Alice"}},
    {"speaker": {"$ne": "Alice"}},
    {"ts": {"$gt": 2}},
    {"ts": {"$gte": 2}},
    {"ts": {"$lt": 3}},
    {"ts": {"$lte": 3}},
    {"ts": {"$gt": 1, "$lt": 5}},
    {"ts": {"$gte": "5"}},
    {"score": {"$gte": 1}},
    {"score": 1.0},
    {"speaker": {"$in": ["Alice", "Carol"]}},
    {"speaker": {"$nin": ["Alice", "Carol"]}},
    {"speaker": {"$in": []}},
    {"speaker": {"$nin": []}},
    {"ok": True},
    {"ok": 1},
    {"ok": {"$ne": True}},
    {"ok": {"$in": [True, 1]}},
    {"tag": None},
    {"tag": {"$ne": None}},
    {"tag": {"$in": ["x", "y"]}},
    {"tag": {"$nin": ["x"]}},
    {"speaker": "Alice", "ts": {"$gt": 1}},
    {"$and": [{"speaker": "Alice"}, {"ts": {"$lte": 1}}]},
    {"$or": [{"speaker": "Bob"}, {"ts": {"$gte": 4}}]},
    {"$or": [{"$and": [{"ok": True}, {"score": {"$gt": 1}}]}, {"tag": "y"}]},
    {"missing": {"$ne": 1}},
    {"missing": 1},
]


@pytest.mark.parametrize("where", FILTERS, ids=[str(f) for f in FILTERS])
def test_every_filter_operator_through_retrieve(coll, where):
    ids = coll.insert([{"text": f"record number {i} about cats", "metadata": m} for i, m in enumerate(META)], indexes="a")
    node = parse_filter(where)
    expected = {rid for rid, m in zip(ids, META) if matches(node, m)}
    got = ids_of(coll.retrieve("cats", index="a", k=len(META), where=where))
    assert set(got) == expected
    assert set(coll.ids(where=where)) == expected
    assert coll.count(where=where) == len(expected)


def test_filter_semantics_spot_checks(coll):
    ids = coll.insert([{"text": f"record number {i} about cats", "metadata": m} for i, m in enumerate(META)], indexes="a")

    def got(where):
        return {ids.index(h) for h in coll.ids(where=where)}

    assert got({"speaker": "Alice"}) == {0, 2}
    assert got({"speaker": {"$ne": "Alice"}}) == {1, 3, 4, 5}  # missing fields match $ne
    assert got({"ts": {"$gt": 2}}) == {2, 3, 4}  # "6" is a string: not compared with numbers
    assert got({"ok": True}) == {0, 2}  # 1 is not True
    assert got({"ok": 1}) == {4}
    assert got({"score": 1.0}) == {4}  # 1 == 1.0
    assert got({"tag": None}) == {2}  # null only, not missing
    assert got({"$or": [{"speaker": "Bob"}, {"ts": {"$gte": 4}}]}) == {1, 3, 4}


# -- both stores agree -----------------------------------------------------------------


def test_memory_and_sqlite_agree(tmp_path, make_spaces):
    results = []
    for path in (None, tmp_path / "agree"):
        c = Collection.create(path, spaces=make_spaces())
        c.create_index("a", "exact")
        c.create_index("b", "exact", space="small", metric="l2")
        ids = c.insert([{"text": t, "metadata": {"i": i}} for i, t in enumerate(TEXTS)])
        c.remove_from_index("b", ids[0])
        c.update(ids[1], text="a dog barked at the cat")
        c.delete(ids[2])
        c.link(ids[3], ids[4])
        out = []
        for name in ("a", "b"):
            for q in ("the cat", "dog", "market"):
                out.append([(h.id, round(h.score, 5)) for h in c.retrieve(q, index=name, k=4, where={"i": {"$lte": 4}})])
        out.append([(h.id, round(h.score, 6)) for h in fused(c, ["a", "b"], "cat", k=5)])
        out.append(c.ids())
        out.append([(r.id, r.text, r.metadata, r.links) for r in c.get_many(c.ids())])
        results.append(out)
        c.close()
    assert results[0] == results[1]


def test_failed_index_update_is_rebuilt_on_next_use(coll, monkeypatch):
    from memcore import IndexUpdateError
    from memcore.indexes._exact import ExactIndex

    coll.insert(TEXTS[:2])
    original = ExactIndex.add

    def failing_add(self, records):
        if self.name == "a":
            raise RuntimeError("disk full")
        return original(self, records)

    monkeypatch.setattr(ExactIndex, "add", failing_add)
    with pytest.raises(IndexUpdateError, match="a: RuntimeError: disk full"):
        coll.insert([{"id": "late", "text": "quantum bakery"}])
    monkeypatch.setattr(ExactIndex, "add", original)
    assert coll.get("late").text == "quantum bakery"  # the store has it
    assert ids_of(coll.retrieve("quantum bakery", index="b", k=1)) == ["late"]  # b was updated
    assert ids_of(coll.retrieve("quantum bakery", index="a", k=1)) == ["late"]  # a is rebuilt on use
    assert len(coll.index("a")) == coll.count(index="a") == 3


def test_closed_collection_rejects_calls(make):
    c = make()
    c.insert(["x"])
    c.close()
    c.close()  # idempotent
    with pytest.raises(ValidationError, match="closed"):
        c.insert(["y"])
    with pytest.raises(ValidationError, match="closed"):
        c.retrieve("x", index="a")
    with pytest.raises(ValidationError, match="closed"):
        c.count()


def test_delete_with_replace_is_one_atomic_batch_and_refuses_bad_replacements(make):
    from memcore import NotFoundError, ValidationError

    col = make()
    col.insert([{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}, {"id": "w", "text": "alpha\nbeta", "metadata": {"k": 1}}])
    seq = col.store.last_seq()
    with pytest.raises(ValidationError, match="both deleted and replaced"):
        col.delete(["a"], replace=[{"id": "a", "text": "x"}])
    with pytest.raises(NotFoundError, match="no existing"):
        col.delete(["a"], replace=[{"id": "new", "text": "x"}])
    assert col.store.last_seq() == seq and col.count() == 3
    assert col.delete(["a"], replace=[{"id": "w", "text": "beta", "metadata": {"k": 2}}], state={("svc", "tail"): ["b"]}) == 1
    assert col.store.last_seq() == seq + 1
    assert col.get_many(["a"]) == [None] and col.get("w").text == "beta" and col.get("w").metadata == {"k": 2}
    assert col.get_state("svc", "tail") == ["b"]
    assert [h.id for h in col.retrieve("beta", index="a", k=3)][:2] in (["b", "w"], ["w", "b"])  # the rewritten text is re-embedded
