"""The HTTP protocol ``memcore serve`` runs: uvicorn's httptools protocol, answering the hot routes itself.

A server under load is bound by one core (its GIL), and a profile of the loaded server put
more of that core's time into the HTTP machinery of a hot route's request than into the
memory's work: uvicorn builds a request-response cycle (with an event) and a task running
the ASGI application, hands the body over as messages, checks every reply header and writes
a reply's head and body in two socket writes. :class:`HotRoutesProtocol` is uvicorn's own
:class:`~uvicorn.protocols.http.httptools_impl.HttpToolsProtocol` (its parser, its keep-alive,
flow control, pipelining and shutdown) that answers the requests it can answer at once itself:

- ``POST`` to a hot route (:class:`.hotpath.HotRoutes`: ``/v1/search``, ``/v1/get``,
  ``/v1/insert``) in HTTP/1.1, with a ``Content-Length`` within ``max_body_bytes``, no
  ``Transfer-Encoding``, no ``Expect``, a known key (or no keys declared), no request of the
  connection still unanswered, the application served at the root (no ``root_path``),
  uvicorn's access log off (``access_log=False``, as ``memcore serve`` runs below
  ``--log-level info``) and no concurrency limit;
- its body is collected as the parser gives it, then :meth:`.hotpath.HotRoutes.answer` (the
  same validation, handler and replies as through ASGI) runs in one task, and the reply
  (uvicorn's default headers, ``content-type``, ``content-length``, and ``connection: close``
  when the connection ends) goes out in one write.

Every other request goes through uvicorn and the ASGI application unchanged, so a refusal
(a missing key's 401, an oversized body's 413, an ``Expect: 100-continue``, a chunked body)
is answered there, as before. A pipelined request arriving while a hot request is answered
waits, as uvicorn's pipelined requests do, and starts when the reply is written.

Where the application is not ``create_app``'s (or a middleware was added to it), every
request goes through ASGI: the protocol finds the hot routes only on a
:class:`.front.FrontedFastAPI` behind uvicorn's proxy-headers middleware.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

import httptools
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .front import FrontedFastAPI
from .hotpath import HotRoutes, read_headers
from .tenancy import Caller

__all__ = ["HotRoutesProtocol", "hot_routes_of"]


def hot_routes_of(app: Any) -> HotRoutes | None:
    """The hot routes of the application uvicorn serves (``config.loaded_app``): those of a
    :class:`.front.FrontedFastAPI`, found under uvicorn's proxy-headers middleware only (any
    other wrapper must see every request: None then)."""
    while isinstance(app, ProxyHeadersMiddleware):
        app = app.app
    return app.hot_routes if isinstance(app, FrontedFastAPI) else None


class _NoEvent:
    """What uvicorn sets on a request's ``message_event`` when the connection is lost: nothing waits on it here."""

    @staticmethod
    def set() -> None:
        """Nothing to wake."""


_NO_EVENT = _NoEvent()


class HotRequest:
    """A hot route's request while it is read and answered: what uvicorn's protocol keeps of
    its current request (``response_complete``, ``disconnected``, ``keep_alive``,
    ``message_event``) and what the answer needs (the route, the caller, the body's media
    type and its chunks)."""

    __slots__ = ("response_complete", "disconnected", "keep_alive", "message_event", "path", "who", "media", "chunks")

    def __init__(self, path: str, who: Caller, media: bytes | None, keep_alive: bool):
        self.response_complete = False
        self.disconnected = False
        self.keep_alive = keep_alive
        self.message_event = _NO_EVENT
        self.path = path
        self.who = who
        self.media = media
        self.chunks: list[bytes] = []


class HotRoutesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol answering the hot routes' requests itself (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        found = hot_routes_of(self.app)
        self.hot: HotRoutes | None = (
            found if found is not None and not self.config.access_log and not self.root_path and self.limit_concurrency is None else None
        )
        """The hot routes this protocol answers (None: every request goes through ASGI)."""

    def on_headers_complete(self) -> None:
        """Take a hot route's request (:meth:`_take`), or let uvicorn start the application on it."""
        request = self._take() if self.hot is not None else None
        if request is None:
            super().on_headers_complete()
            return
        self.cycle = request  # type: ignore[assignment]  # uvicorn reads the four attributes HotRequest keeps

    def _take(self) -> HotRequest | None:
        """The request whose head was just parsed as a :class:`HotRequest`, if this protocol answers it (see the module)."""
        hot, parser = self.hot, self.parser
        assert hot is not None
        if self.expect_100_continue or parser.get_method() != b"POST" or parser.get_http_version() != "1.1" or parser.should_upgrade():
            return None
        if self.cycle is not None and not self.cycle.response_complete:  # a request before it is still answered: it queues
            return None
        raw = httptools.parse_url(self.url).path
        if b"%" in raw:
            return None
        try:
            path = raw.decode("ascii")
        except UnicodeDecodeError:  # uvicorn answers it
            return None
        if path not in hot.routes:
            return None
        authorization, length, media, coded = read_headers(self.headers)  # as HotRoutes reads them
        if coded or length is None or not length.isdigit() or int(length) > hot.limit.max_bytes:
            return None
        who = hot.guard.known(authorization) if hot.guard.protects(path) else None
        if who is None:
            return None
        return HotRequest(path, who, media, parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        """A chunk of the body: kept for a hot request, else uvicorn's."""
        request: object = self.cycle
        if type(request) is HotRequest:
            request.chunks.append(body)
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        """The whole request: a hot one is answered in a task of its own, else uvicorn's."""
        request: object = self.cycle
        if type(request) is not HotRequest:
            super().on_message_complete()
            return
        chunks = request.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        request.chunks = []
        task = self.loop.create_task(self._answer(request, body))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _answer(self, request: HotRequest, body: bytes) -> None:
        """Answer ``request`` in one write, then hand the connection back to uvicorn (keep-alive, the next pipelined request)."""
        hot = self.hot
        assert hot is not None
        try:
            status, payload, headers = await hot.answer(request.path, request.who, request.media, body)
        except asyncio.CancelledError:  # the server stops past its graceful time: no reply, the connection ends
            request.response_complete = True
            self.transport.close()
            raise
        except Exception as exc:  # a safety net: answer() already answers a handler's failure
            status, payload, headers = hot.failed(exc, request.path)
        if self.flow.write_paused and not request.disconnected:
            await self.flow.drain()
        if request.disconnected:  # the client went away while the call ran (or while the buffer drained)
            request.response_complete = True
            return
        self.transport.write(self._reply(request, status, payload, headers))
        request.response_complete = True
        if not request.keep_alive:
            self.transport.close()
        self.on_response_complete()

    def _reply(self, request: HotRequest, status: int, payload: bytes, headers: Mapping[str, str] | None) -> bytes:
        """The whole HTTP reply: the status line, uvicorn's default headers, the JSON body's, ``headers``, the body."""
        parts = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            parts += (name, b": ", value, b"\r\n")
        parts += (b"content-type: application/json\r\ncontent-length: ", str(len(payload)).encode("ascii"), b"\r\n")
        for field, text in (headers or {}).items():  # the error replies' own (WWW-Authenticate)
            parts += (field.lower().encode("latin-1"), b": ", text.encode("latin-1"), b"\r\n")
        if not request.keep_alive:
            parts.append(b"connection: close\r\n")
        parts += (b"\r\n", payload)
        return b"".join(parts)
