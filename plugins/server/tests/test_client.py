"""The client's transport: typed errors, retries of idempotent calls, the async client, its imports."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from typing import Any

import pytest

import memcore
from memcore import AuthenticationError, EndpointError, NotFoundError, PermissionDeniedError, StoreUnavailableError
from memcore_server import RemoteMemory
from memcore_server.client import AsyncRemoteMemory


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_refused_connections_become_store_unavailable() -> None:
    url = f"http://127.0.0.1:{_port()}"
    with RemoteMemory(url, retries=2, backoff_s=0.01) as remote:
        with pytest.raises(StoreUnavailableError, match="after 3 attempt"):
            remote.count()
        with pytest.raises(StoreUnavailableError, match="after 3 attempt"):
            remote.insert("nothing reached the server, so even an insert is retried")


def test_idempotent_calls_are_retried_on_503_and_writes_are_not(memory: memcore.Memory, served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = served(memory)
    calls = {"count": 0, "insert": 0}
    real_count = memory.count

    def flaky_count(**kw: Any) -> int:
        calls["count"] += 1
        if calls["count"] <= 2:
            raise StoreUnavailableError("the database restarts")
        return real_count(**kw)

    def failing_insert(*a: Any, **kw: Any) -> Any:
        calls["insert"] += 1
        raise StoreUnavailableError("the database restarts")

    monkeypatch.setattr(memory, "count", flaky_count)
    monkeypatch.setattr(memory, "insert", failing_insert)
    with RemoteMemory(server.url, retries=3, backoff_s=0.01) as remote:
        assert remote.count() == 0 and calls["count"] == 3
        with pytest.raises(StoreUnavailableError, match="restarts"):
            remote.insert("x")
        assert calls["insert"] == 1
    with RemoteMemory(server.url, retries=1, backoff_s=0.01) as remote:
        calls["count"] = 0
        with pytest.raises(StoreUnavailableError):
            remote.count()
        assert calls["count"] == 2


def test_server_failures_become_typed_errors(memory: memcore.Memory, served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = served(memory, request_timeout_s=0.2)
    with RemoteMemory(server.url, retries=0) as remote:

        def broken(**kw: Any) -> int:
            raise RuntimeError("boom")

        monkeypatch.setattr(memory, "count", broken)
        with pytest.raises(EndpointError) as failed:
            remote.count()
        assert failed.value.status == 500 and "boom" not in str(failed.value)

        def slow(**kw: Any) -> int:
            import time

            time.sleep(1)
            return 0

        monkeypatch.setattr(memory, "count", slow)
        with pytest.raises(EndpointError) as timed_out:
            remote.count()
        assert timed_out.value.status == 504


def test_keys_and_scopes_through_the_client(server: Any, keys: dict[str, str], memory: memcore.Memory) -> None:
    with RemoteMemory(server.url, retries=0) as anonymous:
        with pytest.raises(AuthenticationError):
            anonymous.count()
    with RemoteMemory(server.url, api_key="wrong", retries=0) as wrong:
        with pytest.raises(AuthenticationError):
            wrong.get("x")
    with RemoteMemory(server.url, api_key=keys["alice"]) as alice, RemoteMemory(server.url, api_key=keys["bob"]) as bob:
        assert keys["alice"] not in repr(alice)
        rid = alice.insert("alice's secret", metadata={"k": 1})
        assert alice.get(rid).scope == memcore.Scope(user_id="alice")
        with pytest.raises(NotFoundError):
            bob.get(rid)
        with pytest.raises(NotFoundError):
            bob.delete(rid)
        with pytest.raises(PermissionDeniedError):
            bob.count(scope={"user_id": "alice"})
        assert bob.count() == 0 and bob.retrieve("secret") == [] and alice.count() == 1
        assert alice.info()["caller"]["key"] == "alice"
    assert memory.count() == 1


def test_async_client(memory: memcore.Memory, served: Any) -> None:
    server = served(memory)

    async def run() -> None:
        async with AsyncRemoteMemory(server.url) as remote:
            assert (await remote.health()) == {"status": "ok"}
            ids = await remote.insert(["one memory", "another memory"])
            assert await remote.count() == 2
            assert (await remote.get(ids[0])).text == "one memory"
            results = await asyncio.gather(*(remote.retrieve("memory", k=1) for _ in range(8)))
            assert all(len(r) == 1 for r in results)
            hits = await remote.query("another", k=1)
            assert hits[0].id == ids[1]
            assert (await remote.update(ids[0], text="changed")).text == "changed"
            assert await remote.upsert({"text": "upserted", "id": "u"}) == "u"
            assert await remote.delete(ids) == 2
            assert (await remote.forget({"user_id": "nobody"}))["records"] == 0
            with pytest.raises(NotFoundError):
                await remote.get("missing")
            await remote.insert([{"text": f"page {i}", "id": f"p{i}"} for i in range(4)])
            assert [r.id for r in await remote.get(offset=1, limit=2, where_document={"$contains": "page"})] == ["p1", "p2"]
            assert await remote.count(where_document={"$contains": "page"}) == 4
            many = await remote.retrieve_many(["page 1", "page 3"], k=2, min_score=-1e9)
            assert [found[0]["id"] for found in many] == ["p1", "p3"]
            assert [v["op"] for v in await remote.history("u")] == ["insert"]
            assert await remote.delete(where_document={"$contains": "page"}) == 4

    asyncio.run(run())


VERBS = ("insert", "upsert", "update", "delete", "forget", "get", "count", "history", "retrieve", "retrieve_many", "query")


@pytest.mark.parametrize("client", [RemoteMemory, AsyncRemoteMemory])
@pytest.mark.parametrize("verb", VERBS)
def test_the_clients_take_the_arguments_of_memory(client: type, verb: str) -> None:
    """Every verb of the clients has Memory's parameters: names, kinds and defaults."""

    def shape(fn: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert shape(getattr(client, verb)) == shape(getattr(memcore.Memory, verb))


def test_the_client_imports_neither_fastapi_nor_uvicorn() -> None:
    code = "import sys, memcore_server, memcore_server.client; print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_request_body_is_the_json_json_dumps_would_send() -> None:
    """numpy arrays and numbers become lists and numbers, tuples lists, keys strings, NaN its
    constant; what ``json.dumps`` refuses (a datetime, a set, bytes, a complex) is a
    ValidationError before anything is sent."""
    import datetime
    import json
    import math

    import numpy as np

    from memcore_server.client import _json

    body = {
        "v": np.array([0.5, -1.25], dtype=np.float32),
        "rows": [np.array([1, 2], dtype=np.int64), (3, 4.5)],
        "i": np.int64(3),
        "b": np.bool_(True),
        "flags": np.array([True, False]),
        "objects": np.array([1.5, "x", None], dtype=object),
        "m": {1: "a", "é": [None, True]},
        "nan": float("nan"),
    }
    sent = json.loads(_json(body))
    assert math.isnan(sent.pop("nan"))
    assert sent == {
        "v": [0.5, -1.25],
        "rows": [[1, 2], [3, 4.5]],
        "i": 3,
        "b": True,
        "flags": [True, False],
        "objects": [1.5, "x", None],
        "m": {"1": "a", "é": [None, True]},
    }
    for bad in (datetime.datetime(2026, 1, 1), {1, 2}, b"bytes", 1j, np.array([1j]), np.array([datetime.date(2026, 1, 1)], dtype=object), [[object()]]):
        with pytest.raises(memcore.ValidationError, match="cannot send this value"):
            _json({"x": bad})
