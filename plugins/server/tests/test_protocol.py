"""The hot routes answered by the HTTP protocol itself (memcore_server.protocol), over raw sockets.

Which requests it takes (and which it leaves to uvicorn and the ASGI application), what its
replies carry, keep-alive, pipelining, a client leaving before its reply and a server
stopping while a reply is pending.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Iterator

import pytest

import memcore
from memcore_server.app import create_app
from memcore_server.hotpath import HotRoutes
from memcore_server.http11_read import Incoming
from memcore_server.protocol import HotRoutesProtocol, hot_routes_of

OPS = "key-ops-0123456789"
"""The admin key of the ``server`` fixture (conftest's ``ops``)."""


class Reply:
    """One reply as read off the socket: status, header fields (lower-cased names, in order) and body."""

    def __init__(self, incoming: Incoming):
        head = incoming.until(b"\r\n\r\n", 65536, "head").decode("latin-1")
        lines = head.split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.fields = [(n.strip().lower(), v.strip()) for n, v in (line.split(":", 1) for line in lines[1:] if line)]
        length = int(self.field("content-length") or 0)
        self.body = incoming.exactly(length)

    def field(self, name: str) -> str | None:
        """The first value of header ``name`` (None: absent)."""
        return next((v for n, v in self.fields if n == name), None)

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


def request(path: str, body: Any = None, key: str | None = OPS, method: str = "POST", version: str = "1.1", **headers: str) -> bytes:
    """The bytes of one request (a JSON body with its Content-Length unless a header says otherwise)."""
    data = b"" if body is None else json.dumps(body).encode()
    fields = {"host": "127.0.0.1", "content-type": "application/json", "content-length": str(len(data))}
    if key is not None:
        fields["authorization"] = f"Bearer {key}"
    fields.update({name.replace("_", "-"): value for name, value in headers.items()})
    head = f"{method} {path} HTTP/{version}\r\n" + "".join(f"{n}: {v}\r\n" for n, v in fields.items() if v is not None) + "\r\n"
    return head.encode("latin-1") + data


@pytest.fixture
def connect(server: Any) -> Iterator[Any]:
    """``connect()``: a socket to the server and its reader (closed after the test)."""
    opened: list[socket.socket] = []

    def make() -> tuple[socket.socket, Incoming]:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        opened.append(sock)
        return sock, Incoming(sock)

    yield make
    for sock in opened:
        sock.close()


@pytest.fixture
def through_asgi(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the hot routes' requests that went through the ASGI application (HotRoutes.__call__)."""
    seen: list[str] = []
    original = HotRoutes.__call__

    async def recorded(self: HotRoutes, scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await original(self, scope, receive, send)

    monkeypatch.setattr(HotRoutes, "__call__", recorded)
    return seen


@pytest.fixture
def slow_search(memory: memcore.Memory, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Searches take half a second; the event is set when one has started."""
    started = threading.Event()
    retrieve = memory.retrieve

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        time.sleep(0.5)
        return retrieve(*args, **kwargs)

    monkeypatch.setattr(memory, "retrieve", slow)
    return started


def test_the_hot_routes_are_answered_below_asgi_in_one_reply(server: Any, connect: Any, through_asgi: list[str], memory: memcore.Memory) -> None:
    """insert, get and search on one keep-alive connection: answered by the protocol (the ASGI
    application never sees them), each reply with uvicorn's default headers, its type and length."""
    sock, incoming = connect()
    sock.sendall(request("/v1/insert", {"text": "below the stack", "id": "b"}))
    inserted = Reply(incoming)
    assert inserted.status == 200 and inserted.json() == {"id": "b"}
    assert inserted.field("content-type") == "application/json" and inserted.field("date") and inserted.field("server") == "uvicorn"
    assert inserted.field("connection") is None  # kept alive
    sock.sendall(request("/v1/get", {"ids": ["b"]}))
    assert Reply(incoming).json()["records"][0]["text"] == "below the stack"
    sock.sendall(request("/v1/search", {"query": "below the stack", "k": 1}))
    assert [r["id"] for r in Reply(incoming).json()["results"]] == ["b"]
    assert through_asgi == [] and memory.count() == 1


def test_refusals_and_unusual_requests_go_through_asgi_with_the_same_answers(server: Any, connect: Any, through_asgi: list[str]) -> None:
    """A wrong key (401), a body over the limit (413), Expect: 100-continue, a chunked body,
    HTTP/1.0 and an escaped path are left to uvicorn and the application, which answer them as before."""
    sock, incoming = connect()
    sock.sendall(request("/v1/insert", {"text": "x"}, key="not-a-key"))
    refused = Reply(incoming)
    assert refused.status == 401 and refused.json()["error"]["type"] == "AuthenticationError" and refused.field("connection") == "close"

    sock, incoming = connect()
    sock.sendall(request("/v1/insert", None, content_length=str(10**12)))
    assert Reply(incoming).status == 413

    sock, incoming = connect()
    sock.sendall(request("/v1/insert", {"text": "expected", "id": "e"}, expect="100-continue"))
    first = Reply(incoming)
    assert first.status == 100
    assert Reply(incoming).json() == {"id": "e"}

    sock, incoming = connect()
    data = json.dumps({"text": "chunked", "id": "c"}).encode()
    sock.sendall(request("/v1/insert", None, content_length=None, transfer_encoding="chunked") + b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
    assert Reply(incoming).json() == {"id": "c"}

    sock, incoming = connect()
    sock.sendall(request("/v1/get", {"ids": ["c"]}, version="1.0"))
    assert Reply(incoming).json()["records"][0]["text"] == "chunked"

    sock, incoming = connect()
    sock.sendall(request("/v1/%67et", {"ids": ["e"]}))
    assert Reply(incoming).json()["records"][0]["text"] == "expected"
    assert through_asgi == ["/v1/insert", "/v1/insert", "/v1/insert", "/v1/insert", "/v1/get", "/v1/get"]


def test_failures_are_the_routes_answers(server: Any, connect: Any, through_asgi: list[str]) -> None:
    """Bad JSON, a body pydantic refuses, an unknown id and a non-JSON media type get the answers
    the routes give through ASGI (same status, same error type), answered by the protocol."""
    sock, incoming = connect()
    for raw, status, kind in (
        (b"{not json", 400, "ValidationError"),
        (json.dumps({"k": 0}).encode(), 400, "ValidationError"),
    ):
        sock.sendall(request("/v1/search", None, content_length=str(len(raw))) + raw)
        reply = Reply(incoming)
        assert (reply.status, reply.json()["error"]["type"]) == (status, kind)
    sock.sendall(request("/v1/get", {"ids": ["nobody"]}))
    missing = Reply(incoming)
    assert missing.status == 404 and missing.json()["error"]["type"] == "NotFoundError"
    sock.sendall(request("/v1/insert", {"text": "x"}, content_type="text/plain"))
    assert Reply(incoming).status == 400
    assert through_asgi == []


def test_pipelined_requests_are_answered_in_order(server: Any, connect: Any) -> None:
    """Requests sent together on one connection (hot and not) get their replies in the order sent."""
    sock, incoming = connect()
    sock.sendall(
        request("/v1/insert", {"text": "one", "id": "p1"})
        + request("/v1/insert", {"text": "two", "id": "p2"})
        + request("/v1/count", {})
        + request("/v1/get", {"ids": ["p1", "p2"]})
        + request("/v1/health", method="GET")
    )
    replies = [Reply(incoming) for _ in range(5)]
    assert [r.status for r in replies] == [200] * 5
    assert replies[0].json() == {"id": "p1"} and replies[1].json() == {"id": "p2"}
    assert replies[2].json()["count"] == 2
    assert [r["id"] for r in replies[3].json()["records"]] == ["p1", "p2"]
    assert replies[4].json()["status"] == "ok"


def test_connection_close_is_honoured(server: Any, connect: Any) -> None:
    """A request asking to close gets its reply with ``connection: close``, then the connection ends."""
    sock, incoming = connect()
    sock.sendall(request("/v1/insert", {"text": "last", "id": "l"}, connection="close"))
    reply = Reply(incoming)
    assert reply.json() == {"id": "l"} and reply.field("connection") == "close"
    assert sock.recv(1) == b""


def test_a_client_leaving_before_its_reply_leaves_the_server_serving(server: Any, connect: Any, slow_search: threading.Event) -> None:
    """The client closes while its search runs: nothing is written to it, and the server goes on."""
    sock, _ = connect()
    sock.sendall(request("/v1/search", {"query": "anything", "k": 1}))
    assert slow_search.wait(10)
    sock.close()
    time.sleep(0.5)
    sock, incoming = connect()
    sock.sendall(request("/v1/insert", {"text": "still here", "id": "s"}))
    assert Reply(incoming).json() == {"id": "s"}


def test_a_reply_pending_at_shutdown_is_written_and_ends_the_connection(server: Any, slow_search: threading.Event) -> None:
    """The server is told to stop while a search runs: the search's reply still goes out, with
    ``connection: close``, and the connection ends."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        incoming = Incoming(sock)
        sock.sendall(request("/v1/search", {"query": "anything", "k": 1}))
        assert slow_search.wait(10)
        server.server.should_exit = True
        reply = Reply(incoming)
        assert reply.status == 200 and reply.json() == {"results": []} and reply.field("connection") == "close"
        assert sock.recv(1) == b""


def test_the_protocol_steps_aside_where_it_must(memory: memcore.Memory) -> None:
    """It finds the hot routes only on create_app's application (under uvicorn's proxy-headers
    middleware), not once a middleware is added, nor behind another wrapper."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    app = create_app(memory)
    assert hot_routes_of(ProxyHeadersMiddleware(app)) is app.hot_routes is not None

    class Wrapper:
        def __init__(self, app: Any) -> None:
            self.app = app

    assert hot_routes_of(Wrapper(app)) is None and hot_routes_of(object()) is None
    app.add_middleware(Wrapper)
    assert hot_routes_of(app) is None


@pytest.mark.parametrize("options", [{"access_log": True}, {"root_path": "/memory"}, {"limit_concurrency": 100}])
def test_the_protocol_leaves_every_request_to_asgi_under_options_it_does_not_follow(memory: memcore.Memory, options: dict[str, Any]) -> None:
    """uvicorn's access log, a root path and a concurrency limit are uvicorn's to apply: the
    hot routes are then served through ASGI (the protocol takes none)."""
    import asyncio

    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(create_app(memory), http=HotRoutesProtocol, log_level="warning", **options)
    config.load()
    loop = asyncio.new_event_loop()
    try:
        protocol = HotRoutesProtocol(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    finally:
        loop.close()
    assert protocol.hot is None
    plain = uvicorn.Config(create_app(memory), http=HotRoutesProtocol, log_level="warning", access_log=False)
    plain.load()
    loop = asyncio.new_event_loop()
    try:
        assert HotRoutesProtocol(config=plain, server_state=ServerState(), app_state={}, _loop=loop).hot is not None
    finally:
        loop.close()
