"""Authentication before anything else: an ASGI middleware that checks the API key from the
request's headers, before any part of the body is received or parsed.

An unauthenticated client therefore cannot make the server read a body (up to
``max_body_bytes``) or parse its JSON: it gets a 401 at once, and the connection is closed
(``Connection: close``) so the rest of its body is not read either. The caller of an
authenticated request travels in the ASGI scope (``scope["memcore.caller"]``, read by
:func:`caller_of`) to the route, which does not authenticate again.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, MutableMapping, Sequence

from starlette.requests import Request

from memcore import AuthenticationError
from memcore.plugin import ApiKeyRing

from .tenancy import Caller, authenticate, known_caller
from .wire import error_body

__all__ = ["KeyGuard", "caller_of", "request_caller", "route_path", "CALLER"]

CALLER = "memcore.caller"
"""The key of the authenticated :class:`~memcore_server.tenancy.Caller` in the ASGI scope."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


async def _send_401(send: Send, message: str) -> None:
    body = json.dumps(error_body(AuthenticationError.__name__, message)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b"Bearer"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def route_path(scope: MutableMapping[str, Any]) -> str:
    """The request's path below where the application is mounted (``root_path``: uvicorn's
    ``--root-path``, a parent application's mount), the path its routes are named by; as
    Starlette's router reads it. A server mounted at ``/memory`` guards ``/memory/v1/...``."""
    path: str = scope["path"]
    root = scope.get("root_path") or ""
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


class KeyGuard:
    """ASGI middleware: authenticate every request under one of ``protected`` (path prefixes)
    but the ``public`` paths, from its ``Authorization`` header alone."""

    def __init__(self, app: ASGIApp, ring: ApiKeyRing, protected: Sequence[str] = ("/v1/",), public: Sequence[str] = ("/v1/health",)):
        self.app = app
        self.ring = ring
        self.protected = tuple(protected)
        self.public = frozenset(public)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Answer 401 without calling the app (nor ``receive``) when the key is missing or unknown."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.protects(route_path(scope)):
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                header = value
                break
        if await self.admit(scope, header, send):
            await self.app(scope, receive, send)

    def known(self, authorization: bytes | None) -> Caller | None:
        """The caller of a request's ``Authorization`` header (its first one, or None) when
        its key is known, else None (nothing sent, nothing logged: :meth:`admit` answers the
        401). For the hot routes' protocol (:mod:`.protocol`), which hands a request it cannot
        admit at once to the stack."""
        return known_caller(self.ring, None if authorization is None else authorization.decode("latin-1"))

    def protects(self, path: str) -> bool:
        """Whether a request to ``path`` needs a key."""
        return path.startswith(self.protected) and path not in self.public

    async def admit(self, scope: MutableMapping[str, Any], authorization: bytes | None, send: Send) -> bool:
        """Authenticate a request from its ``Authorization`` header (its first one, or None):
        True with its caller put in ``scope``, or False once a 401 is sent (by the front of the
        hot routes, :mod:`.hotpath`, too)."""
        try:
            scope[CALLER] = authenticate(self.ring, None if authorization is None else authorization.decode("latin-1"))
        except AuthenticationError as exc:
            await _send_401(send, str(exc))
            return False
        return True


def caller_of(scope: MutableMapping[str, Any]) -> Caller:
    """The caller :class:`KeyGuard` authenticated for this request.

    :raises AuthenticationError: the request did not pass through the guard.
    """
    who = scope.get(CALLER)
    if not isinstance(who, Caller):
        raise AuthenticationError("this request was not authenticated")
    return who


async def request_caller(request: Request) -> Caller:
    """The FastAPI dependency giving a route its caller (:func:`caller_of` its request)."""
    return caller_of(request.scope)
