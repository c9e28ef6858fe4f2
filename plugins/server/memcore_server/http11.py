"""The synchronous client's HTTP: keep-alive connections on the standard library's ``http.client``.

:class:`memcore_server.RemoteMemory` sends small JSON requests, often from many threads at
once. httpx spends about 1.9 ms of CPU on such a request and ``http.client`` about 0.7 ms
(measured against ``memcore serve`` on the same machine, same body); on a busy machine the
client's CPU is taken from the server's, so the synchronous client talks HTTP/1.1 itself:

- one :class:`ConnectionPool` per client, safe to share between threads: a request takes an
  idle connection (or opens one), and gives it back once the reply is read, unless the
  server said it closes it; at most ``max_idle`` idle connections are kept;
- an idle connection the server has closed meanwhile (uvicorn's keep-alive timeout) is
  noticed before it is reused (its socket reads as ready: end of stream) and dropped;
- a failure while connecting is a :class:`ConnectError` (nothing reached the server); any
  other failure of the request (a timeout, a dropped connection, a malformed reply) a
  :class:`TransportError`. The client decides what to retry.

``timeout`` is per socket operation (connect, each send and receive), as httpx's is. Proxy
environment variables are not read: the server is reached directly.

Sockets are never left to the garbage collector: a pool closes its idle connections when it
is closed, when it is collected without being closed, at interpreter exit, and in a child
process after ``fork`` (whose copies of the parent's connections it must not use; the
parent's stay open). A request that fails in any way closes its connection.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import select
import socket
import ssl
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from memcore import ValidationError

__all__ = ["ConnectionPool", "Reply", "TransportError", "ConnectError"]


class TransportError(Exception):
    """A request failed on the wire: timed out, the connection dropped, a malformed reply."""


class ConnectError(TransportError):
    """The connection could not be opened: nothing reached the server."""


@dataclass(frozen=True)
class Reply:
    """A whole HTTP reply: its status and its body."""

    status_code: int
    content: bytes

    @property
    def is_success(self) -> bool:
        """A 2xx status."""
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return json.loads(self.content)


class _OneSend:
    """An ``http.client`` connection that sends a request with a body given as bytes in one
    ``send`` (the head and the body in one TCP segment), not two: the server then reads the
    whole request at once (one wake-up, one read, one parse) instead of the head and, a
    segment later, the body."""

    _buffer: list[bytes]

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if isinstance(message_body, bytes) and not encode_chunked:
            self._buffer.extend((b"", b""))
            head = b"\r\n".join(self._buffer)
            del self._buffer[:]
            self.send(head + message_body)  # type: ignore[attr-defined]
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


class _Connection(_OneSend, http.client.HTTPConnection):
    """A plain HTTP connection sending each request in one piece (:class:`_OneSend`)."""


class _TLSConnection(_OneSend, http.client.HTTPSConnection):
    """A TLS connection sending each request in one piece (:class:`_OneSend`)."""


def _alive(conn: http.client.HTTPConnection) -> bool:
    """An idle connection still open: its socket has nothing to read (a closed one reads end of stream)."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed, or a descriptor select cannot watch
        return False
    return not readable


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one server, shared by the threads of one client."""

    def __init__(self, url: str, timeout: float, headers: Mapping[str, str], max_idle: int = 20):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._headers = dict(headers)
        self._max_idle = max_idle
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._context = ssl.create_default_context() if self._https else None
        _POOLS.add(self)

    def _open(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = _TLSConnection(self._host, self._port, timeout=self._timeout, context=self._context)
        else:
            conn = _Connection(self._host, self._port, timeout=self._timeout)
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return conn

    def _acquire(self) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                if self._closed:
                    raise ValidationError("this client is closed: open a new one")
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._open()
            if _alive(conn):
                return conn
            conn.close()

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """Send one request and read the whole reply.

        :raises ConnectError: the connection could not be opened.
        :raises TransportError: the request or its reply failed on the wire.
        """
        conn = self._acquire()
        try:
            conn.request(method, self._prefix + path, body=body, headers=self._headers)
            response = conn.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:  # interrupted, or a value http.client refused: never reuse, never leak
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            self._release(conn)
        return Reply(response.status, content)

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __del__(self) -> None:
        idle, self._idle = getattr(self, "_idle", []), []
        for conn in idle:
            conn.close()

    def _forked(self) -> None:
        """In a child after ``fork``: drop the copies of the parent's connections (closing the
        child's descriptors only) and the lock another thread may have held."""
        self._lock = threading.Lock()
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


_POOLS: "weakref.WeakSet[ConnectionPool]" = weakref.WeakSet()
"""Every live pool: closed at interpreter exit, reset in a child after fork."""


def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


def _after_fork() -> None:
    for pool in list(_POOLS):
        pool._forked()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork)
