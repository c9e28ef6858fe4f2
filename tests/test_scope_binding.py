"""The core enforces scopes: a bound scope restricts every read and write of the collection."""

from __future__ import annotations

import threading

import pytest

import memcore
from memcore import NotFoundError, ValidationError
from memcore.errors import ScopeError
from memcore import Scope
from memcore.model._binding import namespace_scope, narrow, state_namespace

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


@pytest.fixture
def memory(tmp_path):
    m = memcore.open({"indexes": {"vector": {"kind": "exact"}, "other": {"kind": "exact"}}}, path=tmp_path / "m")
    yield m
    m.close()


def _two_users(memory):
    a = memory.insert("alice likes green tea in the morning", scope=ALICE)
    b = memory.insert("bob likes black coffee in the morning", scope=BOB)
    return a, b


def test_narrow_combines_and_refuses_contradictions():
    assert narrow(None, None) is None
    assert narrow(Scope(user_id="a"), None) == Scope(user_id="a")
    assert narrow(Scope(user_id="a"), Scope(run_id="r")) == Scope(user_id="a", run_id="r")
    with pytest.raises(ScopeError):
        narrow(Scope(user_id="a"), Scope(user_id="b"))


def test_state_namespace_round_trip():
    assert state_namespace("svc", None) == "svc"
    stored = state_namespace("svc", Scope(user_id="alice", run_id="r1"))
    assert namespace_scope(stored) == Scope(user_id="alice", run_id="r1")
    assert namespace_scope("svc") is None


def test_bound_reads_see_only_the_scope(memory):
    a, b = _two_users(memory)
    c = memory.collection
    with c.scoped(ALICE):
        assert c.ids() == [a]
        assert c.count() == 1
        assert [r.id if r else None for r in c.get_many([a, b])] == [a, None]
        with pytest.raises(NotFoundError):
            c.get(b)
        hits = c.retrieve("morning", index="vector", k=5)
        assert [h.id for h in hits] == [a]
        assert [h.id for h in c.attach_records(c.search_index("vector", c.make_query("coffee", k=5), 5))] == [a]
        _, present = c.vectors([a, b], "default")
        assert list(present) == [True, False]
        assert c.outside_scope([a, b]) == [b]
    assert c.count() == 2  # unbound again


def test_pipeline_and_query_are_scoped(memory):
    a, b = _two_users(memory)
    assert [h.id for h in memory.query("coffee", k=5, scope=ALICE)] == [a]
    assert [h.id for h in memory.query("coffee", k=5, index="vector", scope=BOB)] == [b]
    assert [r["id"] for r in memory.retrieve("coffee", k=5, scope=ALICE)] == [a]


def test_contradicting_scope_is_a_scope_error(memory):
    _two_users(memory)
    with memory.collection.scoped(ALICE):
        with pytest.raises(ScopeError):
            memory.count(scope=BOB)
        with pytest.raises(ScopeError):
            memory.insert("mallory writes for bob", scope=BOB)


def test_writes_are_stamped_and_records_outside_refused(memory):
    c = memory.collection
    with c.scoped(ALICE):
        rid = c.insert(["a note"])[0]
        with pytest.raises(ScopeError):
            c.insert([{"text": "a note for bob", "scope": BOB}])
    assert c.get(rid).scope == Scope(user_id="alice")


def test_same_text_in_two_scopes_is_two_records(memory):
    a = memory.insert("the same words", scope=ALICE)
    b = memory.insert("the same words", scope=BOB)
    assert a != b
    assert memory.count() == 2


def test_another_scopes_id_is_not_found_and_unchanged(memory):
    a, b = _two_users(memory)
    with pytest.raises(NotFoundError):
        memory.get(b, scope=ALICE)
    with pytest.raises(NotFoundError):
        memory.update(b, text="rewritten by alice", scope=ALICE)
    with pytest.raises(NotFoundError):
        memory.upsert({"id": b, "text": "overwritten by alice"}, scope=ALICE)
    with pytest.raises(NotFoundError):
        memory.delete(b, scope=ALICE)
    with memory.collection.scoped(ALICE), pytest.raises(NotFoundError):
        memory.collection.remove_from_index("vector", [b])
    assert memory.get(b).text == "bob likes black coffee in the morning"
    assert memory.count(index="vector") == 2


def test_state_is_kept_per_scope(memory):
    c = memory.collection
    with c.scoped(ALICE):
        c.set_state({("svc", "profile"): "likes tea"})
    with c.scoped(BOB):
        assert c.get_state("svc", "profile") is None
        c.set_state({("svc", "profile"): "likes coffee"})
        assert c.state_items("svc") == {"profile": "likes coffee"}
    with c.scoped(ALICE):
        assert c.get_state("svc", "profile") == "likes tea"
    assert c.get_state("svc", "profile") is None  # the unscoped namespace is its own


def test_forget_removes_records_state_and_index_entries(memory):
    a, b = _two_users(memory)
    c = memory.collection
    memory.insert("bob's second note", scope={"user_id": "bob", "run_id": "r1"})
    with c.scoped(BOB):
        c.set_state({("svc", "k"): 1})
    with c.scoped({"user_id": "bob", "run_id": "r1"}):
        c.set_state({("svc", "k"): 2})
    with c.scoped(ALICE):
        c.set_state({("svc", "k"): 3})
    report = memory.forget(BOB)
    assert report == {"records": 2, "indexes": {"other": 2, "vector": 2}, "state_keys": 2}
    assert memory.count(scope=BOB) == 0
    assert memory.count() == 1
    assert not [ns for ns in c.store.state_namespaces() if "bob" in ns]
    with c.scoped(ALICE):
        assert c.get_state("svc", "k") == 3
    assert [h.id for h in memory.query("coffee", k=5)] == [a]


def test_delete_by_scope_alone_forgets(memory):
    _two_users(memory)
    assert memory.delete(scope=BOB) == 1
    assert memory.count() == 1


def test_forget_needs_a_scope(memory):
    with pytest.raises(ValidationError):
        memory.forget({})
    with pytest.raises(ValidationError):
        memory.collection.forget({})


def test_move_is_one_commit(memory):
    c = memory.collection
    rid = c.insert(["moving text"], indexes=["vector"])[0]
    seq = c.store.last_seq()
    c.move([rid], "vector", "other", state={("svc", "moved"): 1})
    assert c.store.last_seq() == seq + 1
    assert c.ids(index="vector") == [] and c.ids(index="other") == [rid]
    assert c.get_state("svc", "moved") == 1
    with pytest.raises(NotFoundError):
        c.move([rid], "vector", "other")
    with pytest.raises(ValidationError):
        c.move([rid], "other", "other")


def test_move_of_another_scopes_record_is_not_found(memory):
    _, b = _two_users(memory)
    with memory.collection.scoped(ALICE), pytest.raises(NotFoundError):
        memory.collection.move([b], "vector", "other")
    assert b in memory.collection.ids(index="vector")


def test_bindings_are_per_thread(memory):
    a, b = _two_users(memory)
    seen: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def read(name, scope):
        with memory.collection.scoped(scope):
            barrier.wait()
            seen[name] = memory.collection.ids()

    threads = [threading.Thread(target=read, args=("a", ALICE)), threading.Thread(target=read, args=("b", BOB))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": [a], "b": [b]}


def test_service_verbs_bind_their_scope(memory):
    a, b = _two_users(memory)
    assert [r["id"] for r in memory.service.retrieve("morning", k=5, scope=BOB)] == [b]
    assert memory.service.forget(scope=ALICE)["records"] == 1
    assert memory.count() == 1


def test_a_link_to_another_scopes_record_is_not_found(memory):
    _, b = _two_users(memory)
    with pytest.raises(NotFoundError) as err:
        memory.insert({"text": "alice links to bob", "links": [b]}, scope=ALICE)
    assert "do not exist" in str(err.value)  # the same answer as for an id nobody has
    assert memory.count(scope=ALICE) == 1


def test_a_scope_given_positionally_to_delete_is_a_type_error(memory):
    """``scope`` is a keyword the base class binds; a positional one never slips through unbound."""
    _, b = _two_users(memory)
    with pytest.raises(TypeError):
        memory.service.delete([b], ALICE)
    with pytest.raises(NotFoundError):
        memory.service.delete([b], scope=ALICE)
    assert memory.count() == 2
