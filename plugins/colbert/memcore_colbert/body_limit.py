"""An ASGI wrapper that enforces the request body limit while the body is read.

A ``Content-Length`` above the limit is answered 413 before a byte of the body is read; a
chunked body (or one whose length lies) is read chunk by chunk and answered 413 as soon as
the bytes received pass the limit, so the server never holds more than ``limit`` bytes of
one body (plus a chunk). The connection is then closed (the rest of the body is not read:
uvicorn stops reading a socket whose application no longer receives). A body within the
limit is handed to the application whole, as it arrived.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, MutableMapping

__all__ = ["BodyLimit"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def send_json_error(send: Send, status: int, kind: str, message: str, *, close: bool = False, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send ``{"error": {"type", "message"}}`` with ``status`` (``close``: ``Connection: close``)."""
    body = json.dumps({"error": {"type": kind, "message": message}}).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")), *(headers or [])]
    if close:
        head.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BodyLimit:
    """Wraps an ASGI app: request bodies of more than ``limit`` bytes get a JSON 413."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    def _too_large(self, size: str) -> str:
        return f"request body of {size} exceeds the limit of {self.limit} bytes; split it into several add-to-index requests"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await send_json_error(send, 400, "ValidationError", "bad Content-Length", close=True)
                return
            if int(length) > self.limit:
                await send_json_error(send, 413, "RequestTooLarge", self._too_large(f"{int(length)} bytes"), close=True)
                return
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.limit:
                chunks.clear()
                await send_json_error(send, 413, "RequestTooLarge", self._too_large(f"more than {self.limit} bytes"), close=True)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        chunks.clear()
        replayed = False

        async def replay() -> Message:
            nonlocal replayed, body
            if not replayed:
                replayed = True
                whole, body = body, b""
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
