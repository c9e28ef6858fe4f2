"""The API key is checked before the body is read: a client without a key cannot make the
server receive (up to the body limit) or parse a body."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx

import memcore
from memcore_server.app import create_app
from memcore_server.config import load_server_config


def _response_head(sock: socket.socket) -> bytes:
    """The status line and headers of the response on ``sock`` (raises on timeout)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_401_before_the_body_is_sent(server: Any, memory: memcore.Memory, keys: dict[str, str]) -> None:
    """A request declaring 8 MB (under the body limit) but sending 64 KB of it: without a key
    the server answers 401 at once and closes the connection; it never waits for the rest."""
    for auth in ("", "Authorization: Bearer not-a-key\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            head = (
                f"POST /v1/insert_many HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{auth}Content-Type: application/json\r\nContent-Length: {8_000_000}\r\n\r\n"
            ).encode()
            sock.sendall(head + b'{"items": [' + b" " * 65536)
            answer = _response_head(sock).lower()  # a server waiting for the body would time out here
            assert answer.startswith(b"http/1.1 401"), answer[:200]
            assert b"connection: close" in answer and b"www-authenticate: bearer" in answer
    # the same request with a key is read (and this one is refused as malformed JSON)
    broken = httpx.post(server.url + "/v1/insert_many", content=b'{"items": [', headers={"authorization": f"Bearer {keys['alice']}"}, timeout=30)
    assert broken.status_code == 400
    assert memory.count() == 0


def test_malformed_bodies_without_a_key_are_401(server: Any, memory: memcore.Memory) -> None:
    for content in (b'{"items": [', b"x" * 64, b'{"text": 1}'):
        response = httpx.post(server.url + "/v1/insert_many", content=content, headers={"content-type": "application/json"}, timeout=60)
        assert response.status_code == 401, response.text[:200]
        assert response.json()["error"]["type"] == "AuthenticationError"
    assert httpx.get(server.url + "/v1/health", timeout=30).status_code == 200  # still needs no key
    assert memory.count() == 0


def test_the_app_never_receives_an_unauthenticated_body(memory: memcore.Memory, key_settings: dict[str, Any]) -> None:
    """At the ASGI level: the application answers without calling ``receive`` at all."""
    app = create_app(memory, load_server_config({"keys": key_settings}))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read before the key was checked")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for path in ("/v1/insert", "/v1/count", "/v1/records/x", "/v1/nothing-here", "/mcp"):
        sent.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "scheme": "http",
            "server": ("127.0.0.1", 8765),
            "client": ("127.0.0.1", 50000),
            "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"100")],
        }
        asyncio.run(app(scope, receive, send))
        assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 401, (path, sent)


def test_a_server_mounted_under_a_path_prefix_guards_and_serves_there(
    memory: memcore.Memory, served: Any, key_settings: dict[str, Any], keys: dict[str, str]
) -> None:
    """Mounted at /memory (a parent application's mount, as uvicorn's --root-path): the routes
    answer under the prefix with a key, refuse without one, and health needs none (the key
    guard and the hot routes read the path below the mount point; they used to refuse every
    request with 401)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    def mounted(memory: memcore.Memory, config: Any) -> Any:
        return Starlette(routes=[Mount("/memory", app=create_app(memory, config))])

    server = served(memory, factory=mounted, keys=key_settings)
    base = server.url + "/memory"
    alice = {"authorization": f"Bearer {keys['alice']}"}
    assert httpx.get(base + "/v1/health", timeout=30).status_code == 200
    for route in ("/v1/insert", "/v1/search", "/v1/count"):
        refused = httpx.post(base + route, json={"text": "x", "query": "x"}, timeout=30)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "AuthenticationError"
    inserted = httpx.post(base + "/v1/insert", json={"text": "tea at five", "id": "t"}, headers=alice, timeout=30)
    assert inserted.status_code == 200, inserted.text
    found = httpx.post(base + "/v1/search", json={"query": "tea", "k": 3}, headers=alice, timeout=30)
    assert found.status_code == 200, found.text
    assert [hit["id"] for hit in found.json()["results"]] == ["t"]
    counted = httpx.post(base + "/v1/count", json={}, headers=alice, timeout=30)
    assert counted.status_code == 200 and counted.json()["count"] == 1
    assert memory.count(scope={"user_id": "alice"}) == 1
