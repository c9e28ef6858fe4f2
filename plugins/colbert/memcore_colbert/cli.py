"""``memcore colbert serve``: the HTTP API server, added to the memcore CLI by ``register_commands``."""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["colbert_group"]


@click.group("colbert")
def colbert_group() -> None:
    """Late-interaction (ColBERT-style) indexes: the HTTP API server."""


@colbert_group.command("serve")
@click.option("--root", required=True, type=click.Path(file_okay=False), help="Directory holding one sub-directory per index.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8893, show_default=True, type=click.IntRange(0, 65535), help="TCP port (0: any free port).")
@click.option("--embedder", default="minilm", show_default=True, help="Default token embedder kind of new indexes (a create-index config may name another).")
@click.option("--config", "config_json", default=None, help='Default index settings as JSON, e.g. \'{"nbits": 2, "doc_maxlen": 180}\'.')
@click.option("--max-body-mb", default=64, show_default=True, type=click.IntRange(1, 4096), help="Largest request body accepted (413 above).")
@click.option(
    "--log-level",
    "uvicorn_log",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="uvicorn's log level.",
)
def serve(root: str, host: str, port: int, embedder: str, config_json: str | None, max_body_mb: int, uvicorn_log: str) -> None:
    """Serve the indexes under ROOT: POST /api/create-index, POST /api/add-to-index,
    GET /api/search, DELETE /api/indexes/{name}[/passages] (OpenAPI docs at /docs)."""
    import uvicorn

    from .server import create_app

    defaults = {"embedder": {"kind": embedder}}
    if config_json:
        try:
            extra = json.loads(config_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--config") from None
        if not isinstance(extra, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--config")
        defaults.update(extra)
    app = create_app(Path(root), defaults=defaults, max_body=max_body_mb * 1024 * 1024)
    click.echo(f"memcore colbert: serving {root} on http://{host}:{port}", err=True)
    uvicorn.run(app, host=host, port=port, log_level=uvicorn_log)
