"""The FastAPI application: one built :class:`memcore.Memory` served under ``/v1``.

Every route is one verb of ``Memory`` with a JSON body of its own (:mod:`.schemas`), run in
a worker thread inside the caller's scope (:mod:`.tenancy`) and under the server's limits
(:mod:`.limits`). Errors are ``{"error": {"type", "message"}}`` with the status of
:mod:`.wire`; an unexpected exception is logged here and answered with a bare 500
``InternalError`` (no traceback reaches a client).

Routes (OpenAPI 3.1 at ``/openapi.json``, interactive docs at ``/docs``):

=================================  ============================================
``GET  /v1/health``                liveness (no key needed)
``GET  /v1/info``                  service, indexes, plugins, limits, the caller
``POST /v1/insert``                one item (``Memory.insert(text, ...)``)
``POST /v1/insert_many``           many items in one write
``POST /v1/upsert``                insert or replace
``POST /v1/update``                change fields of one record
``POST /v1/get``                   by ids, or by where / where_document / scope (a page: ``offset``, ``limit``)
``POST /v1/delete``                by ids, where, where_document and/or scope
``POST /v1/forget``                everything of a scope
``POST /v1/count``                 how many (where, where_document, scope, index)
``POST /v1/search``                retrieve (text or vector), or with ``explain`` the pipeline's hits
``POST /v1/retrieve_many``         retrieve for several query texts, one result list each
``POST /v1/history``               every version of one record, oldest first
``GET|PATCH|DELETE /v1/records/{id}``  the same verbs for one record, REST-style
``POST /mcp``                      the MCP tools over streamable HTTP (:mod:`.mcp_tools`; ``server.mcp``)
=================================  ============================================

Every route but ``/v1/health`` (and the schema and docs) needs a key when keys are declared;
the key guard (:mod:`.guard`) checks it before the body is read.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import memcore
from memcore import MemcoreError, Record, ValidationError
from memcore.plugin import get_logger

from .batching import search_batch
from .calls import Calls
from .config import ServerConfig
from .guard import KeyGuard, request_caller
from .hotpath import Handler, HotRoutes
from .limits import BodyLimit, TooLarge, check_batch, check_filters, check_k
from .schemas import (
    CountBody,
    CountOut,
    DeleteBody,
    DeletedOut,
    ErrorOut,
    ForgetBody,
    ForgetOut,
    GetBody,
    HealthOut,
    HistoryBody,
    HistoryOut,
    IdOut,
    IdsOut,
    InfoOut,
    InsertMany,
    InsertOne,
    RecordOut,
    RecordsOut,
    ResultsManyOut,
    RetrieveManyBody,
    ScopeIn,
    SearchBody,
    SearchOut,
    UpdateBody,
    UpdatedOut,
    UpsertBody,
    _Body,
)
from .tenancy import Caller, Served
from .replies import error_reply, validation_message
from .warmup import warm_embedders
from .wire import INTERNAL_ERROR, REQUEST_TOO_LARGE, error_body

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["create_app", "create_mcp_app", "API_VERSION", "MCP_PATH"]

API_VERSION = "v1"
PUBLIC_PATHS = ("/v1/health",)
"""The routes under ``/v1`` served without a key."""
log = get_logger("memcore.server")

ERROR_STATUSES = {
    400: "Invalid input (ValidationError and its kinds, malformed JSON, a limit on k or the filter).",
    401: "No API key, or an unknown one.",
    403: "Outside the API key's scope.",
    404: "No such record (in the caller's scope).",
    409: "A different record already has this id.",
    413: "The body, or the number of items, is over the server's limit.",
    423: "Another process holds the memory's writer lock.",
    500: "An unexpected error (details in the server's log).",
    503: "The store cannot be reached.",
    504: "The call took longer than the server's request_timeout_s.",
}


class _PatchBody(_Body):
    """The fields of ``PATCH /v1/records/{id}`` (those of ``POST /v1/update`` but the id)."""

    text: str | None = None
    metadata: dict[str, Any] | None = None
    merge_metadata: bool = False
    vectors: dict[str, list[float]] | None = None
    scope: ScopeIn | None = None


def _scope(scope: ScopeIn | None) -> dict[str, str] | None:
    return scope.as_dict() or None if scope is not None else None


def record_out(record: Record, with_vectors: bool = False) -> dict[str, Any]:
    """A record as the API returns it."""
    return record.to_dict(with_vectors=with_vectors)


def _result_out(result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result)
    out["score"] = float(out["score"])
    return out


def _hit_out(hit: memcore.Hit) -> dict[str, Any]:
    out = hit.to_dict()
    out["score"] = float(hit.score)
    out["raw"] = None if hit.raw is None else float(hit.raw)
    out["provenance"] = [{"source": c.source, "rank": int(c.rank), "score": float(c.score)} for c in hit.provenance]
    out["explanation"] = hit.explain()
    if hit.record is not None:
        out["record"] = record_out(hit.record)
    return out


def _plugins() -> list[dict[str, Any]]:
    found = []
    for ep in entry_points(group="memcore"):
        dist = ep.dist
        found.append({"name": ep.name, "distribution": dist.name if dist else None, "version": dist.version if dist else None})
    return sorted(found, key=lambda p: p["name"])


def create_app(memory: memcore.Memory, config: ServerConfig | None = None, *, owns_memory: bool = False) -> "FastAPI":
    """The application serving ``memory``: owned by the caller, who closes it, unless
    ``owns_memory`` (the application closes it when it shuts down: a worker process of
    ``memcore serve --workers``). Before it serves, its lifespan warms the embedders
    (``server.warm``, :mod:`.warmup`)."""
    from fastapi import APIRouter, Depends, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    from . import __version__
    from .front import FrontedFastAPI

    config = config or ServerConfig()
    ring = config.key_ring()
    calls = Calls(memory, config.request_timeout_s, config.threads)
    mcp_routes, mcp_lifespan = _mcp(memory, config)
    app = FrontedFastAPI(
        title="memcore",
        version=__version__,
        description="A memcore memory over HTTP (memcore-server): write, read, search and forget memories, scoped by API key.",
        docs_url="/docs" if config.docs else None,
        redoc_url=None,
        lifespan=_lifespan(memory, config, mcp_lifespan, on_shutdown=(calls.close, *((memory.close,) if owns_memory else ()))),
    )
    app.state.memory = memory
    app.state.config = config
    app.state.calls = calls  # the worker pools (their batch count: calls.batches)

    def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(status_code=status, content=error_body(kind, message), headers=headers)

    async def _failed(request: Request, exc: Exception) -> JSONResponse:
        """Every memcore error, the server's own (time and size limits) and anything unexpected (:mod:`.replies`)."""
        status, body, headers = error_reply(exc, request.url.path)
        return JSONResponse(status_code=status, content=body, headers=headers)

    app.add_exception_handler(MemcoreError, _failed)
    app.add_exception_handler(Exception, _failed)  # in the server-error middleware, which re-raises to uvicorn

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(400, "ValidationError", validation_message(exc.errors()))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, TooLarge):
            return error(413, REQUEST_TOO_LARGE, str(exc.__cause__))
        kinds = {404: "NotFoundError", 405: "MethodNotAllowed"}
        kind = kinds.get(exc.status_code, "ValidationError" if exc.status_code < 500 else INTERNAL_ERROR)
        return error(exc.status_code, kind, str(exc.detail), getattr(exc, "headers", None))

    call = calls.run

    # The caller of a request, as the key guard (:mod:`.guard`) authenticated it before the body
    # was read: the guard checks the key, the OpenAPI schema declares the bearer scheme
    # (:func:`_errors_in_schema`); async, so FastAPI runs it on the event loop.
    caller = request_caller

    responses: dict[int | str, dict[str, Any]] = {status: {"model": ErrorOut, "description": text} for status, text in ERROR_STATUSES.items()}
    v1 = APIRouter(prefix=f"/{API_VERSION}", responses=responses)

    @v1.get("/health", response_model=HealthOut, summary="Liveness")
    async def health() -> dict[str, Any]:
        """``{"status": "ok"}`` while the server runs (no key needed)."""
        return {"status": "ok"}

    @v1.get("/info", response_model=InfoOut, summary="What is served")
    async def info(who: Caller = Depends(caller)) -> dict[str, Any]:
        """The service, the indexes (their sizes only for an unrestricted caller), the plugins, the limits and the caller."""

        def run(_: Served) -> dict[str, Any]:
            indexes = memory.collection.list_indexes()
            if who.scope is not None:  # sizes count every tenant's records
                indexes = [{k: v for k, v in i.items() if k != "size"} for i in indexes]
            return {
                "service": {"kind": memory.settings.service.get("kind"), "pipeline": memory.settings.pipeline},
                "indexes": indexes,
                "plugins": _plugins(),
                "limits": config.model_dump(include={"max_body_bytes", "max_batch", "max_k", "max_filter_bytes", "request_timeout_s"}),
                "caller": who.describe(),
            }

        return await call(who, run)

    @v1.post("/insert", response_model=IdOut, summary="Insert one item")
    async def insert(body: InsertOne, who: Caller = Depends(caller)) -> dict[str, Any]:
        """One item through the service (``Memory.insert(text, vector=, metadata=, **options)``); returns its id."""
        item = body.as_item()
        text, metadata = item.pop("text"), item.pop("metadata", None)
        options = {**body.options, **item}
        if set(body.options) & set(item):
            raise ValidationError(f"{sorted(set(body.options) & set(item))} given both as a field and in options")
        return {"id": await call(who, lambda m: m.insert(text, vector=body.vector, metadata=metadata, **options), writes=True)}

    @v1.post("/insert_many", response_model=IdsOut, summary="Insert many items")
    async def insert_many(body: InsertMany, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Many items in one write (``Memory.insert([...])``); returns their ids in order."""
        check_batch(len(body.items), config)
        items = [i.as_item() for i in body.items]
        return {"ids": await call(who, lambda m: m.insert(items), writes=True)}

    @v1.post("/upsert", response_model=IdsOut, summary="Insert or replace")
    async def upsert(body: UpsertBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Insert new records and replace existing ones (``Memory.upsert``); returns the ids."""
        check_batch(len(body.items), config)
        items = [i.as_item() for i in body.items]
        return {"ids": await call(who, lambda m: m.upsert(items, scope=_scope(body.scope)), writes=True)}

    def _update(body: UpdateBody) -> Callable[[Served], dict[str, Any]]:
        return lambda m: {
            "record": record_out(
                m.update(body.id, text=body.text, metadata=body.metadata, merge_metadata=body.merge_metadata, vectors=body.vectors, scope=_scope(body.scope))
            )
        }

    @v1.post("/update", response_model=UpdatedOut, response_model_exclude_unset=True, summary="Change one record")
    async def update(body: UpdateBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Change the text, metadata (replaced or merged) or vectors of one record (``Memory.update``)."""
        return await call(who, _update(body), writes=True)

    def _get(body: GetBody) -> Callable[[Served], dict[str, Any]]:
        def run(m: Served) -> dict[str, Any]:
            found = m.get(body.ids, where=body.where, scope=_scope(body.scope), limit=body.limit, offset=body.offset, where_document=body.where_document)
            records = [found] if isinstance(found, Record) else found
            return {"records": [record_out(r, body.with_vectors) for r in records]}

        return run

    @v1.post("/get", response_model=RecordsOut, response_model_exclude_unset=True, summary="Get records")
    async def get(body: GetBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Records by ids (in order; 404 when one is unknown or outside the scope), or a page
        (``offset``, ``limit``; insertion order) of those matching where / where_document / scope."""
        if body.ids is not None:
            check_batch(len(body.ids), config, "ids")
        check_filters(body.where, body.where_document, config)
        if body.limit is not None:
            check_batch(body.limit, config, "records")
        return await call(who, _get(body))

    def _delete(body: DeleteBody) -> Callable[[Served], dict[str, Any]]:
        return lambda m: {"deleted": m.delete(body.ids, where=body.where, scope=_scope(body.scope), where_document=body.where_document)}

    @v1.post("/delete", response_model=DeletedOut, summary="Delete records")
    async def delete(body: DeleteBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """By ids (404 and nothing deleted when one is unknown), by where / where_document filters and/or a scope (``Memory.delete``)."""
        if body.ids is not None:
            check_batch(len(body.ids), config, "ids")
        check_filters(body.where, body.where_document, config)
        return await call(who, _delete(body), writes=True)

    @v1.post("/forget", response_model=ForgetOut, response_model_exclude_unset=True, summary="Forget a scope")
    async def forget(body: ForgetBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Everything of a non-empty scope, in one commit (``Memory.forget``); returns what went by kind."""
        return await call(who, lambda m: m.forget(_scope(body.scope)), writes=True)

    @v1.post("/count", response_model=CountOut, summary="Count records")
    async def count(body: CountBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """How many records match (``Memory.count``): only the caller's scope is counted."""
        check_filters(body.where, body.where_document, config)
        count = lambda m: m.count(where=body.where, scope=_scope(body.scope), index=body.index, where_document=body.where_document)  # noqa: E731
        return {"count": await call(who, count)}

    @v1.post("/search", response_model=SearchOut, response_model_exclude_unset=True, summary="Search")
    async def search(body: SearchBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Through the service (``Memory.retrieve``: a query text and/or a vector), or with ``explain``
        through the pipeline or one ``index`` (``Memory.query``: hits with provenance and an explanation)."""
        check_k(body.k, config)
        check_filters(body.where, body.where_document, config)
        scope = _scope(body.scope)
        if body.explain:
            if body.query is None or body.vector is not None or body.options:
                raise ValidationError("explain runs the pipeline on a query text: give query, without vector or options")
            text = body.query

            def query(m: Served) -> list[memcore.Hit]:
                return m.query(text, k=body.k, where=body.where, index=body.index, scope=scope, where_document=body.where_document, min_score=body.min_score)

            return {"results": [_hit_out(h) for h in await call(who, query)]}
        if body.index is not None:
            raise ValidationError("index is for explain (Memory.query); a retrieve goes through the service")
        options = dict(body.options)
        if scope is not None:
            options["scope"] = scope
        found = await call(
            who,
            lambda m: m.retrieve(
                body.query, vector=body.vector, where=body.where, k=body.k, where_document=body.where_document, min_score=body.min_score, **options
            ),
            batch=search_batch(body, options),
        )
        return {"results": [_result_out(r) for r in found]}

    @v1.post("/retrieve_many", response_model=ResultsManyOut, response_model_exclude_unset=True, summary="Search for several queries")
    async def retrieve_many(body: RetrieveManyBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """``Memory.retrieve_many``: one result list per query (texts, vectors or both; in order), the texts embedded in one batch;
        at most ``max_batch`` queries (413 above)."""
        check_batch(max(len(body.queries or ()), len(body.vectors or ())), config, "queries")
        check_k(body.k, config)
        check_filters(body.where, body.where_document, config)
        options = dict(body.options)
        scope = _scope(body.scope)
        if scope is not None:
            options["scope"] = scope

        def run(m: Served) -> list[list[dict[str, Any]]]:
            return m.retrieve_many(
                body.queries, vectors=body.vectors, k=body.k, where=body.where, where_document=body.where_document, min_score=body.min_score, **options
            )

        return {"results": [[_result_out(r) for r in found] for found in await call(who, run)]}

    @v1.post("/history", response_model=HistoryOut, summary="The versions of one record")
    async def history(body: HistoryBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """``Memory.history(id, scope=)``: every version, oldest first; 404 when the id has no
        history or is outside the caller's scope (the same answer: nothing tells them apart)."""
        return {"versions": await call(who, lambda m: m.history(body.id, scope=_scope(body.scope)))}

    @v1.get("/records/{id}", response_model=RecordOut, response_model_exclude_unset=True, summary="Get one record")
    async def get_one(id: str, who: Caller = Depends(caller)) -> dict[str, Any]:
        """One record by id (404 when unknown or outside the caller's scope)."""
        return (await call(who, _get(GetBody(ids=[id]))))["records"][0]  # type: ignore[no-any-return]

    @v1.patch("/records/{id}", response_model=RecordOut, response_model_exclude_unset=True, summary="Change one record")
    async def patch_one(id: str, body: _PatchBody, who: Caller = Depends(caller)) -> dict[str, Any]:
        """``POST /v1/update`` with the id in the path."""
        fields = body.model_dump(exclude_unset=True)
        return (await call(who, _update(UpdateBody(id=id, **fields)), writes=True))["record"]  # type: ignore[no-any-return]

    @v1.delete("/records/{id}", response_model=DeletedOut, summary="Delete one record")
    async def delete_one(id: str, who: Caller = Depends(caller)) -> dict[str, Any]:
        """Delete one record by id (404 when unknown or outside the caller's scope)."""
        return await call(who, _delete(DeleteBody(ids=[id])), writes=True)

    app.include_router(v1)
    protected, limit = ("/v1/", MCP_PATH), config.max_body_bytes
    app.add_middleware(BodyLimit, max_bytes=limit)
    app.add_middleware(KeyGuard, ring=ring, protected=protected, public=PUBLIC_PATHS)  # outermost: the key is checked before the body is read
    hot: dict[str, tuple[type[_Body], Handler]] = {"/v1/search": (SearchBody, search), "/v1/get": (GetBody, get), "/v1/insert": (InsertOne, insert)}
    guard = KeyGuard(_never, ring=ring, protected=protected, public=PUBLIC_PATHS)  # the same checks, in front of the stack (.front)
    app.hot_routes = HotRoutes(hot, guard, BodyLimit(_never, max_bytes=limit))
    app.router.routes.extend(mcp_routes)
    _errors_in_schema(app)
    return app


async def _never(scope: Any, receive: Any, send: Any) -> None:
    """The application behind the hot routes' guard and limit, which only check (never called)."""
    raise RuntimeError("the hot routes' guard and body limit call no application")


MCP_PATH = "/mcp"
"""Where ``memcore serve`` serves the MCP tools (streamable HTTP)."""


def create_mcp_app(memory: memcore.Memory, config: ServerConfig | None = None) -> Any:
    """An application serving only the MCP tools at ``/mcp`` (``memcore mcp --transport http``),
    with the key guard and the body limit of :func:`create_app`."""
    from starlette.applications import Starlette

    config = (config or ServerConfig()).model_copy(update={"mcp": True})
    routes, mcp_lifespan = _mcp(memory, config)
    app = Starlette(routes=routes, lifespan=_lifespan(memory, config, mcp_lifespan))
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(KeyGuard, ring=config.key_ring(), protected=(MCP_PATH,))
    return app


def _mcp(memory: memcore.Memory, config: ServerConfig) -> tuple[list[Any], Any]:
    """The routes of the MCP tools over streamable HTTP and the lifespan running their session
    manager (none when ``server.mcp`` is off). Stateless: every POST carries its key, and each
    tool call runs in the scope of the key of its own request, never of an earlier one."""
    if not config.mcp:
        return [], None
    from .mcp_tools import create_mcp_server

    server = create_mcp_server(memory)
    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=config.host, max_request_body_size=config.max_body_bytes
    )
    return list(mcp_app.routes), lambda _app: server.session_manager.run()


BEARER = {"type": "http", "scheme": "bearer", "description": "An API key declared in [server.keys] (not needed when none is declared)."}
"""The security scheme of the schema: the key guard (:mod:`.guard`) checks it, before any route runs."""


def _lifespan(memory: memcore.Memory, config: ServerConfig, mcp_lifespan: Any, on_shutdown: tuple[Callable[[], None], ...] = ()) -> Any:
    """The application's lifespan: at start-up, before anything is served, warm the embedders
    (``server.warm``), then run the MCP session manager (when served); at shut-down, call
    ``on_shutdown`` in order."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if config.warm:
            warmed = warm_embedders(memory)  # on the loop, blocking: nothing is served yet
            log.info("server.warmed", spaces=warmed)
        try:
            if mcp_lifespan is None:
                yield
            else:
                async with mcp_lifespan(app):
                    yield
        finally:
            for close in on_shutdown:
                close()

    return lifespan


def _errors_in_schema(app: "FastAPI") -> None:
    """Document the errors as they are sent (a 400 ErrorOut, not FastAPI's default 422) and
    the bearer key on every operation the key guard protects."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("securitySchemes", {})["HTTPBearer"] = BEARER
            for route, path in schema.get("paths", {}).items():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
                    if route.startswith(f"/{API_VERSION}/") and route not in PUBLIC_PATHS:
                        operation["security"] = [{"HTTPBearer": []}]
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
