"""``memcore colbert serve``: the HTTP API server, added to the memcore CLI by ``register_commands``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

__all__ = ["colbert_group"]


@click.group("colbert")
def colbert_group() -> None:
    """Late-interaction (ColBERT-style) indexes: the HTTP API server."""


@colbert_group.command("serve")
@click.option("--root", required=True, type=click.Path(file_okay=False), help="Directory holding one sub-directory per index.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8893, show_default=True, type=click.IntRange(0, 65535), help="TCP port (0: any free port).")
@click.option("--embedder", default="minilm", show_default=True, help="The token embedder kind of every new index (requests cannot choose another).")
@click.option(
    "--config",
    "config_json",
    default=None,
    help='The server\'s index settings as JSON, e.g. \'{"nbits": 2, "doc_maxlen": 180, "embedder": {"kind": "minilm", "backend": "numpy"}}\'; '
    "a request's config may override only the residual coding and search settings.",
)
@click.option("--max-body-mb", default=64, show_default=True, type=click.IntRange(1, 4096), help="Largest request body accepted (413 as soon as it is passed).")
@click.option("--max-passages", default=100_000, show_default=True, type=click.IntRange(1), help="Most passages in one create-index or add-to-index request.")
@click.option(
    "--keys-file",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="TOML file declaring API keys: [keys.<name>] (or [server.keys.<name>]) with sha256 = digest and admin = true or a scope.",
)
@click.option(
    "--api-key-sha256",
    "key_digests",
    multiple=True,
    envvar="MEMCORE_COLBERT_API_KEY_SHA256",
    help="SHA-256 hex digest of an accepted API key (repeatable; env MEMCORE_COLBERT_API_KEY_SHA256, space-separated). "
    "With any key declared, every call needs 'Authorization: Bearer <key>'.",
)
@click.option(
    "--log-level",
    "uvicorn_log",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="uvicorn's log level.",
)
def serve(
    root: str,
    host: str,
    port: int,
    embedder: str,
    config_json: str | None,
    max_body_mb: int,
    max_passages: int,
    keys_file: str | None,
    key_digests: tuple[str, ...],
    uvicorn_log: str,
) -> None:
    """Serve the indexes under ROOT: POST /api/create-index, POST /api/add-to-index,
    GET /api/search, DELETE /api/indexes/{name}[/passages] (OpenAPI docs at /docs).

    The embedder and the settings that size memory are the server's (--embedder, --config);
    a request may choose only the residual coding and search settings."""
    import uvicorn

    from memcore.plugin import ConfigError

    from .access import key_ring
    from .server import create_app

    defaults: dict[str, Any] = {"embedder": {"kind": embedder}}
    if config_json:
        try:
            extra = json.loads(config_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--config") from None
        if not isinstance(extra, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--config")
        defaults.update(extra)
    try:
        keys = key_ring(_declared_keys(keys_file), [d for digest in key_digests for d in digest.split()])
        app = create_app(Path(root), defaults=defaults, max_body=max_body_mb * 1024 * 1024, max_passages=max_passages, keys=keys)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    guarded = f", {len(keys)} API key(s) declared" if keys else ", no API key (every caller is accepted)"
    click.echo(f"memcore colbert: serving {root} on http://{host}:{port}{guarded}", err=True)
    uvicorn.run(app, host=host, port=port, log_level=uvicorn_log)


def _declared_keys(path: str | None) -> dict[str, Any]:
    """The ``keys`` table of a TOML file (``[keys.<name>]`` or ``[server.keys.<name>]``)."""
    if path is None:
        return {}
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"cannot read it: {exc}", param_hint="--keys-file") from None
    table = data.get("keys", data.get("server", {}).get("keys") if isinstance(data.get("server"), dict) else None)
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise click.BadParameter("declare keys as [keys.<name>] tables (sha256 = ..., admin = true)", param_hint="--keys-file")
    return table
