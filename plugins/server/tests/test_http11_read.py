"""The synchronous client's reply reader (:mod:`memcore_server.http11_read`) on real sockets.

A scripted server (a thread on 127.0.0.1 sending crafted bytes) answers what a correct
server never would: malformed status lines and fields, a huge head, a body cut short,
replies split in many pieces. Real uvicorn answers the rest (a chunked body, keep-alive).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import pytest

import memcore
from memcore import ValidationError
from memcore_server import RemoteMemory
from memcore_server.http11 import ConnectError, ConnectionPool, Reply, TransportError
from memcore_server.http11_read import MAX_HEAD, Incoming, read_reply

Script = Callable[[int], Sequence[bytes | float | None]]
"""What the server sends for its n-th request (0-based): byte pieces sent one by one, a
float a pause in seconds between them, None: close the connection there."""


def _ok(body: bytes, *fields: str) -> bytes:
    head = "".join(f"{f}\r\n" for f in fields)
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + head.encode() + b"content-length: %d\r\n\r\n" % len(body) + body


class Scripted:
    """A TCP server on 127.0.0.1 answering each request with the bytes its script gives."""

    def __init__(self, script: Script):
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        try:
            while True:
                while b"\r\n\r\n" not in data:
                    more = sock.recv(65536)
                    if not more:
                        return
                    data += more
                head, data = data.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                while len(data) < length:
                    data += sock.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + data[:length])
                data = data[length:]
                for piece in self.script(len(self.requests) - 1):
                    if piece is None:
                        sock.close()
                        return
                    if isinstance(piece, float):
                        time.sleep(piece)
                    else:
                        sock.sendall(piece)
        except OSError:
            return
        finally:
            sock.close()

    def close(self) -> None:
        self._listener.close()
        for sock in self._socks:
            sock.close()


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], Scripted]]:
    servers: list[Scripted] = []

    def start(script: Script) -> Scripted:
        servers.append(Scripted(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _pool(server: Any, timeout: float = 5.0) -> ConnectionPool:
    return ConnectionPool(server.url, timeout, {"content-type": "application/json"})


def test_a_chunked_reply_is_joined_and_the_connection_kept(scripted: Callable[[Script], Scripted]) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b'4;ext=1\r\n{"a"\r\n' + b"9\r\n: [1, 2]}\r\n" + b"0\r\nx-trailer: yes\r\n\r\n"
    server = scripted(lambda n: [chunked])
    pool = _pool(server)
    for _ in range(3):
        reply = pool.request("POST", "/v1/count", b"{}")
        assert (reply.status_code, reply.json()) == (200, {"a": [1, 2]})
    assert server.connections == 1 and len(pool._idle) == 1
    pool.close()


def test_a_reply_in_many_pieces_is_read_whole(scripted: Callable[[Script], Scripted]) -> None:
    body = b'{"count": 3, "text": "' + b"x" * 3000 + b'"}'
    reply = _ok(body, "Connection: keep-alive")
    pieces: list[bytes | float | None] = []
    for i in range(0, len(reply), 7):  # 7 bytes at a time, each its own segment
        pieces += [reply[i : i + 7], 0.0005]
    server = scripted(lambda n: pieces)
    pool = _pool(server)
    got = pool.request("POST", "/v1/count", b"{}")
    assert got.status_code == 200 and got.content == body
    assert len(pool._idle) == 1  # read to the last byte: in step, kept
    pool.close()


def test_the_reader_receives_as_often_as_it_must() -> None:
    """A head and a body arriving a byte at a time are read across many receives, byte exact."""
    a, b = socket.socketpair()
    calls = 0

    class Counting(socket.socket):
        def recv(self, n: int, *args: Any) -> bytes:
            nonlocal calls
            calls += 1
            return super().recv(n, *args)

    reader = Counting(fileno=b.detach())
    reply = _ok(b'{"ok": true}') + b"HTTP/1.1 204 No Content\r\n\r\n"

    def feed() -> None:
        for i in range(len(reply)):
            a.sendall(reply[i : i + 1])
            time.sleep(0.0005)

    writer = threading.Thread(target=feed)
    writer.start()
    incoming = Incoming(reader)
    first = read_reply(incoming, "POST")
    second = read_reply(incoming, "POST")
    writer.join()
    assert (first.status, first.body, first.closes) == (200, b'{"ok": true}', False)
    assert (second.status, second.body) == (204, b"")
    assert calls > 10 and incoming.drained()
    incoming.close()
    a.close()


@pytest.mark.parametrize(
    "reply, message",
    [
        (b"HTTP/1.1 OK 200\r\ncontent-length: 2\r\n\r\n{}", "status line"),
        (b"HTTP/2 200 OK\r\ncontent-length: 2\r\n\r\n{}", "status line"),
        (b"200 OK\r\ncontent-length: 2\r\n\r\n{}", "status line"),
        (b"HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\n{}", "header field"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n folded\r\n\r\n{}", "header field"),
        (b"HTTP/1.1 200 OK\r\nx: a\nb\r\ncontent-length: 2\r\n\r\n{}", "header field"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2x\r\n\r\n{}", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "both"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n{}", "Transfer-Encoding"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", "CRLF"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols"),
    ],
)
def test_a_malformed_reply_is_a_transport_error(scripted: Callable[[Script], Scripted], reply: bytes, message: str) -> None:
    server = scripted(lambda n: [reply])
    pool = _pool(server)
    with pytest.raises(TransportError, match=message) as caught:
        pool.request("POST", "/v1/count", b"{}")
    assert not isinstance(caught.value, ConnectError)  # the request reached the server
    assert pool._idle == []  # the failed connection is closed, not given back
    pool.close()


def test_a_huge_head_is_refused(scripted: Callable[[Script], Scripted]) -> None:
    field = b"x-big: " + b"a" * 1000 + b"\r\n"
    huge = b"HTTP/1.1 200 OK\r\n" + field * (MAX_HEAD // len(field) + 1) + b"content-length: 2\r\n\r\n{}"
    server = scripted(lambda n: [huge])
    pool = _pool(server)
    with pytest.raises(TransportError, match="longer than 65536 bytes"):
        pool.request("POST", "/v1/count", b"{}")
    assert pool._idle == []
    pool.close()


def test_a_head_just_under_the_limit_is_read(scripted: Callable[[Script], Scripted]) -> None:
    field = b"x-big: " + b"a" * 1000 + b"\r\n"
    big = b"HTTP/1.1 200 OK\r\n" + field * (MAX_HEAD // len(field) - 1) + b"content-length: 2\r\n\r\n{}"
    assert len(big) < MAX_HEAD
    pool = _pool(scripted(lambda n: [big]))
    assert pool.request("POST", "/v1/count", b"{}").json() == {}
    pool.close()


@pytest.mark.parametrize(
    "pieces",
    [
        [b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"count":', None],
        [b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\n{"count":', None],
        [b"HTTP/1.1 200 OK\r\ncontent-le", None],
        [None],
    ],
    ids=["mid-body", "mid-chunk", "mid-head", "before-reply"],
)
def test_a_server_closing_before_the_reply_ends_is_a_transport_error(scripted: Callable[[Script], Scripted], pieces: list[bytes | None]) -> None:
    server = scripted(lambda n: pieces)
    pool = _pool(server)
    with pytest.raises(TransportError, match="ClosedEarly"):
        pool.request("POST", "/v1/count", b"{}")
    assert pool._idle == []
    pool.close()


def test_connection_close_is_honoured(scripted: Callable[[Script], Scripted]) -> None:
    """A reply saying ``Connection: close`` (the server keeps the socket open here): the next request opens a new connection."""
    server = scripted(lambda n: [_ok(b'{"n": %d}' % n, "Connection: close")])
    pool = _pool(server)
    assert [pool.request("POST", "/v1/count", b"{}").json()["n"] for _ in range(3)] == [0, 1, 2]
    assert server.connections == 3 and pool._idle == []
    pool.close()


def test_what_else_ends_a_connection(scripted: Callable[[Script], Scripted]) -> None:
    """A body read to the end of the stream, an HTTP/1.0 reply, bytes past a reply's end: never reused."""
    replies = [
        [b'HTTP/1.1 200 OK\r\n\r\n{"n": 0}', None],  # no length: the body ends when the server closes
        [b'HTTP/1.0 200 OK\r\ncontent-length: 8\r\n\r\n{"n": 1}'],
        [_ok(b'{"n": 2}') + b"HTTP/1.1 200 OK\r\n"],  # more than the reply: out of step
        [b'HTTP/1.0 200 OK\r\nconnection: Keep-Alive\r\ncontent-length: 8\r\n\r\n{"n": 3}'],
        [_ok(b'{"n": 4}')],
    ]
    server = scripted(lambda n: replies[n])
    pool = _pool(server)
    for n in range(5):
        assert pool.request("POST", "/v1/count", b"{}").json() == {"n": n}
        time.sleep(0.02)
    assert server.connections == 4  # the HTTP/1.0 keep-alive reply's connection served the last request
    pool.close()


def test_interim_replies_and_bodyless_replies(scripted: Callable[[Script], Scripted]) -> None:
    replies = [
        [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + _ok(b"{}")],
        [b"HTTP/1.1 204 No Content\r\n\r\n"],
        [b"HTTP/1.1 304 Not Modified\r\ncontent-length: 50\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n"],  # the reply to HEAD: a length, no body
        [_ok(b"[1]")],
    ]
    server = scripted(lambda n: replies[n])
    pool = _pool(server)
    assert pool.request("POST", "/v1/count", b"{}").json() == {}
    assert pool.request("POST", "/v1/count", b"{}").status_code == 204
    assert pool.request("GET", "/v1/health").status_code == 304
    assert pool.request("HEAD", "/v1/health").content == b""
    assert pool.request("GET", "/v1/health").json() == [1]
    assert server.connections == 1
    pool.close()


def test_a_large_body_arrives_whole(scripted: Callable[[Script], Scripted]) -> None:
    body = b'"' + bytes(range(48, 58)) * 300_000 + b'"'
    server = scripted(lambda n: [_ok(body)[:70_000], 0.01, _ok(body)[70_000:]])
    pool = _pool(server)
    assert pool.request("POST", "/v1/get", b"{}").content == body
    pool.close()


def test_the_request_on_the_wire(scripted: Callable[[Script], Scripted]) -> None:
    """One request: the request line, Host, the client's fields and the body's length, then the body."""
    server = scripted(lambda n: [_ok(b"{}")])
    pool = ConnectionPool(server.url + "/base/", 5.0, {"authorization": "Bearer k"})
    pool.request("POST", "/v1/count", b'{"x": 1}')
    pool.request("GET", "/v1/health")
    port = server.url.rsplit(":", 1)[1]
    assert server.requests == [
        f"POST /base/v1/count HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept-Encoding: identity\r\nauthorization: Bearer k\r\ncontent-length: 8\r\n\r\n".encode()
        + b'{"x": 1}',
        f"GET /base/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept-Encoding: identity\r\nauthorization: Bearer k\r\n\r\n".encode(),
    ]
    pool.close()


def test_a_silent_server_times_out(scripted: Callable[[Script], Scripted]) -> None:
    server = scripted(lambda n: [5.0])
    pool = _pool(server, timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(TransportError, match="timed out"):
        pool.request("POST", "/v1/count", b"{}")
    assert time.monotonic() - t0 < 3 and pool._idle == []
    pool.close()


def test_connecting_nowhere_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        pool = ConnectionPool(f"http://127.0.0.1:{port}", 5.0, {})
        with pytest.raises(ConnectError):
            pool.request("GET", "/v1/health")
        pool.close()


@pytest.mark.parametrize("api_key", ["key\r\nx-admin: yes", "key\nx", "key\x00"])
def test_a_key_that_would_inject_a_header_is_refused(api_key: str) -> None:
    with pytest.raises(ValidationError, match="invalid HTTP header"):
        RemoteMemory("http://127.0.0.1:1", api_key=api_key)


def test_chunked_replies_of_real_uvicorn(served: Any) -> None:
    """uvicorn writes a streamed body chunked; the pool reads it and keeps the connection."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        for piece in (b'{"parts": [', b'"a", ', b'"b"', b"]}"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    server = served(None, factory=lambda memory, config: app)
    pool = ConnectionPool(server.url, 5.0, {})
    for _ in range(3):
        assert pool.request("POST", "/anything", b"{}").json() == {"parts": ["a", "b"]}
    assert len(pool._idle) == 1
    pool.close()


def test_keep_alive_with_real_uvicorn(memory: memcore.Memory, served: Any) -> None:
    """Many requests of one thread on one connection of a real server; an error reply keeps it too."""
    server = served(memory)
    with RemoteMemory(server.url, retries=0) as remote:
        remote.insert("kept alive")
        sock = remote._http._idle[0].sock
        for _ in range(20):
            assert remote.count() == 1
        with pytest.raises(memcore.NotFoundError):
            remote.get("no-such-id")
        assert remote._http._idle[0].sock is sock and len(remote._http._idle) == 1


def test_a_reply_body_reads_as_json_loads_reads_it() -> None:
    """What pydantic-core refuses and ``json`` reads (a byte-order mark, a lone surrogate) is read; what neither reads is a ValueError."""
    assert Reply(200, b'{"a": [1, 2.5, -0.0, 123456789012345678901234567890]}').json() == {"a": [1, 2.5, -0.0, 123456789012345678901234567890]}
    assert Reply(200, '\ufeff{"a": 1}'.encode()).json() == {"a": 1}
    assert Reply(200, b'"\\ud800"').json() == "\ud800"
    with pytest.raises(ValueError):
        Reply(502, b"<html>Bad Gateway</html>").json()


def test_tls_with_real_uvicorn(memory: memcore.Memory, tmp_path: Any) -> None:
    """Over TLS (uvicorn with a self-signed certificate): an untrusted certificate is a
    ConnectError; trusted, a large body arrives whole and the connection is kept."""
    import shutil
    import ssl
    import subprocess

    import uvicorn

    from memcore_server.app import create_app
    from memcore_server.config import load_server_config

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        create_app(memory, load_server_config({})), host="127.0.0.1", port=port, log_level="warning", ssl_certfile=str(cert), ssl_keyfile=str(key)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        pool = ConnectionPool(f"https://127.0.0.1:{port}", 5.0, {"content-type": "application/json"})
        with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            pool.request("POST", "/v1/count", b"{}")
        pool._context = ssl.create_default_context(cafile=str(cert))
        text = "x" * 300_000
        reply = pool.request("POST", "/v1/insert", b'{"text": "%s"}' % text.encode())
        got = pool.request("GET", "/v1/records/" + reply.json()["id"])
        assert got.json()["text"] == text
        sock = pool._idle[0].sock
        assert isinstance(sock, ssl.SSLSocket)
        for _ in range(5):
            assert pool.request("POST", "/v1/count", b"{}").json()["count"] == 1
        assert pool._idle[0].sock is sock and len(pool._idle) == 1
        pool.close()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
