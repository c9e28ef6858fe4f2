"""Limits every request passes before it reaches the memory: body size, batch size, k, filter size.

The body limit is enforced while the body is read (an ASGI middleware counting the bytes
received), so a client that lies about ``Content-Length`` or streams a chunked body cannot
make the server buffer more than ``max_body_bytes``.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Mapping, MutableMapping

from memcore import FilterError, ValidationError

from .config import ServerConfig
from .wire import REQUEST_TOO_LARGE, error_body

__all__ = ["BodyLimit", "TooLarge", "check_batch", "check_k", "check_filter", "check_filters"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class TooLarge(ValidationError):
    """A request is over one of the server's size limits (HTTP 413, type ``RequestTooLarge``)."""


async def _send_413(send: Send, message: str) -> None:
    body = json.dumps(error_body(REQUEST_TOO_LARGE, message)).encode()
    await send(
        {"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: refuse (413) a body over ``max_bytes``, declared or actually received."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Check ``Content-Length`` up front, then count the bytes as the app reads them."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        if not await self.admit(dict(scope.get("headers") or ()).get(b"content-length"), send):
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise TooLarge(f"request body is over the limit of {limit} bytes; split it")
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except TooLarge as exc:
            if started:
                raise
            await _send_413(send, str(exc))

    async def admit(self, declared: bytes | None, send: Send) -> bool:
        """True when a request's declared ``Content-Length`` (its last one, or None) is within
        the limit; else False once a 413 is sent (by the front of the hot routes, :mod:`.hotpath`, too)."""
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _send_413(send, f"request body of {declared.decode(errors='replace')} bytes is over the limit of {self.max_bytes} bytes; split it")
            return False
        return True

    async def read(self, receive: Receive) -> bytes | None:
        """The whole body of a request, counted as it arrives; None when the client went away first.

        :raises TooLarge: more than ``max_bytes`` arrived.
        """
        chunks = []
        received = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                raise TooLarge(f"request body is over the limit of {self.max_bytes} bytes; split it")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def check_batch(n: int, config: ServerConfig, what: str = "items") -> None:
    """At most ``max_batch`` items or ids in one request (:class:`TooLarge` otherwise)."""
    if n > config.max_batch:
        raise TooLarge(f"{n} {what} in one request; the limit is {config.max_batch}: split it into several requests")


def check_k(k: int, config: ServerConfig) -> None:
    """``k`` at most ``max_k``."""
    if k > config.max_k:
        raise ValidationError(f"k={k} is over this server's limit of {config.max_k}")


def check_filter(where: Mapping[str, Any] | None, config: ServerConfig, what: str = "where") -> None:
    """A filter (``where``, or ``where_document`` named by ``what``) at most ``max_filter_bytes`` long as compact JSON."""
    if where is None:
        return
    size = len(json.dumps(where, separators=(",", ":"), ensure_ascii=False).encode())
    if size > config.max_filter_bytes:
        raise FilterError(f"the {what} filter is {size} bytes; this server's limit is {config.max_filter_bytes}")


def check_filters(where: Mapping[str, Any] | None, where_document: Mapping[str, Any] | None, config: ServerConfig) -> None:
    """Both filters of a request within ``max_filter_bytes`` (each on its own)."""
    check_filter(where, config)
    check_filter(where_document, config, "where_document")
