"""The ``[server]`` settings table of ``memcore serve``: where it listens, its limits, its keys.

The core's settings accept a ``server`` table and leave it alone; this model validates it
when the server starts (a typo is a :class:`memcore.ConfigError` naming the key)::

    [server]
    host = "127.0.0.1"
    port = 8765
    max_body_bytes = 16777216
    max_batch = 1000
    max_k = 1000
    max_filter_bytes = 16384
    request_timeout_s = 30
    mcp = true                      # the MCP tools at /mcp (streamable HTTP)
    blas_threads = 1            # BLAS / OpenMP threads per search (0: the libraries' default)
    threads = 8                 # worker threads for the memory's reads, as many for its writes (per process)
    workers = 1                 # server processes (> 1 only for a store shared between processes)
    warm = true                 # embed one text with each space's embedder before serving

    [server.keys.alice]
    sha256 = "<hex SHA-256 digest of alice's key>"   # memcore keys hash (reads the key from stdin)
    scope = {user_id = "alice"}

    [server.keys.ops]
    sha256 = "<hex digest>"
    admin = true

Keys may come from the environment like every setting:
``MEMCORE_SERVER__KEYS__ALICE__SHA256=<digest>`` and
``MEMCORE_SERVER__KEYS__ALICE__SCOPE='{"user_id": "alice"}'`` (a JSON object).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError as PydanticValidationError, field_validator

from memcore import ConfigError
from memcore.plugin import ApiKeyRing

__all__ = ["ServerConfig", "load_server_config"]


class ServerConfig(BaseModel):
    """Validated ``[server]`` settings (every limit is checked before the memory is touched)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Interface to listen on (loopback by default).")
    port: int = Field(8765, ge=0, le=65535, description="TCP port (0: any free port).")
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Largest request body, enforced while it is read (413 above).")
    max_batch: int = Field(1000, ge=1, description="Most items, ids or query texts (retrieve_many) in one request (413 above).")
    max_k: int = Field(1000, ge=1, description="Largest k of a search (400 above).")
    max_filter_bytes: int = Field(16 * 1024, ge=2, description="Largest where or where_document filter, each as compact JSON (400 above).")
    request_timeout_s: float = Field(30.0, gt=0, description="Longest a call may run before the client gets 504 (the call itself is not interrupted).")
    allow_anonymous: bool = Field(False, description="Serve without keys on a non-loopback host (never needed on 127.0.0.1).")
    blas_threads: int = Field(
        1,
        ge=0,
        description="Threads each BLAS / OpenMP call may use (numpy, faiss), set when the server starts; 0 leaves the libraries' default "
        "(one per core, which makes concurrent searches fight for the cores).",
    )
    threads: int = Field(
        8,
        ge=1,
        le=256,
        description="Worker threads running the memory's reads, and as many its writes, in each server process (the event loop never runs one itself; a search never waits behind writes); "
        "more help a store that waits on the network, fewer keep fewer threads contending for Python's GIL.",
    )
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Server processes sharing the port (memcore serve --workers): more than one only for a store shared between "
        "processes (the postgres store); refused for the SQLite store.",
    )
    warm: bool = Field(
        True,
        description="Before serving, embed one short text with each space's embedder, so that no request waits for a model to load "
        "(a remote embedder makes one call).",
    )
    docs: bool = Field(True, description="Serve the interactive docs at /docs (the schema is always at /openapi.json).")
    mcp: bool = Field(True, description="Serve the MCP tools over streamable HTTP at /mcp (the same keys and scopes as /v1).")
    keys: dict[str, dict[str, Any]] = Field(default_factory=dict, description="API keys: name -> {sha256, scope | admin}.")

    @field_validator("keys", mode="before")
    @classmethod
    def _keys_from_env(cls, value: Any) -> Any:
        """A scope given as a JSON string (from an environment variable) becomes a table;
        ``admin = "true"`` from the environment becomes a boolean."""
        if not isinstance(value, Mapping):
            return value
        out: dict[str, Any] = {}
        for name, entry in value.items():
            if isinstance(entry, Mapping):
                entry = dict(entry)
                if isinstance(entry.get("scope"), str):
                    try:
                        entry["scope"] = json.loads(entry["scope"])
                    except ValueError:
                        raise ValueError(f'keys.{name}.scope must be a table or a JSON object, e.g. {{"user_id": "alice"}}') from None
                if isinstance(entry.get("admin"), str):
                    entry["admin"] = entry["admin"].strip().lower() in ("1", "true", "yes")
            out[name] = entry
        return out

    def key_ring(self) -> ApiKeyRing:
        """The declared keys (:class:`memcore.plugin.ApiKeyRing`); ConfigError names a malformed one."""
        return ApiKeyRing.from_settings(self.keys)


def load_server_config(table: Mapping[str, Any] | None, **overrides: Any) -> ServerConfig:
    """Validate the ``[server]`` table (plus command-line ``overrides`` that are not None).

    :raises ConfigError: an unknown or invalid key, located as ``server.<key>``.
    """
    data = {**dict(table or {}), **{k: v for k, v in overrides.items() if v is not None}}
    try:
        config = ServerConfig(**data)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(["server", *(str(p) for p in first["loc"])])
        raise ConfigError(first["msg"], location=location) from None
    config.key_ring()  # a malformed key fails here, at start-up
    return config
