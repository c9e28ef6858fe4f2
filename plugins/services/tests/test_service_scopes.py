"""Every service of the plugin per scope: two users, alice and bob, insert interleaved (enough
to overflow windows and tiers). Alice never sees bob's memories; her results are the ones
she gets in a memory where bob never existed (same inserts, same retrieves); her inserts
never evict or migrate his entries; forgetting bob removes his records and service state
and leaves alice as she was; unknown keywords are refused; another scope's id is unknown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memcore import NotFoundError, ValidationError

ALICE, BOB = {"user_id": "alice"}, {"user_id": "bob"}
TEXTS = [
    "Alice moved to Zurich to work at a private bank",
    "Bob adopted a small grey cat named Pixel",
    "The quarterly budget report is due next Friday",
    "Carol is learning to play the violin on Sundays",
    "Dave's dog loves chasing tennis balls in the park",
    "The team meeting moved to Tuesday morning at nine",
    "Erin bakes sourdough bread every weekend",
    "Frank planted tomatoes and basil in his garden",
    "Gina collects vintage postcards from Lisbon",
]
QUERIES = ["grey cat Pixel", "budget report Friday", "violin Sundays", "sourdough bread weekend", "Zurich bank", "postcards Lisbon garden"]
BOB_MARK = "zebra"
"""A word only bob's texts hold (his texts are alice's plus it: near-duplicates across scopes)."""

WINDOWED_HYBRID = {
    "kind": "hybrid",
    "indexes": {"dense": {"kind": "exact", "space": "default", "metric": "cosine"}},
    "windows": {"size": 3, "group": "session", "indexes": {"dense": {"kind": "exact", "space": "default", "metric": "cosine"}}},
    "pipeline": [
        {"kind": "recall", "index": "dense", "over_fetch": 2.0},
        {"kind": "recall", "index": "window.dense", "over_fetch": 2.0},
        {"kind": "expand"},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
        {"kind": "limit"},
    ],
}

SERVICES: dict[str, dict[str, Any]] = {
    "short_term_archive": {"kind": "short_term_memory", "max_dialog": 3},
    "short_term_forget": {"kind": "short_term_memory", "max_dialog": 3, "on_evict": "forget"},
    "hierarchical_fifo": {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 2}},
    "hierarchical_heat_delete": {
        "kind": "hierarchical",
        "layout": "three_tier",
        "capacities": {"stm": 2, "mtm": 2, "ltm": 3},
        "forget": "delete",
        "migration": "heat",
    },
    "vector_hash_extract_distill": {"kind": "vector_hash", "bits": 4, "tables": 8, "distill": {"similarity": 0.3, "merge_threshold": 0.6}},
    "vector_hash_thoughts": {"kind": "vector_hash", "extract": False, "bits": 4, "tables": 8},
    "hybrid_dense": {"kind": "hybrid", "indexes": {"dense": {"kind": "exact", "space": "default", "metric": "cosine"}}, "pipeline": "basic"},
    "hybrid_default": {"kind": "hybrid"},
    "hybrid_windows": WINDOWED_HYBRID,
}


def insert_alice(m, i: int) -> None:
    m.insert(TEXTS[i], metadata={"session": 1 + i // 4, "owner": "alice", "n": i}, id=f"a{i}", scope=ALICE)


def insert_bob(m, i: int) -> None:
    m.insert(f"{TEXTS[i]} {BOB_MARK}", metadata={"session": 1 + i // 4, "owner": "bob", "n": i}, id=f"b{i}", scope=BOB)


def alice_results(m) -> list[list[tuple[str, str, float]]]:
    """Alice's results for every query: (text, metadata, score), best first."""
    out = []
    for q in QUERIES:
        results = m.retrieve(q, k=10, scope=ALICE)
        for r in results:  # nothing of bob's, by text, metadata or the stored record's scope
            assert BOB_MARK not in r["text"] and r["metadata"].get("owner") != "bob", r
            assert m.collection.get(r["id"]).scope.as_dict() == ALICE, r
        out.append([(r["text"], json.dumps(r["metadata"], sort_keys=True), round(r["score"], 5)) for r in results])
    return out


@pytest.fixture(params=sorted(SERVICES))
def service(request):
    return SERVICES[request.param]


def test_alice_sees_what_she_would_see_alone(opener, tmp_path, service):
    with opener(tmp_path / "alone", service) as alone:
        for i in range(len(TEXTS)):
            insert_alice(alone, i)
        expected = alice_results(alone)
        expected_ids = sorted(alone.collection.ids(scope=ALICE))
    with opener(tmp_path / "both", service) as both:
        for i in range(len(TEXTS)):
            insert_bob(both, i)  # bob first: a global window or tier would push alice's entries out
            insert_alice(both, i)
    with opener(tmp_path / "both", service) as both:  # and after a reopen
        assert alice_results(both) == expected
        assert sorted(both.collection.ids(scope=ALICE)) == expected_ids
        bob_ids = both.collection.ids(scope=BOB)
        assert bob_ids and all(both.collection.get(i).scope.as_dict() == BOB for i in bob_ids)  # derived records carry the scope


def bob_snapshot(m) -> dict[str, Any]:
    """Bob's records as stored: id -> (text, metadata, the indexes holding it), and his state."""
    c = m.collection
    ids = c.ids(scope=BOB)
    members = c.store.memberships(ids)
    records = {r.id: (r.text, r.metadata, sorted(members[r.id])) for r in c.get_many(ids)}
    state = {ns: c.store.state_items(ns) for ns in c.store.state_namespaces() if "bob" in ns}
    return {"records": records, "state": state}


def test_alice_inserts_never_touch_bob(opener, tmp_path, service):
    with opener(tmp_path, service) as m:
        for i in range(3):
            insert_bob(m, i)
        before = bob_snapshot(m)
        for i in range(len(TEXTS)):
            insert_alice(m, i)  # near-duplicates of bob's texts, overflowing every window and tier
        assert bob_snapshot(m) == before


def test_forgetting_bob_leaves_alice_as_she_was(opener, tmp_path, service):
    with opener(tmp_path / "alone", service) as alone:
        for i in range(len(TEXTS)):
            insert_alice(alone, i)
        alice_results(alone)
        expected = alice_results(alone)  # the second round: heat has counted the first one's visits
    with opener(tmp_path / "both", service) as both:
        for i in range(len(TEXTS)):
            insert_alice(both, i)
            insert_bob(both, i)
        alice_results(both)
        assert both.retrieve(QUERIES[0], k=10, scope=BOB)  # bob's own state exists (visits, counts...)
        report = both.forget(BOB)
        assert report["records"] > 0
        assert both.collection.count(scope=BOB) == 0 and both.count(scope=BOB) == 0
        assert [ns for ns in both.collection.store.state_namespaces() if "bob" in ns] == []
        assert alice_results(both) == expected
        assert both.retrieve(QUERIES[0], k=10, scope=BOB) == []


def test_delete_by_scope_is_forget(opener, tmp_path, service):
    with opener(tmp_path, service) as m:
        for i in range(4):
            insert_alice(m, i)
            insert_bob(m, i)
        assert m.delete(scope=BOB) > 0
        assert m.collection.count(scope=BOB) == 0
        assert [ns for ns in m.collection.store.state_namespaces() if "bob" in ns] == []
        assert m.collection.count(scope=ALICE) > 0


def test_unknown_keywords_are_refused(opener, tmp_path, service):
    with opener(tmp_path, service) as m:
        insert_alice(m, 0)
        with pytest.raises(ValidationError, match="wher"):
            m.retrieve(TEXTS[0], wher={"owner": "alice"}, scope=ALICE)
        with pytest.raises(ValidationError, match="colour"):
            m.insert("x", colour="red", scope=ALICE)
        with pytest.raises(ValidationError, match="scpoe"):
            m.service.retrieve(TEXTS[0], scpoe=ALICE)


def test_another_scopes_id_is_unknown(opener, tmp_path, service):
    with opener(tmp_path, service) as m:
        insert_alice(m, 0)
        insert_bob(m, 0)
        bob_id = m.collection.ids(scope=BOB)[-1]
        with pytest.raises((NotFoundError, ValidationError)) as refused:  # services that refuse the verb say so for any id
            m.update(bob_id, metadata={"owner": "alice"}, scope=ALICE)
        if isinstance(refused.value, ValidationError):
            assert "windows" in str(refused.value)
        with pytest.raises((NotFoundError, ValidationError)) as refused:
            m.upsert({"id": bob_id, "text": "mine now"}, scope=ALICE)
        if isinstance(refused.value, ValidationError) and not isinstance(refused.value, NotFoundError):
            assert "upsert" in str(refused.value)
        with pytest.raises(NotFoundError):
            m.delete([bob_id], scope=ALICE)
        assert m.collection.get(bob_id).metadata["owner"] == "bob"


def test_update_and_upsert_within_the_scope(opener, tmp_path, service):
    """What each service does with upsert/update (refused with a ValidationError naming the
    verb to use, or written through its policy) -- never silently around it."""
    with opener(tmp_path, service) as m:
        insert_alice(m, 0)
        rid = m.collection.ids(scope=ALICE)[-1]
        try:
            m.update(rid, metadata={"owner": "alice", "edited": True}, scope=ALICE)
        except ValidationError as exc:
            assert "insert()" in str(exc)
        else:
            assert m.get(rid, scope=ALICE).metadata["edited"] is True
        try:
            m.upsert({"id": "a-new", "text": "Hana sails on the lake"}, scope=ALICE)
        except ValidationError as exc:
            assert "insert()" in str(exc)
        else:
            assert m.get("a-new", scope=ALICE).scope.as_dict() == ALICE
            assert any(r["id"] == "a-new" for r in m.retrieve("Hana sails on the lake", k=3, scope=ALICE))


# -- the policies' own writes ------------------------------------------------------------------


def test_a_crash_during_a_tier_move_leaves_each_entry_in_one_tier(opener, tmp_path):
    """A migration is one commit (Collection.move): a crash at it leaves the entry where it was."""
    service = {"kind": "hierarchical", "layout": "two_tier", "capacities": {"stm": 2}}
    m = opener(tmp_path, service)
    ids = [m.insert(t, scope=ALICE) for t in TEXTS[:2]]
    store = m.collection.store
    apply = store.apply

    def crash(batch):
        if batch.remove_membership:  # the commit that takes the oldest out of stm
            raise KeyboardInterrupt("killed")
        return apply(batch)

    store.apply = crash
    with pytest.raises(KeyboardInterrupt):
        ids.append(m.insert(TEXTS[2], scope=ALICE))
    store.apply = apply
    m.close()
    with opener(tmp_path, service) as again:
        c = again.collection
        stm, ltm = set(c.ids(index="hierarchical.stm")), set(c.ids(index="hierarchical.ltm"))
        assert not stm & ltm and stm | ltm == set(c.ids())
        again.insert(TEXTS[3], scope=ALICE)  # the next insert moves what overflows
        assert again.service.report() == {"stm": 2, "ltm": 2, "forgotten": 0}


def test_a_window_made_with_the_old_global_capacity_still_opens(opener, tmp_path):
    """Memories made when the fifo window had ``capacity = max_dialog`` open as they are (the
    capacity is a search-time option of the fifo index)."""
    import memcore

    with memcore.Collection.create(tmp_path) as c:
        c.create_index("stm.window", "fifo", capacity=3)
        c.insert([{"id": f"old{i}", "text": t} for i, t in enumerate(TEXTS[:3])], indexes=["stm.window"])
    with opener(tmp_path, {"kind": "short_term_memory", "max_dialog": 3}) as m:
        assert [r["id"] for r in m.retrieve("zzz", k=5)] == ["old2", "old1", "old0"]
        m.insert(TEXTS[3], id="new")
        assert m.collection.ids(index="stm.window") == ["old1", "old2", "new"]
        assert m.collection.index("stm.window").capacity is None


def test_hybrid_delete_across_scopes_rebuilds_each_scopes_windows(opener, tmp_path):
    """An unscoped delete of entries of two scopes rebuilds the windows and cleans the group
    tails of each scope (kept in each scope's own state)."""
    with opener(tmp_path, WINDOWED_HYBRID) as m:
        for i in range(4):
            insert_alice(m, i)
            insert_bob(m, i)
        assert m.delete(["a2", "b2"]) == 2
        c = m.collection
        for who, scope in (("a", ALICE), ("b", BOB)):
            assert c.get(f"{who}3#window").metadata["members"] == [f"{who}1", f"{who}3"] and c.get(f"{who}3#window").scope.as_dict() == scope
            assert c.get_many([f"{who}2#window"]) == [None]
            with c.scoped(scope):
                assert c.state_items("hybrid.windows") == {'["", 1]': [f"{who}3"]}
        m.insert(TEXTS[4], metadata={"session": 1, "owner": "alice"}, id="a4", scope=ALICE)
        assert c.get("a4#window").metadata["members"] == ["a3", "a4"]


def test_short_term_catches_up_after_missed_evictions(opener, tmp_path):
    """Entries an insert did not evict (a crash after its commit) leave with the next insert,
    however many they are."""
    with opener(tmp_path, {"kind": "short_term_memory", "max_dialog": 3}) as m:
        m.service._evict = lambda: None  # every insert "crashes" before its eviction
        for i in range(70):
            m.insert(f"entry {i}", scope=ALICE)
        del m.service._evict
        m.insert("the last entry", id="last", scope=ALICE)
        with m.collection.scoped(ALICE):
            assert m.service.report() == {"window": 3, "archived": 68, "forgotten": 0}
        assert [r["id"] for r in m.retrieve("the last entry", k=1, scope=ALICE)] == ["last"]
