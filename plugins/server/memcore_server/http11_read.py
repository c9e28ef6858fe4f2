"""Reading one HTTP/1.1 reply from a socket, strictly: what :mod:`.http11` needs, nothing more.

The standard library's ``http.client`` builds, for every reply, a file object over the
socket, an ``email`` parser and an ``HTTPMessage`` of every header; a client sending small
JSON requests from many threads spends much of its CPU there. This module reads a reply with
one receive buffer per connection (:class:`Incoming`) and a parser that looks only at what
the client needs (:func:`read_reply`):

- the status line ``HTTP/1.x NNN reason``; interim ``1xx`` replies are skipped (a ``101``,
  which the client never asks for, is refused);
- header fields ``name: value`` (a token, a colon, a value without CR, LF or NUL; no folded
  lines, no bare LF); of them only ``Content-Length``, ``Transfer-Encoding`` and
  ``Connection`` are read;
- the body: none (a ``HEAD`` request, ``204``, ``304``), ``Content-Length`` bytes,
  ``Transfer-Encoding: chunked`` (chunk extensions ignored, trailers read and dropped), or,
  with neither, everything until the server closes;
- whether the connection stays open: not after ``Connection: close``, a body read to the
  end of the stream, or an HTTP/1.0 reply without ``Connection: keep-alive``.

Anything else is a :class:`MalformedReply`: a head (status line and fields) over
:data:`MAX_HEAD` bytes, a chunk-size line or a trailer over :data:`MAX_LINE`, two different
lengths, a length and ``chunked`` together, a transfer coding other than ``chunked``. A
server closing before its reply ends is a :class:`ClosedEarly` (a ``ConnectionError``). The
socket's own errors (a timeout, a reset) pass through as they are.
"""

from __future__ import annotations

import re
import socket
from typing import NamedTuple

__all__ = ["Incoming", "MalformedReply", "ClosedEarly", "ReadReply", "read_reply", "MAX_HEAD", "MAX_LINE"]

MAX_HEAD = 64 * 1024
"""The most bytes a reply's head (status line and header fields, each interim reply's too) may take."""

MAX_LINE = 8 * 1024
"""The most bytes a chunk-size line may take, and each trailer field."""

_RECV = 64 * 1024
"""How many bytes one receive asks for."""

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_STATUS = rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [\t\x20-\x7e\x80-\xff]*)?"
_HEAD = re.compile(_STATUS + rb"(?:\r\n" + _TOKEN + rb":[^\r\n\x00]*)*\r\n\r\n")
"""A whole head, checked in one match: the status line, then ``name: value`` fields (no folding, no bare LF)."""
_FIELD = re.compile(_TOKEN + rb":[^\r\n\x00]*")
_WANTED = re.compile(rb"\r\n(content-length|transfer-encoding|connection):([^\r\n]*)", re.IGNORECASE)
"""The fields the client reads, found in a checked head (a field starts after a CRLF; a value holds none)."""
_DIGITS = re.compile(rb"[0-9]{1,18}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_NO_BODY = frozenset({204, 304})


class MalformedReply(ValueError):
    """The server's bytes are not an HTTP/1.1 reply this client reads, or exceed its limits."""


class ClosedEarly(ConnectionError):
    """The server closed the connection before its reply ended."""


class Incoming:
    """A connection's socket and the bytes received on it but not read yet.

    Every read takes from the buffer first and receives (at most 64 KiB at a time) only for
    what is missing; bytes past the end of a reply stay in the buffer (:meth:`drained`).
    """

    __slots__ = ("sock", "_buf")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = b""

    def _more(self) -> None:
        data = self.sock.recv(_RECV)
        if not data:
            raise ClosedEarly("the server closed the connection before its reply ended")
        self._buf = self._buf + data if self._buf else data

    def until(self, delimiter: bytes, limit: int, what: str) -> bytes:
        """The bytes up to and including ``delimiter`` (a :class:`MalformedReply` past ``limit`` bytes)."""
        start = 0
        while True:
            end = self._buf.find(delimiter, start)
            if end >= 0:
                end += len(delimiter)
                if end > limit:
                    break
                out, self._buf = self._buf[:end], self._buf[end:]
                return out
            if len(self._buf) > limit:
                break
            start = max(0, len(self._buf) - len(delimiter) + 1)
            self._more()
        raise MalformedReply(f"{what} longer than {limit} bytes")

    def exactly(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        if len(self._buf) >= n:
            out, self._buf = self._buf[:n], self._buf[n:]
            return out
        whole = bytearray(n)
        have = len(self._buf)
        whole[:have] = self._buf
        self._buf = b""
        view = memoryview(whole)
        while have < n:
            got = self.sock.recv_into(view[have:])
            if not got:
                raise ClosedEarly(f"the server closed the connection {n - have} bytes before the end of the body")
            have += got
        return bytes(whole)

    def to_end(self) -> bytes:
        """Every byte until the server closes the connection."""
        parts = [self._buf]
        self._buf = b""
        while data := self.sock.recv(_RECV):
            parts.append(data)
        return b"".join(parts)

    def drained(self) -> bool:
        """Nothing received past the replies read (the connection is in step with the server)."""
        if self._buf:
            return False
        pending = getattr(self.sock, "pending", None)  # a TLS socket: decrypted bytes not read yet
        return not (pending is not None and pending())

    def close(self) -> None:
        """Close the socket (what was received and not read is dropped)."""
        self._buf = b""
        self.sock.close()


class ReadReply(NamedTuple):
    """A reply as read: its status, its whole body, and whether the server closes the connection."""

    status: int
    body: bytes
    closes: bool


def _wanted(head: bytes) -> dict[bytes, list[bytes]]:
    """The fields the client reads in a checked head (lower-cased names), each with its values in order."""
    wanted: dict[bytes, list[bytes]] = {}
    for name, value in _WANTED.findall(head):
        wanted.setdefault(name.lower(), []).append(value.strip(b" \t"))
    return wanted


def _malformed(head: bytes) -> MalformedReply:
    """What is wrong with a head :data:`_HEAD` refused: its status line or its first bad field."""
    lines = head[:-4].split(b"\r\n")
    if re.fullmatch(_STATUS, lines[0]) is None:
        return MalformedReply(f"malformed status line: {lines[0][:80]!r}")
    bad = next((line for line in lines[1:] if _FIELD.fullmatch(line) is None), b"")
    return MalformedReply(f"malformed header field: {bad[:80]!r}")


def _tokens(values: list[bytes]) -> list[bytes]:
    """The comma-separated tokens of a field's values, lower-cased."""
    return [t.strip(b" \t").lower() for v in values for t in v.split(b",") if t.strip(b" \t")]


def _length(values: list[bytes]) -> int:
    """The body length a ``Content-Length`` field gives (the same number, if repeated)."""
    if len(values) == 1 and _DIGITS.fullmatch(values[0]) is not None:  # the common case
        return int(values[0])
    lengths = {t.strip(b" \t") for v in values for t in v.split(b",")}
    if len(lengths) != 1:
        raise MalformedReply(f"conflicting Content-Length: {b', '.join(values)[:80]!r}")
    (length,) = lengths
    if _DIGITS.fullmatch(length) is None:
        raise MalformedReply(f"malformed Content-Length: {length[:80]!r}")
    return int(length)


def _chunked(incoming: Incoming) -> bytes:
    """A chunked body: its chunks joined (extensions ignored), its trailers read and dropped."""
    parts = []
    while True:
        line = incoming.until(b"\r\n", MAX_LINE, "a chunk-size line")
        size = line[:-2].split(b";", 1)[0].strip(b" \t")
        if _HEX.fullmatch(size) is None:
            raise MalformedReply(f"malformed chunk size: {line[:80]!r}")
        n = int(size, 16)
        if n == 0:
            break
        parts.append(incoming.exactly(n))
        if incoming.exactly(2) != b"\r\n":
            raise MalformedReply("a chunk does not end with CRLF")
    trailers = 0
    while (line := incoming.until(b"\r\n", MAX_LINE, "a trailer field")) != b"\r\n":
        trailers += len(line)
        if trailers > MAX_HEAD:
            raise MalformedReply(f"trailer fields longer than {MAX_HEAD} bytes")
        if _FIELD.fullmatch(line, 0, len(line) - 2) is None:
            raise MalformedReply(f"malformed trailer field: {line[:80]!r}")
    return b"".join(parts)


def read_reply(incoming: Incoming, method: str) -> ReadReply:
    """Read the reply to a ``method`` request from ``incoming`` (see the module for what is accepted).

    :raises MalformedReply: the bytes are not such a reply, or exceed the limits.
    :raises ClosedEarly: the server closed the connection before the reply ended.
    :raises OSError: the socket's own failures (a timeout, a reset).
    """
    head_bytes = 0
    while True:
        head = incoming.until(b"\r\n\r\n", MAX_HEAD - head_bytes, "the reply's head")
        head_bytes += len(head)
        status_line = _HEAD.fullmatch(head)
        if status_line is None:
            raise _malformed(head)
        status = int(status_line.group(2))
        if status >= 200:
            break
        if status == 101:
            raise MalformedReply("the server switched protocols (101), which this client never asks for")
    fields = _wanted(head)
    connection = _tokens(fields.get(b"connection", []))
    closes = b"close" in connection or (status_line.group(1) == b"0" and b"keep-alive" not in connection)
    coding = fields.get(b"transfer-encoding")
    length = fields.get(b"content-length")
    if method == "HEAD" or status in _NO_BODY:
        return ReadReply(status, b"", closes)
    if coding is not None:
        if _tokens(coding) != [b"chunked"]:
            raise MalformedReply(f"unsupported Transfer-Encoding: {b', '.join(coding)[:80]!r}")
        if length is not None:
            raise MalformedReply("both Content-Length and Transfer-Encoding")
        return ReadReply(status, _chunked(incoming), closes)
    if length is not None:
        return ReadReply(status, incoming.exactly(_length(length)), closes)
    return ReadReply(status, incoming.to_end(), True)
