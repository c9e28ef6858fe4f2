"""``memcore mcp`` over stdio, driven by the ``mcp`` SDK's own client (a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import memcore
from memcore.plugin import hash_api_key

mcp = pytest.importorskip("mcp")


def _params(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    settings = tmp_path / "memcore.toml"
    if not settings.exists():
        settings.write_text(f'[server.keys.alice]\nsha256 = "{hash_api_key("alice-mcp-key")}"\nscope = {{user_id = "alice"}}\n', encoding="utf-8")
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "memcore.cli", "mcp", "--config", str(settings), "--path", str(tmp_path / "mem"), *args],
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


def _content(result: Any) -> Any:
    assert not result.is_error, result
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return result.content[0].text


async def _session(params: Any, body: Any) -> Any:
    async with mcp.stdio_client(params) as (read, write):
        async with mcp.ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


def test_the_tools_over_stdio_in_a_key_scope(tmp_path: Path) -> None:
    async def body(session: Any) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"remember", "search", "get", "forget", "list_memories"}
        assert all(len(t.description or "") > 30 for t in tools.values())
        rid = _content(await session.call_tool("remember", {"text": "Alice prefers green tea", "metadata": {"topic": "drinks"}}))
        _content(await session.call_tool("remember", {"text": "Alice flies to Lisbon in May"}))
        found = _content(await session.call_tool("search", {"query": "what tea does alice like", "k": 1}))
        assert found[0]["id"] == rid and found[0]["text"] == "Alice prefers green tea"
        assert _content(await session.call_tool("get", {"id": rid}))["scope"] == {"user_id": "alice"}
        listed = _content(await session.call_tool("list_memories", {"where": {"topic": "drinks"}}))
        assert [m["id"] for m in listed] == [rid]
        assert "forgot" in _content(await session.call_tool("forget", {"id": rid}))
        missing = await session.call_tool("get", {"id": rid})
        assert missing.is_error and "NotFoundError" in missing.content[0].text
        bad = await session.call_tool("remember", {"text": "   "})
        assert bad.is_error and "ValidationError" in bad.content[0].text

    asyncio.run(_session(_params(tmp_path, env={"MEMCORE_API_KEY": "alice-mcp-key"}), body))
    with memcore.open(tmp_path / "memcore.toml", path=tmp_path / "mem") as memory:
        assert [r.scope for r in memory.get()] == [memcore.Scope(user_id="alice")]  # type: ignore[union-attr]


def test_a_scope_from_options_hides_other_scopes(tmp_path: Path) -> None:
    with memcore.open(path=tmp_path / "mem") as memory:
        memory.insert([{"text": "bob's secret plan", "id": "b1", "scope": {"user_id": "bob"}}])

    async def body(session: Any) -> None:
        assert _content(await session.call_tool("search", {"query": "secret plan"})) == []
        assert _content(await session.call_tool("list_memories", {})) == []
        hidden = await session.call_tool("get", {"id": "b1"})
        assert hidden.is_error and "NotFoundError" in hidden.content[0].text
        refused = await session.call_tool("forget", {"id": "b1"})
        assert refused.is_error

    asyncio.run(_session(_params(tmp_path, "--user-id", "carol"), body))
    with memcore.open(path=tmp_path / "mem") as memory:
        assert memory.get("b1").text == "bob's secret plan"  # type: ignore[union-attr]


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    import subprocess

    params = _params(tmp_path)
    out = subprocess.run([params.command, *params.args], env={**params.env, "MEMCORE_API_KEY": "wrong"}, input="", capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "AuthenticationError" not in out.stdout and "API key" in out.stderr
    assert json.dumps(out.stdout) and "wrong" not in out.stderr
