"""The hot routes (``POST /v1/search``, ``/v1/get``, ``/v1/insert``) in front of FastAPI's whole stack.

A server under load is bound by one core (Python's GIL), so what each request costs the
event loop caps the requests per second. The routes most calls take are answered by
:class:`HotRoutes`, called first by the application itself (:class:`.front.FrontedFastAPI`,
the application uvicorn serves), before any of FastAPI's or Starlette's middlewares, its
routing and its dependency solving. In one callable it does what such a request needs, in
the order the middleware stack does it:

1. the key (the key guard's check, :meth:`.guard.KeyGuard.admit`: a 401 before the body is read);
2. the declared ``Content-Length`` (:meth:`.limits.BodyLimit.admit`: a 413), then the body,
   counted as it arrives (:meth:`.limits.BodyLimit.read`: a 413 past the limit);
3. a JSON body (unless its ``Content-Type`` names something else, as FastAPI reads it),
   parsed and validated in one pass (pydantic-core's ``model_validate_json``);
4. the route's handler (the same function FastAPI routes to, with the caller the key
   authenticated), its reply serialised in one pass (``pydantic_core.to_json``).

Every failure is answered as the FastAPI routes answer it (:mod:`.replies`), and nothing
unexpected escapes as a traceback (a bare 500 ``InternalError``, logged). Every other
request goes through FastAPI unchanged; the hot routes stay declared in FastAPI for the
OpenAPI schema (and still serve there when the application is mounted under another path).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Mapping, MutableMapping

from pydantic import BaseModel, ValidationError as PydanticValidationError
from pydantic_core import to_json

from .guard import KeyGuard, caller_of, route_path
from .limits import BodyLimit
from .replies import error_reply, validation_message
from .tenancy import Caller
from .wire import error_body

__all__ = ["HotRoutes", "Handler", "read_headers"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Handler = Callable[[Any, Caller], Awaitable[Any]]
"""A route's handler: ``(body, caller) -> the JSON-ready reply``."""

_JSON_REPLY = (b"content-type", b"application/json")
_NOT_JSON = to_json(error_body("ValidationError", "body: send a JSON object (Content-Type: application/json)"))


def _json_media(value: bytes) -> bool:
    """A JSON ``Content-Type`` (``application/json``, ``application/*+json``)."""
    media = value.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


async def _reply(send: Send, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
    raw = [_JSON_REPLY, (b"content-length", str(len(body)).encode())]
    if headers:
        raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def read_headers(headers: Iterable[tuple[bytes, bytes]]) -> tuple[bytes | None, bytes | None, bytes | None, bool]:
    """What a hot route reads of a request's header fields (lower-cased names), in one pass:
    the first ``Authorization``, the last ``Content-Length``, the first ``Content-Type``, and
    whether a ``Transfer-Encoding`` is declared."""
    authorization = length = media = None
    coded = False
    for name, value in headers:
        if name == b"authorization":
            authorization = value if authorization is None else authorization
        elif name == b"content-length":
            length = value
        elif name == b"content-type":
            media = value if media is None else media
        elif name == b"transfer-encoding":
            coded = True
    return authorization, length, media, coded


class HotRoutes:
    """Answer ``POST`` to the paths of ``routes`` (path -> body model and handler) behind
    ``guard``'s key check and ``limit``'s body limit (see the module)."""

    def __init__(self, routes: Mapping[str, tuple[type[BaseModel], Handler]], guard: KeyGuard, limit: BodyLimit):
        self.routes = dict(routes)
        self.guard = guard
        self.limit = limit

    def serves(self, scope: MutableMapping[str, Any]) -> bool:
        """Whether this request is one of the hot routes."""
        return scope["type"] == "http" and scope["method"] == "POST" and route_path(scope) in self.routes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Serve one request :meth:`serves` took."""
        try:
            await self._serve(scope, receive, send)
        except Exception as exc:  # a safety net: never a traceback to the client (logged by error_reply)
            try:
                await self._error(send, exc, route_path(scope))
            except Exception:  # the reply had started: uvicorn ends the connection and logs it
                raise exc from None

    async def _serve(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        path = route_path(scope)
        authorization, length, media, _ = read_headers(scope.get("headers") or ())
        if self.guard.protects(path) and not await self.guard.admit(scope, authorization, send):
            return
        if not await self.limit.admit(length, send):
            return
        try:
            who = caller_of(scope)
            body = await self.limit.read(receive)
        except Exception as exc:  # over the body limit (TooLarge)
            await self._error(send, exc, path)
            return
        if body is None:  # the client went away
            return
        status, payload, headers = await self.answer(path, who, media, body)
        await _reply(send, status, payload, headers)

    async def answer(self, path: str, who: Caller, media: bytes | None, body: bytes) -> tuple[int, bytes, Mapping[str, str] | None]:
        """The reply to a request to the hot route ``path`` by ``who`` (authenticated, its body
        within the limit) with ``body`` of the ``Content-Type`` ``media`` (None: not declared):
        its status, its JSON body and its extra headers (or None). Steps 3 and 4 of the module;
        a failure is the reply the FastAPI routes would give."""
        if media is not None and not _json_media(media):
            return 400, _NOT_JSON, None
        model, handler = self.routes[path]
        try:
            parsed = model.model_validate_json(body)
        except PydanticValidationError as exc:
            return 400, to_json(error_body("ValidationError", validation_message(exc.errors(), ("body",)))), None
        try:
            return 200, to_json(await handler(parsed, who), inf_nan_mode="null"), None
        except Exception as exc:
            return self.failed(exc, path)

    @staticmethod
    def failed(exc: BaseException, path: str) -> tuple[int, bytes, Mapping[str, str] | None]:
        """The reply to a request to ``path`` that ended with ``exc`` (:func:`.replies.error_reply`, its body as JSON)."""
        status, body, headers = error_reply(exc, path)
        return status, to_json(body), headers

    @classmethod
    async def _error(cls, send: Send, exc: Exception, path: str) -> None:
        await _reply(send, *cls.failed(exc, path))
