"""memcore-server: serve any declared memory over HTTP, to many clients, scoped by API key.

- ``memcore serve --config memcore.toml --path ./my-memory``: FastAPI + uvicorn, routes under
  ``/v1`` (:mod:`memcore_server.app`), settings in the ``[server]`` table
  (:class:`memcore_server.config.ServerConfig`), keys in ``[server.keys.<name>]``;
- ``memcore mcp --config memcore.toml --path ./my-memory``: the memory as MCP tools over
  stdio or streamable HTTP (:mod:`memcore_server.mcp_tools`) for agent hosts; ``memcore
  serve`` also serves them at ``/mcp``;
- ``memcore keys hash`` / ``memcore keys new``: the SHA-256 digests keys are declared as;
- :class:`RemoteMemory`: the Python client, with the methods, arguments, return types and
  errors of :class:`memcore.Memory` (httpx; it imports neither FastAPI nor uvicorn).

Registers no component: it adds commands through ``register_commands``. Importing this
module imports neither FastAPI, uvicorn nor httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import memcore

if TYPE_CHECKING:
    import click

    from .app import create_app
    from .client import AsyncRemoteMemory, RemoteMemory

__all__ = ["RemoteMemory", "AsyncRemoteMemory", "create_app", "register_commands"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``RemoteMemory``, ``AsyncRemoteMemory`` and ``create_app`` are imported on first access."""
    if name in ("RemoteMemory", "AsyncRemoteMemory"):
        from . import client

        return getattr(client, name)
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)


@memcore.hookimpl
def register_commands(cli: "click.Group") -> None:
    """Add ``memcore serve``, ``memcore mcp`` and ``memcore keys``."""
    from .cli import keys_group, mcp_command, serve

    cli.add_command(serve)
    cli.add_command(mcp_command)
    cli.add_command(keys_group)
