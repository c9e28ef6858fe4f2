"""The MCP tools over streamable HTTP (``/mcp`` of ``memcore serve``, and ``memcore mcp
--transport http``), driven by the ``mcp`` SDK's own streamable-HTTP client against a real
uvicorn server on 127.0.0.1, with the API keys of the HTTP API."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import httpx
import pytest

import memcore
from memcore_server.app import create_mcp_app
from memcore_server.idspace import id_prefix

mcp = pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")
from mcp.client.streamable_http import streamable_http_client  # noqa: E402


def _content(result: Any) -> Any:
    assert not result.is_error, result
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return result.content[0].text


async def _with_session(url: str, key: str | None, body: Callable[[Any], Awaitable[Any]]) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def session(url: str, key: str | None, body: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``body(session)`` in an initialized MCP client session on ``url`` with ``key``."""
    return asyncio.run(_with_session(url, key, body))


def test_the_tools_over_http_in_the_key_scope(server: Any, keys: dict[str, str], memory: memcore.Memory) -> None:
    url = server.url + "/mcp"

    async def alice(s: Any) -> str:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"remember", "search", "get", "forget", "list_memories"}
        assert all(len(t.description or "") > 30 for t in tools.values())
        assert all("ctx" not in (t.input_schema or {}).get("properties", {}) for t in tools.values())
        rid = _content(await s.call_tool("remember", {"text": "Alice prefers green tea", "metadata": {"topic": "drinks"}}))
        _content(await s.call_tool("remember", {"text": "Alice flies to Lisbon in May"}))
        found = _content(await s.call_tool("search", {"query": "what tea does alice like", "k": 1}))
        assert found[0]["id"] == rid and found[0]["text"] == "Alice prefers green tea"
        assert _content(await s.call_tool("get", {"id": rid}))["scope"] == {"user_id": "alice"}
        assert [m["id"] for m in _content(await s.call_tool("list_memories", {"where": {"topic": "drinks"}}))] == [rid]
        assert "forgot" in _content(await s.call_tool("forget", {"id": rid}))
        missing = await s.call_tool("get", {"id": rid})
        assert missing.is_error and "NotFoundError" in missing.content[0].text
        bad = await s.call_tool("remember", {"text": "   "})
        assert bad.is_error and "ValidationError" in bad.content[0].text
        return str(rid)

    forgotten = session(url, keys["alice"], alice)
    assert [r.scope for r in memory.get()] == [memcore.Scope(user_id="alice")]  # type: ignore[union-attr]
    assert memory.get()[0].text == "Alice flies to Lisbon in May"  # type: ignore[index]
    assert forgotten not in {r.id for r in memory.get()}  # type: ignore[union-attr]


def test_two_keys_are_isolated(server: Any, keys: dict[str, str], memory: memcore.Memory) -> None:
    url = server.url + "/mcp"

    async def bob(s: Any) -> str:
        return str(_content(await s.call_tool("remember", {"text": "bob's secret plan is to sail"})))

    bob_id = session(url, keys["bob"], bob)
    # an id bob chose over the HTTP API, and one of his written in process
    ok = httpx.post(server.url + "/v1/insert", json={"text": "bob's chosen id", "id": "b1"}, headers={"authorization": f"Bearer {keys['bob']}"}, timeout=30)
    assert ok.status_code == 200 and memory.get(id_prefix({"user_id": "bob"}) + "b1").text == "bob's chosen id"  # type: ignore[union-attr]

    async def alice(s: Any) -> None:
        assert _content(await s.call_tool("search", {"query": "secret plan sail"})) == []
        assert _content(await s.call_tool("list_memories", {})) == []
        for guessed in (bob_id, "b1", "zz-none"):
            hidden = await s.call_tool("get", {"id": guessed})
            assert (
                hidden.is_error
                and hidden.content[0].text.replace(guessed, "ID") == "Error executing tool get: NotFoundError: no record(s) ['ID'] in this scope"
            )
            refused = await s.call_tool("forget", {"id": guessed})
            assert refused.is_error and "bob" not in refused.content[0].text

    session(url, keys["alice"], alice)

    async def admin(s: Any) -> int:
        return len(_content(await s.call_tool("list_memories", {})))

    assert session(url, keys["ops"], admin) == 2
    assert memory.get(bob_id).text == "bob's secret plan is to sail"  # type: ignore[union-attr]


def test_no_key_or_a_wrong_key_is_401(server: Any) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"accept": "application/json, text/event-stream"}
    for headers in ({}, {"authorization": "Bearer not-a-key"}):
        response = httpx.post(server.url + "/mcp", json=init, headers={**accept, **headers}, timeout=30)
        assert response.status_code == 401 and response.json()["error"]["type"] == "AuthenticationError"
        assert response.headers["www-authenticate"] == "Bearer"

    async def nothing(s: Any) -> None:
        raise AssertionError("initialized without a key")

    with pytest.raises(ExceptionGroup) as refused:  # the SDK's client: an MCPError from the 401
        session(server.url + "/mcp", None, nothing)
    assert refused.group_contains(mcp.MCPError)


def test_mcp_can_be_turned_off(served: Any, memory: memcore.Memory, keys: dict[str, str], key_settings: dict[str, Any]) -> None:
    server = served(memory, keys=key_settings, mcp=False)
    response = httpx.post(server.url + "/mcp", json={}, headers={"authorization": f"Bearer {keys['alice']}"}, timeout=30)
    assert response.status_code == 404


def test_the_mcp_only_app(served: Any, memory: memcore.Memory, keys: dict[str, str], key_settings: dict[str, Any]) -> None:
    """``memcore mcp --transport http`` serves this application: /mcp only, the same keys."""
    server = served(memory, factory=create_mcp_app, keys=key_settings)
    assert httpx.post(server.url + "/v1/count", json={}, headers={"authorization": f"Bearer {keys['alice']}"}, timeout=30).status_code == 404
    assert httpx.post(server.url + "/mcp", json={}, timeout=30).status_code == 401

    async def body(s: Any) -> Any:
        return _content(await s.call_tool("remember", {"text": "only over mcp"}))

    rid = session(server.url + "/mcp", keys["alice"], body)
    assert memory.get(rid).scope == memcore.Scope(user_id="alice")  # type: ignore[union-attr]


def test_serving_mcp_leaves_the_process_logging_alone(memory: memcore.Memory) -> None:
    """The SDK configures the root logger when its server is made; create_app puts it back."""
    import logging

    from memcore_server.app import create_app
    from memcore_server.config import ServerConfig

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.handlers.clear()  # as in a process that configured no logging (pytest adds its own handlers)
    try:
        create_app(memory, ServerConfig())
        create_mcp_app(memory, ServerConfig())
        assert (root.level, root.handlers) == (level, [])
    finally:
        root.handlers[:] = handlers
