"""``memoryos`` per scope: two users' pages, segments, summaries, facts, profiles and state
never cross; a forgotten user leaves nothing behind and the other's results are exactly
those of a memory where the forgotten user never existed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from memcore import NotFoundError, Scope, ValidationError
from memcore.model._binding import namespace_scope
from memcore_services.common import unit
from memcore_services.memoryos import PROFILE_ID, ForeignRecordsWarning, profile_id

ALICE, BOB = {"user_id": "alice"}, {"user_id": "bob"}
# small capacities: segments, capacity summaries and (heat 2 = one fresh page) promotions come fast
SERVICE = {
    "kind": "memoryos",
    "stm_capacity": 2,
    "mtm_capacity": 2,
    "segment_threshold": 0.99,
    "heat_threshold": 2.0,
    "clock": "event",
}
TIERS = ("memoryos.stm", "memoryos.mtm", "memoryos.profile", "memoryos.user_knowledge", "memoryos.assistant_knowledge")
ALICE_WORDS = ["violin", "zurich", "bread", "garden", "sonata", "sourdough"]
BOB_WORDS = ["bobcanary", "pixel", "tuesday", "mortgage", "kayak", "lighthouse"]
QUERIES = ["violin zurich", "bread garden", "pixel mortgage", "kayak lighthouse tuesday", "what do I like"]


def page(user: str, words: list[str], i: int) -> dict:
    """One page of ``user`` (two first-person lines: facts and a profile come from it)."""
    name = user.capitalize()
    w1, w2 = words[i % len(words)], words[(i * 2 + 1) % len(words)]
    text = f"{name}: I love my {w1} and my {w2} number {i}\nAssistant: I noted your {w1} for {name}"
    return {"id": f"{user}-{i}", "text": text, "metadata": {"session": 1 + i // 4, "timestamp": 86400 * i}}


def insert(m, user: str, i: int) -> str:
    item = page(user, ALICE_WORDS if user == "alice" else BOB_WORDS, i)
    return m.insert(item["text"], metadata=item["metadata"], id=item["id"], scope={"user_id": user})


def key(result: dict) -> tuple:
    """A result compared across memories: a page by id, a derived record (its id is random) by text."""
    rid = result["id"]
    return (rid if rid.startswith(("alice-", "bob-")) else ("derived", result["text"]), result["score"])


def results(m, scope: dict) -> list[list[tuple]]:
    return [[key(r) for r in m.retrieve(q, k=50, scope=scope)] for q in QUERIES]


def scope_of(m, rid: str) -> dict:
    record = m.collection.store.get([rid])[0]
    return record.scope.as_dict() if record.scope is not None else {}


N = 12


@pytest.fixture
def shared(opener, tmp_path):
    """A memory where alice and bob insert in turns (N pages each)."""
    with opener(tmp_path / "shared", SERVICE) as m:
        for i in range(N):
            insert(m, "alice", i)
            insert(m, "bob", i)
        yield m


def alone(opener, path, user: str):
    m = opener(path, SERVICE)
    for i in range(N):
        insert(m, user, i)
    return m


def test_every_tier_is_built_per_scope(shared):
    for user, scope in (("alice", ALICE), ("bob", BOB)):
        report = shared.service.report(scope=scope)
        assert report["stm"] == 2 and report["mtm"] > 0 and report["segments"] > 0 and report["chains"] > 0
        assert report["evicted_segments"] > 0 and report["promotions"] > 0 and report["profile"] == 1
        assert report["user_knowledge"] > 0 and report["assistant_knowledge"] > 0 and report["outside_tiers"] == 0
        assert (
            shared.count(scope=scope) == sum(report[t] for t in ("stm", "mtm", "profile", "user_knowledge", "assistant_knowledge")) + report["summarised_pages"]
        )
        profile = shared.get(profile_id(Scope.coerce(scope)), scope=scope)
        assert profile.metadata["memoryos"] == "profile" and user.capitalize() in profile.text
    assert profile_id(Scope.coerce(ALICE)) != profile_id(Scope.coerce(BOB)) != PROFILE_ID
    with pytest.raises(NotFoundError):
        shared.get(profile_id(Scope.coerce(BOB)), scope=ALICE)


def test_each_scope_keeps_its_own_stm_window(shared):
    """bob's inserts never push alice's pages out of her window (the fifo's capacity is not used)."""
    stm = shared.collection.ids(index="memoryos.stm")
    assert len(stm) == 4  # two per user
    with shared.collection.scoped(ALICE):
        assert shared.collection.ids(index="memoryos.stm") == [f"alice-{N - 2}", f"alice-{N - 1}"]
    for i in range(N, N + 5):
        insert(shared, "bob", i)
    with shared.collection.scoped(ALICE):
        assert shared.collection.ids(index="memoryos.stm") == [f"alice-{N - 2}", f"alice-{N - 1}"]


def test_retrieve_never_returns_another_scopes_records(shared):
    for scope, other in ((ALICE, "bob"), (BOB, "alice")):
        for q in [*QUERIES, "Bob", "Alice", "bobcanary"]:
            found = shared.retrieve(q, k=100, scope=scope, chain=True)
            assert found
            for r in found:
                assert scope_of(shared, r["id"]) == scope and other not in r["id"] and other not in r["text"].lower()
                if r.get("chain") and r["chain"]["prev"]:
                    assert r["chain"]["prev"].startswith(scope["user_id"])


def test_the_state_view_serves_each_scope_its_own_state(shared):
    """A read for bob right after one for alice (no commit in between) is bob's state, not alice's cached copy."""
    service = shared.service
    with shared.collection.scoped(ALICE):
        alice = dict(service.state.items())
    with shared.collection.scoped(BOB):
        bob = dict(service.state.items())
    assert alice != bob and alice["last_page"].startswith("alice-") and bob["last_page"].startswith("bob-")
    assert alice == shared.collection.store.state_items('memoryos@scope:{"user_id": "alice"}')
    with shared.collection.scoped(ALICE):
        assert service.state.items() == alice


def test_forgetting_bob_leaves_nothing_of_bob_and_alice_unchanged(shared, opener, tmp_path):
    for scope in (ALICE, BOB):  # before: each scope's results are those of a memory where the other never existed
        with alone(opener, tmp_path / scope["user_id"], scope["user_id"]) as solo:
            assert results(shared, scope) == results(solo, scope)
    before = results(shared, ALICE)
    gone = shared.delete(scope=BOB)
    assert gone > 0
    assert shared.count(scope=BOB) == 0
    store = shared.collection.store
    for rid in store.ids():
        record = store.get([rid])[0]
        assert scope_of(shared, rid) != BOB and "bob" not in record.text.lower() and "bob" not in json.dumps(record.metadata).lower()
    owners = [namespace_scope(ns) for ns in store.state_namespaces()]
    assert not [o for o in owners if o is not None and o.as_dict().get("user_id") == "bob"]
    assert results(shared, ALICE) == before
    with alone(opener, tmp_path / "alice-again", "alice") as solo:
        assert results(shared, ALICE) == results(solo, ALICE)
    assert shared.retrieve("pixel mortgage bobcanary", k=50, scope=BOB) == []
    with opener(tmp_path / "bob-anew", SERVICE) as fresh:
        for m in (shared, fresh):  # bob starts again from nothing: his forgotten state is not resumed
            for i in range(100, 106):
                insert(m, "bob", i)
        assert results(shared, BOB) == results(fresh, BOB)


def test_insert_and_retrieve_refuse_unknown_keywords(opener, tmp_path):
    with opener(tmp_path, SERVICE) as m:
        with pytest.raises(ValidationError, match="insert"):
            m.insert("hello there", scope=ALICE, wher={"a": 1})
        with pytest.raises(ValidationError, match="retrieve"):
            m.retrieve("hello", scope=ALICE, wher={"a": 1})
        rid = m.insert("I like tea", scope=ALICE, id="t1", links=[], vectors=None)
        assert rid == "t1" and m.retrieve("tea", scope=ALICE)[0]["id"] == "t1"


def assert_searched_with_its_text(m, rid: str, text: str) -> None:
    """The MTM index and the service's page vector (cached per scope) follow the page's new text."""
    c = m.collection
    with c.scoped(ALICE):
        assert c.retrieve(text, index="memoryos.mtm", k=1)[0].id == rid
        m.service.retrieve(text, k=5)  # fills the page vector cache if the page's segment is searched
        stored = unit(c.vectors([rid], "default")[0][0])
        assert np.allclose(m.service._page_matrix([rid])[0], stored)
        assert np.allclose(stored, unit(c.spaces["default"].embed_documents([text])[0]))


def test_upsert_places_new_records_in_the_stm_and_rewrites_existing_ones_in_place(opener, tmp_path):
    with opener(tmp_path, SERVICE) as m:
        for i in range(6):
            insert(m, "alice", i)
        members = m.collection.store.memberships
        new = m.upsert({"id": "fresh", "text": "Alice: I bought a kayak"}, scope=ALICE)
        assert new == "fresh" and set(members(["fresh"])["fresh"]) == {"memoryos.stm"}  # not every index
        moved = m.collection.ids(index="memoryos.mtm", scope=ALICE)[0]
        m.upsert({"id": moved, "text": "Alice: I sold the violin"}, scope=ALICE)
        assert set(members([moved])[moved]) == {"memoryos.mtm"}
        assert_searched_with_its_text(m, moved, "Alice: I sold the violin")
        updated = m.update(moved, text="Alice: I sold the cello", scope=ALICE)
        assert updated.text.endswith("cello") and set(members([moved])[moved]) == {"memoryos.mtm"}
        assert_searched_with_its_text(m, moved, "Alice: I sold the cello")
        with pytest.raises(NotFoundError):
            m.update(moved, text="hijacked", scope=BOB)
        with pytest.raises(NotFoundError):
            m.upsert({"id": moved, "text": "hijacked"}, scope=BOB)
        assert m.get(moved).text.endswith("cello")


def test_deleting_pages_takes_them_out_of_segments_and_chains(opener, tmp_path):
    with opener(tmp_path, {**SERVICE, "heat_threshold": None, "segment_threshold": -1.0, "mtm_capacity": 1}) as m:
        for i in range(8):
            insert(m, "alice", i)
        c = m.collection
        mtm = c.ids(index="memoryos.mtm", scope=ALICE)
        victim = mtm[1]
        assert m.delete(victim, scope=ALICE) == 1
        with c.scoped(ALICE):
            state = m.service.state.items()
            assert f"p:{victim}" not in state
            assert all(victim not in seg["pages"] for k, seg in state.items() if k.startswith("s:"))
            pages = {k[2:]: v for k, v in state.items() if k.startswith("p:")}
            for pid, p in pages.items():
                assert p["next"] != victim and p["prev"] != victim
                if p["next"]:
                    assert pages[p["next"]]["prev"] == pid
        for i in range(8, 14):  # the segment holding the deleted page is summarised later without error
            insert(m, "alice", i)
        assert m.service.report(scope=ALICE)["evicted_segments"] > 0


def test_opening_records_of_another_service_says_so(opener, tmp_path):
    with opener(tmp_path, {"kind": "default"}, indexes={"dense": {"kind": "exact", "space": "default"}}) as m:
        m.insert(["Alice likes tea", "Bob likes coffee"])
    with pytest.warns(ForeignRecordsWarning, match="2 record"):
        m = opener(tmp_path, SERVICE)
    with m:
        assert m.retrieve("tea") == []
        assert m.service.report()["outside_tiers"] == 2


CRASH_SERVICE = {"kind": "memoryos", "stm_capacity": 2, "heat_threshold": None, "clock": "event"}
CRASH = """
import os, sys, memcore
from memcore import Collection
where = sys.argv[2]
real = Collection.move
def move(self, *args, **kwargs):
    if where == "after":
        real(self, *args, **kwargs)
    os._exit(7)  # killed: no close, no flush
Collection.move = move
m = memcore.open({"indexes": {}, "service": SERVICE}, path=sys.argv[1])
for i in range(5):
    m.insert(f"Alice: I planted tulip number {i}", metadata={"session": 1, "timestamp": i}, id=f"alice-{i}", scope={"user_id": "alice"})
"""


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_kill_around_the_stm_to_mtm_move_leaves_every_page_in_exactly_one_tier(opener, tmp_path, where):
    script = textwrap.dedent(CRASH).replace("SERVICE", repr(CRASH_SERVICE))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), where], capture_output=True, text=True, timeout=300)
    assert done.returncode == 7, done.stderr[-2000:]
    with opener(tmp_path, CRASH_SERVICE) as m:
        c = m.collection
        inserted = set(c.ids(scope=ALICE))
        assert inserted == {"alice-0", "alice-1", "alice-2"}  # the third insert was killed in its move
        stm, mtm = set(c.ids(index="memoryos.stm")), set(c.ids(index="memoryos.mtm"))
        assert not (stm & mtm) and stm | mtm == inserted
        with c.scoped(ALICE):
            state = m.service.state.items()
            assert ("alice-0" in mtm) == (where == "after") == ("p:alice-0" in state)
        for i in range(3, 8):
            insert_page = {"session": 1, "timestamp": i}
            m.insert(f"Alice: I planted tulip number {i}", metadata=insert_page, id=f"alice-{i}", scope=ALICE)
        stm, mtm = set(c.ids(index="memoryos.stm")), set(c.ids(index="memoryos.mtm"))
        assert len(stm) == 2 and not (stm & mtm) and stm | mtm == {f"alice-{i}" for i in range(8)}
        with c.scoped(ALICE):
            state = m.service.state.items()
            assert {k[2:] for k in state if k.startswith("p:")} == mtm and "pending" not in state
