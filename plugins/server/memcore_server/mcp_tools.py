"""``memcore mcp``: the memory as MCP tools (the ``mcp`` SDK, stdio transport) for agent hosts.

Five tools, each described for an agent, each run inside the caller's scope (like an HTTP
call made with a scoped key, :mod:`.tenancy`):

- ``remember(text, metadata)``: store one memory, returns its id;
- ``search(query, k, where)``: the memories most relevant to a query;
- ``get(id)``: one memory by id;
- ``forget(id)``: delete one memory;
- ``list_memories(limit, where)``: the stored memories, oldest first.

The scope comes from an API key (``MEMCORE_API_KEY`` in the environment, looked up in
``[server.keys]`` like an HTTP request's) or from ``--user-id/--agent-id/--run-id``. A
memcore error becomes the tool's error message (``NotFoundError: ...``); anything else a generic one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

import memcore
from memcore import MemcoreError, Record
from memcore.plugin import get_logger

from .tenancy import Caller, imposed

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


def create_mcp_server(memory: memcore.Memory, caller: Caller) -> "MCPServer[Any]":
    """The MCP server exposing ``memory`` to ``caller`` (its scope imposed on every tool)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from . import __version__

    server: MCPServer[Any] = MCPServer(name="memcore", version=__version__, instructions=INSTRUCTIONS)

    def run(fn: Callable[[], T]) -> T:
        try:
            with imposed(memory, caller):
                return fn()
        except MemcoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:
            log.error("server.unexpected", type=type(exc).__name__, exc_info=exc)
            raise ToolError("the memory failed unexpectedly; the details are in the server's log") from None

    @server.tool()
    def remember(text: str, metadata: dict[str, Any] | None = None) -> str:
        """Store one memory (a fact, preference or event, as one self-contained sentence) and
        return its id. ``metadata``: optional JSON object of labels (e.g. {"topic": "travel"})."""
        return str(run(lambda: memory.insert(text, metadata=metadata)))

    @server.tool()
    def search(query: str, k: int = 5, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Find the ``k`` stored memories most relevant to ``query`` (best first), each with
        its id, text, score and metadata. ``where``: optional metadata filter, e.g. {"topic": "travel"}."""
        return [
            {"id": r["id"], "text": r.get("text"), "score": float(r["score"]), "metadata": r.get("metadata") or {}}
            for r in run(lambda: memory.retrieve(query, where=where, k=k))
        ]

    @server.tool()
    def get(id: str) -> dict[str, Any]:
        """Read one memory by its id (as returned by remember, search or list_memories)."""
        found = run(lambda: memory.get(id))
        assert isinstance(found, Record)
        return _record(found)

    @server.tool()
    def forget(id: str) -> str:
        """Delete one memory by its id, for good (when it is wrong or the user asks to forget it)."""
        run(lambda: memory.delete(id))
        return f"forgot {id}"

    @server.tool()
    def list_memories(limit: int = 20, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """List stored memories, oldest first (at most ``limit``), optionally filtered by metadata ``where``."""
        found = run(lambda: memory.get(where=where, limit=max(0, min(int(limit), 1000))))
        return [_record(r) for r in found] if isinstance(found, list) else [_record(found)]

    return server
