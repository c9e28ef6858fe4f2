"""The HTTP API server (FastAPI): ColBERT's create / add / search API over :class:`.served.IndexRoot`.

Endpoints (JSON in and out, OpenAPI docs at ``/docs``):

- ``POST /api/create-index`` ``{index_name, collection_tsv_data, metadata | hirag_metadata, config, overwrite}``
- ``POST /api/add-to-index`` ``{index_name, collection_tsv_data, metadata | hirag_metadata}``
- ``GET /api/search?query=&k=&index_name=`` -> ``{query, topk: [{pid, score, rank, text, metadata}]}``
- ``POST /api/search`` ``{index_name, query, k, pids?, exhaustive?}`` (``pids``: allowed passages)
- ``DELETE /api/indexes/{index_name}/passages`` ``{pids: [...]}``
- ``DELETE /api/indexes/{index_name}``; ``GET /api/indexes``; ``GET /api/indexes/{index_name}``; ``GET /api/health``

Errors are ``{"error": {"type", "message"}}`` with 400 (bad input, a config setting only the
server chooses), 401 (API keys declared, none or an unknown one sent), 404 (unknown index),
409 (index exists), 413 (request too large: checked while the body is read), 422 (malformed
JSON body), 500 (damaged index, or an unexpected failure), 503/507 (the server could not
write: its disk is full); a 5xx never names server paths (the server log has the details).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from memcore import AuthenticationError, PermissionDeniedError, StorageFullError, StoreError
from memcore.plugin import ApiKeyRing, CorruptError, MemcoreError, NotFoundError, ValidationError, get_logger

from .access import ApiKeyGate
from .body_limit import BodyLimit
from .config import ColbertQueryMode
from .names import check_index_name
from .served import ConflictError, IndexRoot

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["create_app", "DEFAULT_MAX_BODY"]

log = get_logger("memcore.colbert")

DEFAULT_MAX_BODY = 64 * 1024 * 1024
MAX_K = 10_000


class CreateIndex(BaseModel):
    """Body of POST /api/create-index (``hirag_metadata``: the integration design's name for ``metadata``)."""

    model_config = ConfigDict(extra="forbid")
    index_name: str
    collection_tsv_data: str
    metadata: dict[str, Any] | None = None
    hirag_metadata: dict[str, Any] | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    overwrite: bool = False


class AddToIndex(BaseModel):
    """Body of POST /api/add-to-index."""

    model_config = ConfigDict(extra="forbid")
    index_name: str
    collection_tsv_data: str
    metadata: dict[str, Any] | None = None
    hirag_metadata: dict[str, Any] | None = None


class SearchBody(BaseModel):
    """Body of POST /api/search (``pids``: only these passages)."""

    model_config = ConfigDict(extra="forbid")
    index_name: str
    query: str
    k: int = Field(10, ge=1, le=MAX_K)
    pids: list[str] | None = None
    exhaustive: bool = False


class DeletePassages(BaseModel):
    """Body of DELETE /api/indexes/{index_name}/passages."""

    model_config = ConfigDict(extra="forbid")
    pids: list[str]


_STATUS: tuple[tuple[type[MemcoreError], int], ...] = (
    (NotFoundError, 404),
    (ConflictError, 409),
    (ValidationError, 400),
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (StorageFullError, 507),
    (StoreError, 503),
    (CorruptError, 500),
)
"""HTTP status of each memcore error, the first matching class wins; any other is 400."""


def _status(exc: MemcoreError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 400)


def _public_message(exc: MemcoreError, status: int) -> str:
    """What the caller is told: a 4xx names the problem with its input; a 5xx (damaged index
    files, a full disk) would name server paths, so it is told only the kind of failure."""
    if status < 500:
        return str(exc)
    if isinstance(exc, StorageFullError):
        return "the server's disk is full; nothing of this request was saved (details in the server log)"
    if isinstance(exc, StoreError):
        return "the server could not write the index (details in the server log)"
    return "the index data on the server is damaged (details in the server log)"


def create_app(
    root: Path,
    *,
    defaults: dict[str, Any] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    max_passages: int = 100_000,
    keys: ApiKeyRing | None = None,
) -> FastAPI:
    """The FastAPI application serving the indexes under ``root``.

    ``defaults``: the server's own index settings, its token embedder among them (a request's
    ``config`` may only choose what :mod:`.policy` allows); ``max_body``: largest request body
    in bytes (enforced while reading); ``max_passages``: passages per request; ``keys``: the
    declared API keys (none: every call is accepted). ConfigError for bad ``defaults``.
    """
    from fastapi import Body, FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    class SafeJSONResponse(JSONResponse):
        """UTF-8 JSON; text that cannot be UTF-8 (a lone surrogate) is sent \\u-escaped, never a 500."""

        def render(self, content: Any) -> bytes:
            try:
                return super().render(content)
            except UnicodeEncodeError:
                return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")

    indexes = IndexRoot(Path(root), defaults, max_passages=max_passages)
    app = FastAPI(
        title="memcore colbert",
        description="ColBERT-style late-interaction indexes over HTTP (memcore-colbert).",
        default_response_class=SafeJSONResponse,
    )
    app.state.indexes = indexes
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(ApiKeyGate, keys=keys or ApiKeyRing())  # added last: runs first, before the body is read

    def error(status: int, kind: str, message: str) -> JSONResponse:
        return SafeJSONResponse(status_code=status, content={"error": {"type": kind, "message": message}})

    @app.exception_handler(MemcoreError)
    async def _memcore_error(request: Request, exc: MemcoreError) -> JSONResponse:
        status = _status(exc)
        if status >= 500:
            log.error("colbert.request_failed", path=request.url.path, error=type(exc).__name__, detail=str(exc))
        return error(status, type(exc).__name__, _public_message(exc, status))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(422, "RequestValidationError", f"{where[:200]}: {first.get('msg')}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("colbert.internal_error", path=request.url.path, error=type(exc).__name__, detail=str(exc)[:2000])
        return error(500, "InternalError", "the server failed to handle this request (details in the server log)")

    def metadata_of(body: CreateIndex | AddToIndex) -> dict[str, Any] | None:
        if body.metadata is not None and body.hirag_metadata is not None:
            raise ValidationError("give metadata or hirag_metadata, not both")
        return body.metadata if body.metadata is not None else body.hirag_metadata

    def result(query: str, topk: list[dict[str, Any]]) -> dict[str, Any]:
        return {"query": query, "topk": topk}

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        """Liveness: the root directory and the number of indexes."""
        return {"status": "ok", "root": str(indexes.root), "indexes": len(indexes.names())}

    @app.post("/api/create-index")
    async def create_index(body: CreateIndex) -> dict[str, Any]:
        """Create an index from TSV passages (409 if it exists unless ``overwrite``)."""
        served = await run_in_threadpool(indexes.create, body.index_name, body.collection_tsv_data, metadata_of(body), body.config, body.overwrite)
        return {"status": "success", "index_name": served.name, "index_path": str(indexes.root / served.name), "passages": len(served.engine)}

    @app.post("/api/add-to-index")
    async def add_to_index(body: AddToIndex) -> dict[str, Any]:
        """Add (or replace) passages of an existing index."""
        served = await run_in_threadpool(indexes.add, body.index_name, body.collection_tsv_data, metadata_of(body))
        return {"status": "success", "index_name": served.name, "passages": len(served.engine)}

    @app.get("/api/search")
    async def search(
        query: str = Query(..., min_length=1), index_name: str = Query(...), k: int = Query(10, ge=1, le=MAX_K), exhaustive: bool = False
    ) -> dict[str, Any]:
        """The best ``k`` passages of ``index_name`` for ``query``."""
        mode = ColbertQueryMode(exhaustive=exhaustive) if exhaustive else None
        return result(query, await run_in_threadpool(indexes.search, check_index_name(index_name), query, k, mode))

    @app.post("/api/search")
    async def search_post(body: SearchBody) -> dict[str, Any]:
        """Search with a JSON body; ``pids`` restricts the results to those passages."""
        mode = ColbertQueryMode(exhaustive=True) if body.exhaustive else None
        return result(body.query, await run_in_threadpool(indexes.search, check_index_name(body.index_name), body.query, body.k, mode, body.pids))

    @app.get("/api/indexes")
    def list_indexes() -> dict[str, Any]:
        """Names of the indexes under the root."""
        return {"indexes": indexes.names()}

    @app.get("/api/indexes/{index_name}")
    async def index_info(index_name: str) -> dict[str, Any]:
        """Size and settings of one index."""
        return await run_in_threadpool(indexes.info, check_index_name(index_name))

    @app.delete("/api/indexes/{index_name}/passages")
    async def delete_passages(index_name: str, body: DeletePassages = Body(...)) -> dict[str, Any]:
        """Delete passages by id (unknown ids are ignored)."""
        gone = await run_in_threadpool(indexes.delete_passages, check_index_name(index_name), body.pids)
        return {"status": "success", "deleted": gone}

    @app.delete("/api/indexes/{index_name}")
    async def drop_index(index_name: str) -> dict[str, Any]:
        """Delete an index and its directory."""
        await run_in_threadpool(indexes.drop, check_index_name(index_name))
        return {"status": "success", "index_name": index_name}

    return app
