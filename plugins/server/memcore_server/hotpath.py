"""The hot routes (``POST /v1/search``, ``/v1/get``, ``/v1/insert``) without FastAPI's request machinery.

A server under load is bound by one core (Python's GIL), so what each request costs the
event loop caps the requests per second. For the routes most calls take, this ASGI
middleware does only what a request needs: it reads the body, parses and validates it in
one pass (pydantic-core's ``model_validate_json``), runs the route's handler (the same
function FastAPI routes to, with the caller the key guard authenticated) and sends the
reply serialised in one pass (``pydantic_core.to_json``). FastAPI's routing, dependency
solving, ``json.loads`` plus validation, response-model validation and its middlewares are
skipped; the routes stay declared in FastAPI for the OpenAPI schema (and still serve when
the application is mounted under another path).

A body is JSON unless its ``Content-Type`` names something else (as FastAPI reads it);
every failure is answered as the FastAPI routes answer it (:mod:`.replies`).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, MutableMapping

from pydantic import BaseModel, ValidationError as PydanticValidationError
from pydantic_core import to_json

from .guard import caller_of
from .replies import error_reply, validation_message
from .tenancy import Caller
from .wire import error_body

__all__ = ["HotRoutes", "Handler"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]
Handler = Callable[[Any, Caller], Awaitable[Any]]
"""A route's handler: ``(body, caller) -> the JSON-ready reply``."""


class _Disconnected(Exception):
    """The client went away before its body was read."""


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _json_content(scope: MutableMapping[str, Any]) -> bool:
    """No ``Content-Type``, or a JSON one (``application/json``, ``application/*+json``)."""
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))
    return True


async def _reply(send: Send, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class HotRoutes:
    """ASGI middleware: answer ``POST`` to the paths of ``routes`` (path -> body model and
    handler) itself; pass every other request on to the application."""

    def __init__(self, app: ASGIApp, routes: Mapping[str, tuple[type[BaseModel], Handler]]):
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Serve a hot route, or hand the request on."""
        route = self.routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        model, handler = route
        try:
            body = await _body(receive)
        except _Disconnected:
            return
        except Exception as exc:  # over the body limit (TooLarge)
            await self._error(send, exc, scope["path"])
            return
        if not _json_content(scope):
            await _reply(send, 400, to_json(error_body("ValidationError", "body: send a JSON object (Content-Type: application/json)")))
            return
        try:
            parsed = model.model_validate_json(body)
        except PydanticValidationError as exc:
            await _reply(send, 400, to_json(error_body("ValidationError", validation_message(exc.errors(), ("body",)))))
            return
        try:
            payload = to_json(await handler(parsed, caller_of(scope)), inf_nan_mode="null")
        except Exception as exc:
            await self._error(send, exc, scope["path"])
            return
        await _reply(send, 200, payload)

    @staticmethod
    async def _error(send: Send, exc: Exception, path: str) -> None:
        status, body, headers = error_reply(exc, path)
        await _reply(send, status, to_json(body), headers)
