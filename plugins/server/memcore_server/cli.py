"""``memcore serve`` and ``memcore keys``: added to the memcore CLI by ``register_commands``."""

from __future__ import annotations

import ipaddress
import secrets
import sys

from typing import TYPE_CHECKING

import click

from memcore import ConfigError

if TYPE_CHECKING:
    import memcore

    from .config import ServerConfig

__all__ = ["serve", "keys_group"]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option(
    "--config", "config_path", default=None, type=click.Path(dir_okay=False), help="Settings file (TOML/YAML) declaring the memory and its [server] table."
)
@click.option("--path", default=None, type=click.Path(file_okay=False), help="Collection directory (file-backed stores).")
@click.option("--host", default=None, help="Interface to listen on (default: server.host, 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="TCP port (default: server.port, 8765; 0: any free port).")
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(1, 64),
    help="Server processes on the port (default: server.workers, 1); more than one only for a store shared between processes (postgres).",
)
@click.option(
    "--log-level",
    "uvicorn_log",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="uvicorn's log level.",
)
def serve(config_path: str | None, path: str | None, host: str | None, port: int | None, workers: int | None, uvicorn_log: str) -> None:
    """Serve the memory declared by --config at --path over HTTP (routes under /v1, OpenAPI at
    /openapi.json, docs at /docs). Clients authenticate with Authorization: Bearer <key> for
    the keys of [server.keys.<name>]; without keys it serves loopback only. With --workers N,
    N processes serve a store shared between processes (the postgres store)."""
    import uvicorn

    import memcore

    from .app import create_app
    from .config import load_server_config
    from .protocol import HotRoutesProtocol
    from .threads import limit_compute_threads
    from .workers import check_shared, serve_workers

    settings = memcore.load_settings(config_path)
    config = load_server_config(settings.server, host=host, port=port, workers=workers)
    _check_anonymous(config)
    limit_compute_threads(config.blas_threads)  # before the libraries load (environment), and
    memory = memcore.open(settings, path=path)
    if config.workers > 1:  # opened here once (created, if new, by one process), checked, then opened by each worker
        try:
            check_shared(memory, config.workers)
        finally:
            memory.close()
        click.echo(f"memcore: serving {path or settings.path or 'the memory'} on http://{config.host}:{config.port} with {config.workers} workers", err=True)
        serve_workers(config_path, path, config, uvicorn_log)
        return
    try:
        limit_compute_threads(config.blas_threads)  # those the memory loaded (threadpoolctl)
        app = create_app(memory, config)
        mcp = f", MCP at http://{config.host}:{config.port}/mcp" if config.mcp else ""
        click.echo(
            f"memcore: serving {path or settings.path or 'the memory'} on http://{config.host}:{config.port} ({len(config.keys)} API key(s){mcp})", err=True
        )
        # access lines only where uvicorn would print them (info, debug): below, skip their formatting
        access_log = uvicorn_log in ("info", "debug")
        uvicorn.run(app, host=config.host, port=config.port, log_level=uvicorn_log, access_log=access_log, timeout_graceful_shutdown=5, http=HotRoutesProtocol)
    finally:
        memory.close()


def _check_anonymous(config: "ServerConfig") -> None:
    """Without keys, serve loopback only (unless server.allow_anonymous)."""
    if not config.keys and not _loopback(config.host) and not config.allow_anonymous:
        raise ConfigError(
            f"no API keys are declared: refusing to serve {config.host} without them (declare [server.keys.<name>], "
            "or set server.allow_anonymous = true to serve everyone)",
            location="server.keys",
        )


@click.group("keys")
def keys_group() -> None:
    """API keys of memcore's servers: declared in settings as SHA-256 digests."""


@keys_group.command("hash")
def keys_hash() -> None:
    """Print the SHA-256 digest of the key read from stdin (one line), for [server.keys.<name>] sha256."""
    from memcore.plugin import hash_api_key

    key = sys.stdin.readline().strip()
    if not key:
        raise click.UsageError('give the key on stdin, e.g. printf %s "$KEY" | memcore keys hash')
    click.echo(hash_api_key(key))


@keys_group.command("new")
@click.argument("name")
@click.option("--user-id", default=None, help="Bind the key to this user_id.")
@click.option("--agent-id", default=None, help="Bind the key to this agent_id.")
@click.option("--run-id", default=None, help="Bind the key to this run_id.")
@click.option("--admin", is_flag=True, help="An admin key (every scope).")
def keys_new(name: str, user_id: str | None, agent_id: str | None, run_id: str | None, admin: bool) -> None:
    """Make a random key: prints the key once (stderr) and its [server.keys.NAME] table (stdout)."""
    from memcore.plugin import hash_api_key

    scope = {k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v}
    if bool(scope) == admin:
        raise click.UsageError("give a scope (--user-id/--agent-id/--run-id) or --admin, not both and not neither")
    key = "mck_" + secrets.token_urlsafe(32)
    click.echo(f"API key for {name!r} (shown once, give it to the client): {key}", err=True)
    click.echo(f'[server.keys.{name}]\nsha256 = "{hash_api_key(key)}"')
    if admin:
        click.echo("admin = true")
    else:
        click.echo("scope = {" + ", ".join(f'{k} = "{v}"' for k, v in scope.items()) + "}")


@click.command("mcp")
@click.option(
    "--config", "config_path", default=None, type=click.Path(dir_okay=False), help="Settings file (TOML/YAML) declaring the memory (and [server.keys])."
)
@click.option("--path", default=None, type=click.Path(file_okay=False), help="Collection directory (file-backed stores).")
@click.option("--user-id", default=None, help="Confine every tool to this user_id (unless MEMCORE_API_KEY names a key).")
@click.option("--agent-id", default=None, help="Confine every tool to this agent_id.")
@click.option("--run-id", default=None, help="Confine every tool to this run_id.")
@click.option(
    "--transport",
    default="stdio",
    show_default=True,
    type=click.Choice(["stdio", "http"]),
    help="stdio (the host starts this process) or http (streamable HTTP at http://HOST:PORT/mcp; each request's Bearer key gives its scope).",
)
@click.option("--host", default=None, help="With --transport http: interface to listen on (default: server.host, 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="With --transport http: TCP port (default: server.port, 8765).")
def mcp_command(
    config_path: str | None,
    path: str | None,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    transport: str,
    host: str | None,
    port: int | None,
) -> None:
    """Serve the memory as MCP tools (remember, search, get, forget, list_memories) for agent
    hosts. Over stdio the scope is that of the API key in MEMCORE_API_KEY (declared in
    [server.keys]) or the one given with --user-id/--agent-id/--run-id. Over streamable HTTP
    (--transport http) each request authenticates with Authorization: Bearer <key> and runs in
    that key's scope (`memcore serve` also serves these tools at /mcp, beside /v1)."""
    import os

    import memcore

    from .config import load_server_config
    from .mcp_tools import create_mcp_server
    from .tenancy import ANONYMOUS, Caller, authenticate
    from .threads import limit_compute_threads
    from .warmup import warm_embedders

    settings = memcore.load_settings(config_path)
    scope = {k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v}
    if transport == "http":
        if scope or os.environ.get("MEMCORE_API_KEY"):
            raise click.UsageError("over HTTP each request's key gives its scope: drop --user-id/--agent-id/--run-id and MEMCORE_API_KEY")
        _serve_mcp_http(settings, path, load_server_config(settings.server, host=host, port=port))
        return
    if host is not None or port is not None:
        raise click.UsageError("--host and --port are for --transport http")
    config = load_server_config(settings.server)
    key = os.environ.get("MEMCORE_API_KEY")
    if key:
        if scope:
            raise click.UsageError("give a scope with MEMCORE_API_KEY or with --user-id/--agent-id/--run-id, not both")
        if not config.keys:
            raise ConfigError("MEMCORE_API_KEY is set but no [server.keys] are declared to check it against", location="server.keys")
        caller = authenticate(config.key_ring(), f"Bearer {key}")
    else:
        caller = Caller(name=None, scope=scope, admin=False) if scope else ANONYMOUS
    limit_compute_threads(config.blas_threads)  # as memcore serve: before the libraries load, and
    memory = memcore.open(settings, path=path)
    try:
        limit_compute_threads(config.blas_threads)  # those the memory loaded
        if config.warm:
            warm_embedders(memory)
        click.echo(f"memcore mcp: serving {path or settings.path or 'the memory'} over stdio (scope: {caller.scope or 'all'})", err=True)
        create_mcp_server(memory, caller).run("stdio")
    finally:
        memory.close()


def _serve_mcp_http(settings: "memcore.MemcoreSettings", path: str | None, config: "ServerConfig") -> None:
    """``memcore mcp --transport http``: only the MCP tools, at http://HOST:PORT/mcp."""
    import uvicorn

    import memcore

    from .app import create_mcp_app
    from .threads import limit_compute_threads

    _check_anonymous(config)
    limit_compute_threads(config.blas_threads)
    memory = memcore.open(settings, path=path)
    try:
        limit_compute_threads(config.blas_threads)
        app = create_mcp_app(memory, config)
        click.echo(
            f"memcore mcp: serving {path or settings.path or 'the memory'} at http://{config.host}:{config.port}/mcp ({len(config.keys)} API key(s))", err=True
        )
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        memory.close()
