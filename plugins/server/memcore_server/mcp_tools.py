"""The memory as MCP tools (the ``mcp`` SDK) for agent hosts: ``memcore mcp`` over stdio, and
``memcore serve`` over streamable HTTP at ``/mcp``.

Five tools, each described for an agent, each run inside the caller's scope (like an HTTP
call made with a scoped key, :mod:`.tenancy`; the ids in the caller's namespace, :mod:`.idspace`):

- ``remember(text, metadata)``: store one memory, returns its id;
- ``search(query, k, where)``: the memories most relevant to a query;
- ``get(id)``: one memory by id;
- ``forget(id)``: delete one memory;
- ``list_memories(limit, where)``: the stored memories, oldest first.

Over stdio the scope is fixed for the process: an API key (``MEMCORE_API_KEY`` in the
environment, looked up in ``[server.keys]`` like an HTTP request's) or
``--user-id/--agent-id/--run-id``. Over HTTP each request carries its key
(``Authorization: Bearer <key>``), authenticated before its body is read (:mod:`.guard`),
and every tool call runs in that key's scope. A memcore error becomes the tool's error
message (``NotFoundError: ...``); anything else a generic one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import memcore
from memcore import MemcoreError, Record
from memcore.plugin import get_logger
from mcp.server.mcpserver import Context

from .guard import caller_of
from .tenancy import Caller, Served, imposed

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["create_mcp_server", "TOOLS"]

T = TypeVar("T")
log = get_logger("memcore.server")

TOOLS = ("remember", "search", "get", "forget", "list_memories")
"""The tools the MCP server exposes."""

INSTRUCTIONS = (
    "A long-term memory. Call `remember` to store a fact, preference or event worth keeping "
    "(one self-contained sentence per call), `search` before answering to recall what is known, "
    "`get` / `list_memories` to read memories, `forget` to delete one that is wrong or asked to be forgotten."
)


def _record(record: Record) -> dict[str, Any]:
    return {"id": record.id, "text": record.text, "metadata": record.metadata, "scope": record.scope.as_dict() if record.scope else {}}


def create_mcp_server(memory: memcore.Memory, caller: Caller | None = None) -> "MCPServer[Any]":
    """The MCP server exposing ``memory`` to ``caller`` (its scope imposed on every tool); with
    ``caller=None``, to the caller the key guard authenticated for each HTTP request."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from . import __version__

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    server: MCPServer[Any] = MCPServer(name="memcore", version=__version__, instructions=INSTRUCTIONS)
    root.setLevel(level)  # the SDK configures the root logger (INFO, to stderr): the host's logging is not ours to change
    root.handlers[:] = handlers

    def who(ctx: Context) -> Caller:
        if caller is not None:
            return caller
        request = ctx.request_context.request
        return caller_of(getattr(request, "scope", None) or {})

    def run(ctx: Context, fn: Callable[[Served], T]) -> T:
        try:
            with imposed(memory, who(ctx)) as served:
                return fn(served)
        except MemcoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:
            log.error("server.unexpected", type=type(exc).__name__, exc_info=exc)
            raise ToolError("the memory failed unexpectedly; the details are in the server's log") from None

    @server.tool()
    def remember(ctx: Context, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Store one memory (a fact, preference or event, as one self-contained sentence) and
        return its id. ``metadata``: optional JSON object of labels (e.g. {"topic": "travel"})."""
        return str(run(ctx, lambda m: m.insert(text, metadata=metadata)))

    @server.tool()
    def search(ctx: Context, query: str, k: int = 5, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Find the ``k`` stored memories most relevant to ``query`` (best first), each with
        its id, text, score and metadata. ``where``: optional metadata filter, e.g. {"topic": "travel"}."""
        return [
            {"id": r["id"], "text": r.get("text"), "score": float(r["score"]), "metadata": r.get("metadata") or {}}
            for r in run(ctx, lambda m: m.retrieve(query, where=where, k=k))
        ]

    @server.tool()
    def get(ctx: Context, id: str) -> dict[str, Any]:
        """Read one memory by its id (as returned by remember, search or list_memories)."""
        found = run(ctx, lambda m: m.get(id))
        assert isinstance(found, Record)
        return _record(found)

    @server.tool()
    def forget(ctx: Context, id: str) -> str:
        """Delete one memory by its id, for good (when it is wrong or the user asks to forget it)."""
        run(ctx, lambda m: m.delete(id))
        return f"forgot {id}"

    @server.tool()
    def list_memories(ctx: Context, limit: int = 20, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """List stored memories, oldest first (at most ``limit``), optionally filtered by metadata ``where``."""
        found = run(ctx, lambda m: m.get(where=where, limit=max(0, min(int(limit), 1000))))
        return [_record(r) for r in found] if isinstance(found, list) else [_record(found)]

    return server
