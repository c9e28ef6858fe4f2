"""Tenant isolation: two keys bound to two users, every verb, ids guessed across tenants.

A tenant must not read, update, count or delete another tenant's memories, nor learn that
their ids exist: a guessed id of bob's answers alice exactly as an id nobody wrote.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

import memcore
from memcore_server.idspace import id_prefix


def stored(user: str, rid: str) -> str:
    """The stored id of ``rid`` written with the key of ``user`` (its namespace, memcore_server.idspace)."""
    return id_prefix({"user_id": user}) + rid


def _unknown(response: httpx.Response) -> tuple[int, str, str]:
    """What a client learns from a refusal: status, error type, and the message with the id masked."""
    body = response.json()["error"]
    return response.status_code, body["type"], body["message"].replace("b1", "ID").replace("zz-none", "ID")


def test_no_key_or_a_wrong_key_is_401_and_the_key_is_not_echoed(server: Any, memory: memcore.Memory) -> None:
    for headers in ({}, {"authorization": "Bearer not-a-key"}, {"authorization": "Basic abc"}, {"authorization": "Bearer"}):
        for method, path, body in (("POST", "/v1/count", {}), ("GET", "/v1/info", None), ("POST", "/v1/insert", {"text": "x"}), ("GET", "/v1/records/x", None)):
            response = httpx.request(method, server.url + path, json=body, headers=headers, timeout=30)
            assert response.status_code == 401, (headers, path, response.text)
            assert response.json()["error"]["type"] == "AuthenticationError"
            assert response.headers["www-authenticate"] == "Bearer"
            assert "not-a-key" not in response.text
    assert memory.count() == 0


def test_a_tenant_sees_only_its_own_records(server: Any, two_tenants: dict[str, str]) -> None:
    alice = two_tenants["alice"]
    assert server.ok(server.call("POST", "/v1/count", alice, {}))["count"] == 2
    assert server.ok(server.call("POST", "/v1/count", alice, {"where": {"kind": "pref"}}))["count"] == 2
    assert server.ok(server.call("POST", "/v1/count", alice, {"index": "vector"}))["count"] == 2
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, {}))["records"]} == {"a1", "a2"}
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, {"where": {"kind": "pref"}}))["records"]} == {"a1", "a2"}
    found = server.ok(server.call("POST", "/v1/search", alice, {"query": "bob likes tea", "k": 10}))["results"]
    assert {r["id"] for r in found} == {"a1", "a2"}
    explained = server.ok(server.call("POST", "/v1/search", alice, {"query": "bob likes tea", "k": 10, "explain": True}))["results"]
    assert {r["id"] for r in explained} == {"a1", "a2"}
    one_index = server.ok(server.call("POST", "/v1/search", alice, {"query": "bob", "k": 10, "explain": True, "index": "vector"}))["results"]
    assert {r["id"] for r in one_index} == {"a1", "a2"}
    admin = server.ok(server.call("POST", "/v1/count", two_tenants["ops"], {}))["count"]
    assert admin == 4


def test_guessed_ids_of_another_tenant_look_unknown(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    alice = two_tenants["alice"]
    probes = [
        ("GET", "/v1/records/{id}", None),
        ("PATCH", "/v1/records/{id}", {"text": "hijacked"}),
        ("DELETE", "/v1/records/{id}", None),
        ("POST", "/v1/get", {"ids": ["{id}"]}),
        ("POST", "/v1/get", {"ids": ["a1", "{id}"]}),
        ("POST", "/v1/update", {"id": "{id}", "metadata": {"owned": True}}),
        ("POST", "/v1/delete", {"ids": ["{id}"]}),
        ("POST", "/v1/delete", {"ids": ["a1", "{id}"]}),
        ("POST", "/v1/history", {"id": "{id}"}),
        ("POST", "/v1/history", {"id": "{id}", "scope": {"user_id": "alice"}}),
        ("POST", "/v1/get", {"ids": ["{id}"], "offset": 0, "where_document": {"$contains": "tea"}}),
    ]
    for method, path, body in probes:
        answers = []
        for guessed in ("b1", "zz-none"):
            filled = path.replace("{id}", guessed)
            payload = None if body is None else json.loads(json.dumps(body).replace("{id}", guessed))
            answers.append(_unknown(server.call(method, filled, alice, payload)))
        assert answers[0] == answers[1], (method, path, answers)
        assert answers[0][0] == 404 and answers[0][1] == "NotFoundError"
    # an upsert creates an unknown id; bob's id is as unknown: alice gets her own b1, bob keeps his
    upsert = {"items": [{"text": "mine now", "id": "b1"}], "scope": {"user_id": "alice"}}
    assert server.ok(server.call("POST", "/v1/upsert", alice, upsert)) == {"ids": ["b1"]}
    upsert["items"][0]["id"] = "zz-none"  # type: ignore[index]
    assert server.ok(server.call("POST", "/v1/upsert", alice, upsert)) == {"ids": ["zz-none"]}
    bob_record = memory.get(stored("bob", "b1"))
    assert bob_record.text == "bob likes tea number 1" and bob_record.metadata == {"kind": "pref"} and bob_record.scope == memcore.Scope(user_id="bob")
    assert memory.count() == 4 + 2  # alice's upserts created her own records, in alice's scope
    assert memory.get(stored("alice", "zz-none")).scope == memory.get(stored("alice", "b1")).scope == memcore.Scope(user_id="alice")


def test_a_scope_outside_the_key_is_403_and_changes_nothing(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    alice = two_tenants["alice"]
    bob_scope = {"user_id": "bob"}
    refused = [
        ("POST", "/v1/count", {"scope": bob_scope}),
        ("POST", "/v1/get", {"scope": bob_scope}),
        ("POST", "/v1/search", {"query": "tea", "scope": bob_scope}),
        ("POST", "/v1/search", {"query": "tea", "scope": bob_scope, "explain": True}),
        ("POST", "/v1/retrieve_many", {"queries": ["tea", "bob"], "scope": bob_scope}),
        ("POST", "/v1/history", {"id": "b1", "scope": bob_scope}),
        ("POST", "/v1/delete", {"where_document": {"$contains": "tea"}, "scope": bob_scope}),
        ("POST", "/v1/delete", {"scope": bob_scope}),
        ("POST", "/v1/delete", {"where": {"kind": "pref"}, "scope": bob_scope}),
        ("POST", "/v1/forget", {"scope": bob_scope}),
        ("POST", "/v1/update", {"id": "a1", "text": "x", "scope": bob_scope}),
        ("POST", "/v1/upsert", {"items": [{"text": "x"}], "scope": bob_scope}),
        ("POST", "/v1/insert", {"text": "planted in bob's memory", "scope": bob_scope}),
        ("POST", "/v1/insert_many", {"items": [{"text": "planted", "scope": bob_scope}]}),
        ("POST", "/v1/upsert", {"items": [{"text": "planted", "id": "p", "scope": bob_scope}]}),
    ]
    for method, path, body in refused:
        response = server.call(method, path, alice, body)
        assert response.status_code == 403, (path, body, response.text)
        assert response.json()["error"]["type"] == "PermissionDeniedError"
    assert memory.count() == 4 and memory.count(scope=bob_scope) == 2
    assert memory.get(stored("alice", "a1")).text == "alice likes tea number 1"


def test_a_narrower_scope_inside_the_key_is_allowed(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    alice = two_tenants["alice"]
    narrow = {"user_id": "alice", "run_id": "r1"}
    rid = server.ok(server.call("POST", "/v1/insert", alice, {"text": "a run memory", "scope": narrow}))["id"]
    assert memory.get(rid).scope == memcore.Scope(user_id="alice", run_id="r1")
    assert server.ok(server.call("POST", "/v1/count", alice, {"scope": {"run_id": "r1"}}))["count"] == 1
    assert server.ok(server.call("POST", "/v1/forget", alice, {"scope": narrow}))["records"] == 1
    assert memory.count() == 4


def test_deletes_and_forgets_stay_inside_the_tenant(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    alice, bob = two_tenants["alice"], two_tenants["bob"]
    assert server.ok(server.call("POST", "/v1/delete", alice, {"where": {"kind": "pref"}})) == {"deleted": 2}
    assert memory.count() == 2 and {r.id for r in memory.get()} == {stored("bob", "b1"), stored("bob", "b2")}  # type: ignore[union-attr]
    assert server.ok(server.call("POST", "/v1/delete", alice, {"where": {}})) == {"deleted": 0}
    assert server.ok(server.call("POST", "/v1/forget", bob, {"scope": {"user_id": "bob"}}))["records"] == 2
    assert memory.count() == 0


def test_writes_are_stamped_with_the_key_scope(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    bob = two_tenants["bob"]
    one = server.ok(server.call("POST", "/v1/insert", bob, {"text": "no scope given"}))["id"]
    ids = server.ok(server.call("POST", "/v1/upsert", bob, {"items": [{"text": "upserted", "id": "u1"}]}))["ids"]
    assert ids == ["u1"] and memory.get(one).scope == memcore.Scope(user_id="bob") and memory.get(stored("bob", "u1")).scope == memcore.Scope(user_id="bob")
    # the same text from two tenants is two records (content ids include the scope)
    same = server.ok(server.call("POST", "/v1/insert", two_tenants["alice"], {"text": "no scope given"}))["id"]
    assert same != one and memory.count() == 4 + 3


def test_new_verbs_stay_inside_the_tenant(server: Any, two_tenants: dict[str, str], memory: memcore.Memory) -> None:
    """history, retrieve_many, pages and text filters see only the caller's records."""
    alice, bob = two_tenants["alice"], two_tenants["bob"]
    memory.update(stored("bob", "b1"), text="bob now likes coffee")
    versions = server.ok(server.call("POST", "/v1/history", alice, {"id": "a1"}))["versions"]
    assert [v["op"] for v in versions] == ["insert"] and versions[0]["scope"] == {"user_id": "alice"}
    assert [v["op"] for v in server.ok(server.call("POST", "/v1/history", bob, {"id": "b1"}))["versions"]] == ["insert", "update"]
    assert [v["op"] for v in server.ok(server.call("POST", "/v1/history", two_tenants["ops"], {"id": stored("bob", "b1")}))["versions"]] == ["insert", "update"]
    many = server.ok(server.call("POST", "/v1/retrieve_many", alice, {"queries": ["bob likes coffee", "tea"], "k": 10}))["results"]
    assert [{r["id"] for r in found} for found in many] == [{"a1", "a2"}, {"a1", "a2"}]
    assert [r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, {"offset": 1}))["records"]] == ["a2"]
    assert server.ok(server.call("POST", "/v1/get", alice, {"offset": 2}))["records"] == []
    tea = {"where_document": {"$contains": "likes"}}
    assert server.ok(server.call("POST", "/v1/count", alice, tea))["count"] == 2
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, tea))["records"]} == {"a1", "a2"}
    coffee = {"where_document": {"$contains": "coffee"}}
    assert server.ok(server.call("POST", "/v1/count", alice, coffee))["count"] == 0
    assert server.ok(server.call("POST", "/v1/search", alice, {"query": "coffee", **coffee}))["results"] == []
    assert server.ok(server.call("POST", "/v1/delete", alice, coffee)) == {"deleted": 0}
    assert server.ok(server.call("POST", "/v1/delete", alice, tea)) == {"deleted": 2}
    assert memory.count() == 2 and memory.get(stored("bob", "b1")).text == "bob now likes coffee"
    # alice's deleted record keeps its history (texts erased); bob's stays unknown to her
    assert [v["op"] for v in server.ok(server.call("POST", "/v1/history", alice, {"id": "a1"}))["versions"]] == ["insert", "delete"]
    assert _unknown(server.call("POST", "/v1/history", alice, {"id": "b1"})) == _unknown(server.call("POST", "/v1/history", alice, {"id": "zz-none"}))
