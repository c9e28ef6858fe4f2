"""``memcore serve`` as a process (settings file, [server] table, keys) and ``memcore keys``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

import memcore
from memcore.plugin import hash_api_key

MEMCORE = [sys.executable, "-m", "memcore.cli"]


def test_serve_a_settings_file_with_keys(tmp_path: Path, serve_process: Callable[..., Any], port: int) -> None:
    key = "cli-test-key-123"
    settings = tmp_path / "memcore.toml"
    settings.write_text(
        f'[server]\nport = {port}\nmax_k = 7\n\n[server.keys.carol]\nsha256 = "{hash_api_key(key)}"\nscope = {{user_id = "carol"}}\n',
        encoding="utf-8",
    )
    env = {"MEMCORE_SERVER__KEYS__OPS__SHA256": hash_api_key("ops-key-from-env"), "MEMCORE_SERVER__KEYS__OPS__ADMIN": "true"}
    server = serve_process(settings, tmp_path / "mem", env=env, port=port)  # the port of the settings file
    try:
        url = server.url
        carol = {"authorization": f"Bearer {key}"}
        assert httpx.post(url + "/v1/insert", json={"text": "carol's memory"}, headers=carol).status_code == 200
        assert httpx.post(url + "/v1/search", json={"query": "memory", "k": 8}, headers=carol).status_code == 400  # max_k = 7
        ops = httpx.get(url + "/v1/info", headers={"authorization": "Bearer ops-key-from-env"}).json()
        assert ops["caller"] == {"key": "ops", "admin": True, "scope": None} and ops["limits"]["max_k"] == 7
        assert httpx.post(url + "/v1/count", json={}).status_code == 401
    finally:
        stderr = server.stop()
    assert key not in stderr and "ops-key-from-env" not in stderr
    with memcore.open(settings, path=tmp_path / "mem") as memory:  # the server closed it: the lock is free
        assert [r.scope for r in memory.get()] == [memcore.Scope(user_id="carol")]  # type: ignore[union-attr]


def test_serve_refuses_bad_settings_and_an_open_host_without_keys(tmp_path: Path) -> None:
    settings = tmp_path / "memcore.toml"
    settings.write_text("[server]\nmax_kk = 3\n", encoding="utf-8")
    out = subprocess.run([*MEMCORE, "serve", "--config", str(settings), "--path", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "server.max_kk" in out.stderr and "Traceback" not in out.stderr
    settings.write_text('[server.keys.x]\nsha256 = "not-a-digest"\nadmin = true\n', encoding="utf-8")
    out = subprocess.run([*MEMCORE, "serve", "--config", str(settings), "--path", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "API key 'x'" in out.stderr
    settings.write_text("", encoding="utf-8")
    out = subprocess.run(
        [*MEMCORE, "serve", "--config", str(settings), "--path", str(tmp_path), "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and "no API keys are declared" in out.stderr


def test_serve_refuses_workers_for_a_store_not_shared_between_processes(tmp_path: Path) -> None:
    settings = tmp_path / "memcore.toml"
    settings.write_text("[server]\nport = 1\n", encoding="utf-8")
    for options, configured in ((["--workers", "2"], ""), ([], "workers = 3\n")):
        settings.write_text(f"[server]\n{configured}", encoding="utf-8")
        out = subprocess.run(
            [*MEMCORE, "serve", "--config", str(settings), "--path", str(tmp_path / "mem"), *options], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert "server.workers" in out.stderr and "shared between processes" in out.stderr and "SQLiteStore" in out.stderr
    with memcore.open(settings, path=tmp_path / "mem") as memory:  # opened to be checked, and closed: the lock is free
        assert memory.count() == 0


def test_keys_hash_and_new() -> None:
    out = subprocess.run([*MEMCORE, "keys", "hash"], input="s3cret\n", capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == hash_api_key("s3cret")
    made = subprocess.run([*MEMCORE, "keys", "new", "dave", "--user-id", "dave"], capture_output=True, text=True, check=True, timeout=120)
    key = made.stderr.strip().rsplit(" ", 1)[-1]
    assert made.stdout.splitlines() == ["[server.keys.dave]", f'sha256 = "{hash_api_key(key)}"', 'scope = {user_id = "dave"}']
    bad = subprocess.run([*MEMCORE, "keys", "new", "eve"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_hosts(host: str) -> None:
    from memcore_server.cli import _loopback

    assert _loopback(host) and not _loopback("0.0.0.0") and not _loopback("example.org")


def test_mcp_over_http_as_a_process(tmp_path: Path, port: int) -> None:
    """``memcore mcp --transport http``: the tools at /mcp, each request in its key's scope."""
    import asyncio

    mcp = pytest.importorskip("mcp")
    httpx2 = pytest.importorskip("httpx2")
    from mcp.client.streamable_http import streamable_http_client

    key = "mcp-http-key-123"
    settings = tmp_path / "memcore.toml"
    settings.write_text(f'[server.keys.carol]\nsha256 = "{hash_api_key(key)}"\nscope = {{user_id = "carol"}}\n', encoding="utf-8")
    command = [*MEMCORE, "mcp", "--config", str(settings), "--path", str(tmp_path / "mem"), "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, text=True, stderr=subprocess.PIPE)

    async def remember() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("remember", {"text": "carol's memory over http"})

    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "memcore mcp --transport http did not start"
            time.sleep(0.1)
        assert httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=30).status_code == 401
        assert httpx.post(f"http://127.0.0.1:{port}/v1/count", json={}, headers={"authorization": f"Bearer {key}"}, timeout=30).status_code == 404
        result = asyncio.run(remember())
        assert not result.is_error, result
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert key not in stderr and f"http://127.0.0.1:{port}/mcp" in stderr
    with memcore.open(settings, path=tmp_path / "mem") as memory:
        assert [(r.text, r.scope) for r in memory.get()] == [("carol's memory over http", memcore.Scope(user_id="carol"))]  # type: ignore[union-attr]
    for extra, env in ((["--user-id", "x"], {}), ([], {"MEMCORE_API_KEY": key})):
        out = subprocess.run([*command, *extra], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and "each request's key" in out.stderr
    out = subprocess.run([*MEMCORE, "mcp", "--config", str(settings), "--port", "1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--transport http" in out.stderr


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
