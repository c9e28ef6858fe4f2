"""The ``hyperamy`` service per scope: alice never sees bob's particles, her results are the
ones she gets alone, forgetting bob leaves her as she was, unknown keywords are refused and
another scope's id is unknown."""

from __future__ import annotations

import pytest

import memcore
from memcore import NotFoundError, ValidationError

ALICE, BOB = {"user_id": "alice"}, {"user_id": "bob"}
TEXTS = [
    "I am so angry about the cancelled trip",
    "a quiet afternoon reading in the garden",
    "shouting match with the landlord",
    "the joy of seeing old friends again",
    "nervous before the job interview",
    "calm walk along the river at dusk",
]


def settings():
    return {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}, "service": {"kind": "hyperamy"}}


def insert(m, who, i):
    scope, mark = (ALICE, "") if who == "alice" else (BOB, " zebra")
    m.insert(TEXTS[i] + mark, metadata={"owner": who}, id=f"{who[0]}{i}", v=0.5 + 0.25 * i, T=0.5, born=float(i), scope=scope)


def alice_results(m):
    out = []
    for q in TEXTS:
        results = m.retrieve(q, k=6, v=1.0, t_now=10.0, scope=ALICE)
        assert all(r["id"].startswith("a") and r["metadata"] == {"owner": "alice"} for r in results), results
        out.append([(r["id"], round(r["score"], 6)) for r in results])
    return out


def test_alice_sees_what_she_would_see_alone_and_forgetting_bob_keeps_it(tmp_path):
    with memcore.open(settings(), path=tmp_path / "alone") as alone:
        for i in range(len(TEXTS)):
            insert(alone, "alice", i)
        expected = alice_results(alone)
    with memcore.open(settings(), path=tmp_path / "both") as both:
        for i in range(len(TEXTS)):
            insert(both, "bob", i)
            insert(both, "alice", i)
        assert both.collection.get("b1").scope.as_dict() == BOB
    with memcore.open(settings(), path=tmp_path / "both") as both:
        assert alice_results(both) == expected
        assert both.forget(BOB)["records"] == len(TEXTS)
        assert both.count(scope=BOB) == 0 and [ns for ns in both.collection.store.state_namespaces() if "bob" in ns] == []
        assert alice_results(both) == expected


def test_verbs_refuse_what_they_do_not_know_and_other_scopes(tmp_path):
    with memcore.open(settings(), path=tmp_path) as m:
        insert(m, "alice", 0)
        insert(m, "bob", 1)
        with pytest.raises(ValidationError, match="wher"):
            m.retrieve(TEXTS[0], wher={"owner": "alice"}, scope=ALICE)
        with pytest.raises(ValidationError, match="colour"):
            m.insert("x", colour="red", scope=ALICE)
        with pytest.raises(NotFoundError):
            m.update("b1", metadata={"owner": "alice"}, scope=ALICE)
        with pytest.raises(NotFoundError):
            m.delete(["b1"], scope=ALICE)
        with pytest.raises(ValidationError, match="upsert"):
            m.upsert({"id": "b1", "text": "mine"}, scope=ALICE)
        updated = m.update("a0", metadata={"owner": "alice", "edited": True}, scope=ALICE)
        assert updated.metadata["edited"] is True and updated.metadata["hyperamy_v"] == 0.5  # the particle keeps its v, T, born
        assert m.retrieve(TEXTS[0], k=1, v=0.5, t_now=0.0, scope=ALICE)[0]["metadata"] == {"owner": "alice", "edited": True}
