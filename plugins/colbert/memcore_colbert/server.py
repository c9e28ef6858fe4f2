"""The HTTP API server (FastAPI): ColBERT's create / add / search API over :class:`.served.IndexRoot`.

Endpoints (JSON in and out, OpenAPI docs at ``/docs``):

- ``POST /api/create-index`` ``{index_name, collection_tsv_data, metadata | hirag_metadata, config, overwrite}``
- ``POST /api/add-to-index`` ``{index_name, collection_tsv_data, metadata | hirag_metadata}``
- ``GET /api/search?query=&k=&index_name=`` -> ``{query, topk: [{pid, score, rank, text, metadata}]}``
- ``POST /api/search`` ``{index_name, query, k, pids?, exhaustive?}`` (``pids``: allowed passages)
- ``DELETE /api/indexes/{index_name}/passages`` ``{pids: [...]}``
- ``DELETE /api/indexes/{index_name}``; ``GET /api/indexes``; ``GET /api/indexes/{index_name}``; ``GET /api/health``

Errors are ``{"error": {"type", "message"}}`` with 400 (bad input), 404 (unknown index),
409 (index exists), 413 (request too large), 422 (malformed JSON body), 500 (corrupt index).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

from memcore.plugin import CorruptError, MemcoreError, NotFoundError, ValidationError

from .config import ColbertQueryMode
from .names import check_index_name
from .served import ConflictError, IndexRoot

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.responses import Response

__all__ = ["create_app", "DEFAULT_MAX_BODY"]

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


def _status(exc: MemcoreError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, ValidationError):
        return 400
    if isinstance(exc, CorruptError):
        return 500
    return 400


def create_app(root: Path, *, defaults: dict[str, Any] | None = None, max_body: int = DEFAULT_MAX_BODY, max_passages: int = 100_000) -> FastAPI:
    """The FastAPI application serving the indexes under ``root``."""
    from fastapi import Body, FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    indexes = IndexRoot(Path(root), defaults, max_passages=max_passages)
    app = FastAPI(title="memcore colbert", description="ColBERT-style late-interaction indexes over HTTP (memcore-colbert).")
    app.state.indexes = indexes

    def error(status: int, kind: str, message: str) -> JSONResponse:
        return JSONResponse(status_code=status, content={"error": {"type": kind, "message": message}})

    @app.exception_handler(MemcoreError)
    async def _memcore_error(request: Request, exc: MemcoreError) -> JSONResponse:
        return error(_status(exc), type(exc).__name__, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(422, "RequestValidationError", f"{where}: {first.get('msg')}")

    @app.middleware("http")
    async def _limit_body(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return error(400, "ValidationError", "bad Content-Length")
            if int(length) > max_body:
                return error(
                    413, "RequestTooLarge", f"request body of {length} bytes exceeds the limit of {max_body} bytes; split it into several add-to-index requests"
                )
        elif request.method in ("POST", "PUT", "DELETE") and request.headers.get("transfer-encoding"):
            body = await request.body()
            if len(body) > max_body:
                return error(413, "RequestTooLarge", f"request body exceeds the limit of {max_body} bytes")
        return await call_next(request)

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
