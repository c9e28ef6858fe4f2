"""The synchronous client's HTTP: keep-alive HTTP/1.1 connections on plain sockets.

:class:`memcore_server.RemoteMemory` sends small JSON requests, often from many threads at
once; on a busy machine the client's CPU is taken from the server's. httpx spends about
1.9 ms of CPU on such a request, the standard library's ``http.client`` about 0.7 ms (both
measured against ``memcore serve`` on the same machine, same body), most of it building
header objects and a file over the socket for every reply. So the synchronous client talks
HTTP/1.1 itself:

- a request is written as bytes, head and body in one ``sendall`` (one TCP segment for a
  small request: the server reads it at once); the head's fixed part (``Host``, the client's
  headers) is built once per pool, and the header names and values are checked then (a CR,
  LF or NUL in a value is a :class:`memcore.ValidationError`, nothing is sent);
- the reply is read with one receive buffer per connection and a small, strict parser
  (:mod:`.http11_read`: status line, ``Content-Length``, ``Transfer-Encoding: chunked``,
  ``Connection: close``; a head over 64 KiB or anything malformed is refused);
- one :class:`ConnectionPool` per client, safe to share between threads: a request takes an
  idle connection (or opens one), and gives it back once the reply is read, unless the
  server said it closes it (or sent bytes past the reply's end); at most ``max_idle`` idle
  connections are kept;
- an idle connection the server has closed meanwhile (uvicorn's keep-alive timeout) is
  noticed before it is reused (its socket reads as ready: end of stream) and dropped;
- a failure while connecting (TLS handshake included) is a :class:`ConnectError` (nothing
  reached the server); any other failure of the request (a timeout, a dropped connection, a
  malformed reply) a :class:`TransportError`. The client decides what to retry.

``timeout`` is per socket operation (connect, each send and receive), as httpx's is. Proxy
environment variables are not read: the server is reached directly.

Sockets are never left to the garbage collector: a pool closes its idle connections when it
is closed, when it is collected without being closed, at interpreter exit, and in a child
process after ``fork`` (whose copies of the parent's connections it must not use; the
parent's stay open). A request that fails in any way closes its connection.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import socket
import ssl
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from pydantic_core import from_json

from memcore import ValidationError

from .http11_read import Incoming, MalformedReply, read_reply

__all__ = ["ConnectionPool", "Reply", "TransportError", "ConnectError"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[^\r\n\x00]*")
_TARGET = re.compile(r"/[\x21-\x7e]*")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
"""Methods sent with ``content-length: 0`` when they carry no body (as ``http.client`` does)."""


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
        """The body as JSON (``ValueError`` when it is not), as ``json.loads`` reads it.

        Parsed by pydantic-core (a sixth of ``json``'s CPU for a search's reply; the same
        values), and by ``json`` itself when pydantic-core refuses the body (a byte-order mark,
        an escaped lone surrogate: JSON ``json`` reads)."""
        try:
            return from_json(self.content)
        except ValueError:
            return json.loads(self.content)


def _alive(conn: Incoming) -> bool:
    """An idle connection still open: its socket has nothing to read (a closed one reads end of stream)."""
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):  # closed, or a descriptor select cannot watch
        return False
    return not readable


def _host_header(host: str, port: int, default_port: int) -> str:
    """The ``Host`` field's value: IPv6 literals in brackets, the port unless it is the scheme's."""
    try:
        name = host.encode("ascii").decode("ascii")
    except UnicodeEncodeError:
        name = host.encode("idna").decode("ascii")
    if ":" in name:
        name = f"[{name.split('%', 1)[0]}]"  # an IPv6 literal, without its zone
    return name if port == default_port else f"{name}:{port}"


def _fixed_fields(headers: Mapping[str, str]) -> bytes:
    """The header fields every request carries, checked, as bytes."""
    out = []
    for name, value in headers.items():
        if _TOKEN.fullmatch(name) is None or _VALUE.fullmatch(value) is None:
            raise ValidationError(f"invalid HTTP header {name!r}: a token name and a value without CR, LF or NUL")
        try:
            out.append(f"{name}: {value}\r\n".encode("latin-1"))
        except UnicodeEncodeError:
            raise ValidationError(f"invalid HTTP header {name!r}: its value must be Latin-1 text") from None
    return b"".join(out)


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one server, shared by the threads of one client."""

    def __init__(self, url: str, timeout: float, headers: Mapping[str, str], max_idle: int = 20):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._https = parts.scheme == "https"
        default_port = 443 if self._https else 80
        self._host = parts.hostname
        self._port = parts.port or default_port
        self._prefix = parts.path.rstrip("/")
        if self._prefix and _TARGET.fullmatch(self._prefix) is None:
            raise ValidationError(f"the URL's path must be printable ASCII without spaces: {url!r}")
        self._timeout = timeout
        fields = {"Host": _host_header(self._host, self._port, default_port), "Accept-Encoding": "identity", **headers}
        self._fields = _fixed_fields(fields)
        self._max_idle = max_idle
        self._idle: list[Incoming] = []
        self._lock = threading.Lock()
        self._closed = False
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = ssl.create_default_context()
            self._context.set_alpn_protocols(["http/1.1"])
        _POOLS.add(self)

    def _open(self) -> Incoming:
        try:
            sock = socket.create_connection((self._host, self._port), self._timeout)
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._host)  # the handshake: closes itself on failure
        except OSError as exc:
            sock.close()
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            sock.close()
            raise
        return Incoming(sock)

    def _acquire(self) -> Incoming:
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

    def _release(self, conn: Incoming) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _head(self, method: str, path: str, body: bytes | None) -> bytes:
        """A request's head: request line, the fixed fields, the body's length, the blank line."""
        target = self._prefix + path
        if _TOKEN.fullmatch(method) is None or _TARGET.fullmatch(target) is None:
            raise ValueError(f"invalid request line: {method!r} {target!r}")
        if body is not None:
            length = b"content-length: %d\r\n" % len(body)
        else:
            length = b"content-length: 0\r\n" if method in _BODY_METHODS else b""
        return b"%s %s HTTP/1.1\r\n%s%s\r\n" % (method.encode("ascii"), target.encode("ascii"), self._fields, length)

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """Send one request and read the whole reply.

        :raises ConnectError: the connection could not be opened.
        :raises TransportError: the request or its reply failed on the wire.
        """
        head = self._head(method, path, body)
        conn = self._acquire()
        try:
            conn.sock.sendall(head + body if body else head)
            reply = read_reply(conn, method)
        except (OSError, MalformedReply) as exc:
            conn.close()
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:  # interrupted: never reuse, never leak
            conn.close()
            raise
        if reply.closes or not conn.drained():
            conn.close()
        else:
            self._release(conn)
        return Reply(reply.status, reply.body)

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
