"""Ids across tenants: a tenant's ids live in a namespace of its scope (``memcore_server.idspace``).

alice guesses bob's ids (the ids bob wrote, the ids as stored, content ids, ids written in
process) with every verb, and gets exactly what an id nobody wrote gives: the same status,
the same body (the id masked), the same store lookups. Writing an id bob uses creates
alice's own record. Each tenant reads its ids back exactly as it wrote them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import memcore
from memcore_server.idspace import MAX_ID_CHARS, id_prefix

ALICE, BOB = {"user_id": "alice"}, {"user_id": "bob"}
UNKNOWN = "zz-nobody"


@pytest.fixture
def bob_ids(server: Any, keys: dict[str, str], memory: memcore.Memory) -> dict[str, str]:
    """bob's records, by how alice might learn or guess their ids: his own ids (b1..b6), as
    stored (prefixed), a content id (no id given) and an id written in process."""
    items = [{"text": f"bob's secret number {i}", "id": f"b{i}", "metadata": {"id": f"b{i}", "kind": "secret"}} for i in range(1, 7)]
    server.ok(server.call("POST", "/v1/insert_many", keys["bob"], {"items": items}))
    derived = server.ok(server.call("POST", "/v1/insert", keys["bob"], {"text": "bob's derived secret", "metadata": {"kind": "secret"}}))["id"]
    memory.insert([{"text": "bob's in-process secret", "id": "legacy-b", "scope": BOB}])
    server.ok(server.call("POST", "/v1/insert_many", keys["alice"], {"items": [{"text": "alice likes tea", "id": "a1"}]}))
    return {"own": "b1", "stored": id_prefix(BOB) + "b2", "derived": derived, "legacy": "legacy-b"}


def _masked(response: httpx.Response, guessed: str) -> tuple[int, str]:
    """What a client learns: the status and the body, with the id it sent masked."""
    return response.status_code, response.text.replace(json.dumps(guessed)[1:-1], "<ID>")


READS = [
    ("GET", "/v1/records/{id}", None),
    ("PATCH", "/v1/records/{id}", {"text": "hijacked"}),
    ("DELETE", "/v1/records/{id}", None),
    ("POST", "/v1/get", {"ids": ["{id}"]}),
    ("POST", "/v1/get", {"ids": ["a1", "{id}"]}),
    ("POST", "/v1/get", {"ids": ["{id}"], "where": {"kind": "secret"}}),
    ("POST", "/v1/get", {"where": {"id": "{id}"}}),
    ("POST", "/v1/update", {"id": "{id}", "metadata": {"owned": True}}),
    ("POST", "/v1/update", {"id": "{id}", "text": "mine", "scope": {"user_id": "alice"}}),
    ("POST", "/v1/delete", {"ids": ["{id}"]}),
    ("POST", "/v1/delete", {"ids": ["a1", "{id}"]}),
    ("POST", "/v1/delete", {"where": {"id": "{id}"}}),
    ("POST", "/v1/history", {"id": "{id}"}),
    ("POST", "/v1/count", {"where": {"id": "{id}"}}),
    ("POST", "/v1/search", {"query": "secret number", "where": {"id": "{id}"}}),
    ("POST", "/v1/search", {"query": "secret number", "where": {"id": "{id}"}, "explain": True}),
    ("POST", "/v1/retrieve_many", {"queries": ["secret"], "where": {"id": "{id}"}}),
    ("POST", "/v1/insert", {"text": "a link to it", "links": ["{id}"]}),
    ("POST", "/v1/insert_many", {"items": [{"text": "a link to it", "links": [{"target": "{id}", "relation": "knows"}]}]}),
    ("POST", "/v1/upsert", {"items": [{"text": "a link to it", "id": "a1", "links": ["{id}"]}]}),
]


def _fill(body: Any, guessed: str) -> Any:
    return None if body is None else json.loads(json.dumps(body).replace("{id}", guessed))


def _counted(store: Any, *request: Any) -> tuple[httpx.Response, list[int]]:
    """The response to ``server.call(*request)`` (``request``: the server, then the call's
    arguments) and the store lookups it made (the number of ids of each)."""
    calls: list[int] = []
    real_get = store.get

    def counted(ids: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(ids))
        return real_get(ids, *args, **kwargs)

    store.get = counted
    try:
        server, *arguments = request
        return server.call(*arguments), calls
    finally:
        del store.get


def test_every_verb_answers_a_guessed_id_as_an_unknown_one(server: Any, keys: dict[str, str], memory: memcore.Memory, bob_ids: dict[str, str]) -> None:
    alice = keys["alice"]
    store = memory.collection._store
    for method, path, body in READS:
        for kind, guessed in bob_ids.items():
            answers, lookups = [], []
            for probe in (guessed, UNKNOWN):
                response, calls = _counted(store, server, method, path.replace("{id}", probe), alice, _fill(body, probe))
                answers.append(_masked(response, probe))
                lookups.append(calls)
                told = answers[-1][1]  # what the server said besides the id alice sent
                assert "bob" not in told and "secret" not in told, (method, path, kind, told)  # no text, scope or metadata of bob's
                assert "~" not in told, (method, path, kind, told)  # no stored id
            assert answers[0] == answers[1], (method, path, kind, answers)
            assert lookups[0] == lookups[1], (method, path, kind, lookups)  # the same store lookups: the same work
    assert memory.count(scope=BOB) == 8
    assert [r.text for r in memory.get(scope=BOB)][:2] == ["bob's secret number 1", "bob's secret number 2"]  # type: ignore[union-attr]


@pytest.mark.parametrize("path", ["/v1/insert", "/v1/insert_many", "/v1/upsert"])
def test_writing_an_id_another_tenant_uses_makes_a_record_of_ones_own(
    server: Any, keys: dict[str, str], memory: memcore.Memory, bob_ids: dict[str, str], path: str
) -> None:
    alice, bob = keys["alice"], keys["bob"]
    for kind, guessed in bob_ids.items():
        answers = []
        for probe in (guessed, f"{UNKNOWN}-{kind}"):
            item = {"text": f"alice's note {kind}", "id": probe}
            body = {**item} if path == "/v1/insert" else {"items": [item]}
            response = server.call("POST", path, alice, body)
            answers.append(_masked(response, probe))
            assert server.ok(server.call("GET", f"/v1/records/{probe}", alice))["text"] == f"alice's note {kind}"
        assert answers[0] == answers[1] and answers[0][0] == 200, (path, kind, answers)
    # bob's records are untouched and still his, under the ids he wrote
    assert server.ok(server.call("GET", "/v1/records/b1", bob))["text"] == "bob's secret number 1"
    assert server.ok(server.call("GET", f"/v1/records/{bob_ids['derived']}", bob))["text"] == "bob's derived secret"
    assert server.ok(server.call("GET", "/v1/records/legacy-b", bob))["text"] == "bob's in-process secret"
    assert memory.count(scope=BOB) == 8 and memory.count(scope=ALICE) == 1 + 2 * len(bob_ids)
    # each sees its own b1
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, {}))["records"]} == {"a1", *bob_ids.values(), *(f"{UNKNOWN}-{k}" for k in bob_ids)}


def test_a_tenant_reads_its_ids_back_exactly_as_written(server: Any, keys: dict[str, str], memory: memcore.Memory) -> None:
    alice, ops = keys["alice"], keys["ops"]
    odd = ["a1", "~0123456789abcdef~x", "with space", "ünïcode", "x" * (MAX_ID_CHARS - len(id_prefix(ALICE)))]
    items = [{"text": f"note {i}", "id": rid, "links": [odd[0]] if i else []} for i, rid in enumerate(odd)]
    assert server.ok(server.call("POST", "/v1/insert_many", alice, {"items": items}))["ids"] == odd
    derived = server.ok(server.call("POST", "/v1/insert", alice, {"text": "no id given", "links": [{"target": "a1", "relation": "about"}]}))["id"]
    records = server.ok(server.call("POST", "/v1/get", alice, {"ids": [*odd, derived]}))["records"]
    assert [r["id"] for r in records] == [*odd, derived]
    assert [link["target"] for link in records[1]["links"]] == ["a1"] and records[-1]["links"][0] == {"target": "a1", "relation": "about", "weight": 1.0}
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/search", alice, {"query": "note", "k": 10}))["results"]} == {*odd, derived}
    hits = server.ok(server.call("POST", "/v1/search", alice, {"query": "note", "k": 10, "explain": True}))["results"]
    assert {h["id"] for h in hits} == {*odd, derived} and all(h["record"]["id"] == h["id"] for h in hits)
    assert all(h["explanation"].startswith(h["id"] + ":") for h in hits)
    many = server.ok(server.call("POST", "/v1/retrieve_many", alice, {"queries": ["note 1"], "k": 10}))["results"]
    assert {r["id"] for r in many[0]} == {*odd, derived}
    assert server.ok(server.call("POST", "/v1/update", alice, {"id": "with space", "text": "changed"}))["record"]["id"] == "with space"
    assert server.ok(server.call("POST", "/v1/upsert", alice, {"items": [{"text": "upserted", "id": "ünïcode"}]}))["ids"] == ["ünïcode"]
    versions = server.ok(server.call("POST", "/v1/history", alice, {"id": "ünïcode"}))["versions"]
    assert [(v["id"], v["op"]) for v in versions] == [("ünïcode", "insert"), ("ünïcode", "update")]
    assert server.ok(server.call("POST", "/v1/delete", alice, {"ids": ["a1", "with space"]})) == {"deleted": 2}
    assert [v["op"] for v in server.ok(server.call("POST", "/v1/history", alice, {"id": "a1"}))["versions"]] == ["insert", "delete"]
    # duplicates are still duplicates within the tenant, named by the tenant's id
    server.ok(server.call("POST", "/v1/insert", alice, {"text": "first", "id": "dup"}))
    refused = server.call("POST", "/v1/insert", alice, {"text": "second", "id": "dup"})
    assert refused.status_code == 409 and "'dup'" in refused.json()["error"]["message"] and "~" not in refused.text
    # too long by the prefix: a ValidationError naming this server's limit
    too_long = server.call("POST", "/v1/insert", alice, {"text": "long", "id": "y" * (MAX_ID_CHARS - len(id_prefix(ALICE)) + 1)})
    assert too_long.status_code == 400 and str(MAX_ID_CHARS - len(id_prefix(ALICE))) in too_long.json()["error"]["message"]
    # the admin sees the stored ids
    stored = {r["id"] for r in server.ok(server.call("POST", "/v1/get", ops, {"scope": ALICE}))["records"]}
    assert id_prefix(ALICE) + "ünïcode" in stored and derived in stored
    assert memory.get(id_prefix(ALICE) + "ünïcode").text == "upserted"  # type: ignore[union-attr]


def test_records_written_in_process_keep_their_ids(server: Any, keys: dict[str, str], memory: memcore.Memory) -> None:
    """Records of the tenant's scope written before the server (or by an admin) carry no prefix:
    the tenant sees them under their stored ids and reaches them by those."""
    alice, ops = keys["alice"], keys["ops"]
    memory.insert([{"text": "alice's old note", "id": "old-1", "scope": ALICE}, {"text": "unscoped", "id": "old-2"}])
    server.ok(server.call("POST", "/v1/insert", ops, {"text": "written by ops for alice", "id": "ops-1", "scope": ALICE}))
    assert {r["id"] for r in server.ok(server.call("POST", "/v1/get", alice, {}))["records"]} == {"old-1", "ops-1"}
    assert server.ok(server.call("GET", "/v1/records/old-1", alice))["text"] == "alice's old note"
    assert server.call("GET", "/v1/records/old-2", alice).status_code == 404
    assert server.ok(server.call("PATCH", "/v1/records/ops-1", alice, {"text": "edited by alice"}))["id"] == "ops-1"
    assert server.ok(server.call("POST", "/v1/upsert", alice, {"items": [{"text": "replaced", "id": "old-1"}]}))["ids"] == ["old-1"]
    assert memory.get("old-1").text == "replaced" and memory.get("ops-1").text == "edited by alice"  # type: ignore[union-attr]
    assert server.call("POST", "/v1/insert", alice, {"text": "another", "id": "old-1"}).status_code == 409  # one id, one record
    assert [v["op"] for v in server.ok(server.call("POST", "/v1/history", alice, {"id": "old-1"}))["versions"]] == ["insert", "update"]
    assert server.ok(server.call("DELETE", "/v1/records/old-1", alice)) == {"deleted": 1}
    assert memory.count() == 2


def test_two_keys_of_one_scope_share_their_ids(served: Any, memory: memcore.Memory) -> None:
    from memcore.plugin import hash_api_key

    keys = {name: {"sha256": hash_api_key(f"key-{name}-0123456789"), "scope": ALICE} for name in ("laptop", "phone")}
    server = served(memory, keys=keys)
    server.ok(server.call("POST", "/v1/insert", "key-laptop-0123456789", {"text": "from the laptop", "id": "n1"}))
    assert server.ok(server.call("GET", "/v1/records/n1", "key-phone-0123456789"))["text"] == "from the laptop"
