"""Where the Chroma collection lives: embedded on disk, or on a Chroma server.

:class:`ChromaConnection` is the one connection shape of memcore-poincare and memcore-chroma
(both depend on this library): ``mode = "embedded"`` opens a
``chromadb.PersistentClient`` on a folder, ``mode = "http"`` a ``chromadb.HttpClient``
to ``host``:``port`` (a ``chroma run`` server) with ``tenant``, ``database``, ``ssl`` and
``headers``. chromadb (1.7 s to import) is imported only by :func:`open_client`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memcore.plugin import ConfigError

__all__ = ["ChromaConnection", "open_client", "close_client", "import_chromadb", "chroma_error_types"]


class ChromaConnection(BaseModel):
    """Connection settings of a Chroma client (embedded folder or server)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["embedded", "http"] = Field("embedded", description="embedded: PersistentClient on a folder; http: HttpClient to a Chroma server.")
    host: str = Field("127.0.0.1", min_length=1, description="http: server host.")
    port: int = Field(8000, ge=1, le=65535, description="http: server port.")
    ssl: bool = Field(False, description="http: use https.")
    headers: dict[str, str] = Field(default_factory=dict, description="http: extra request headers (authentication...).")
    tenant: str = Field("default_tenant", min_length=1, description="Chroma tenant.")
    database: str = Field("default_database", min_length=1, description="Chroma database.")


def import_chromadb() -> Any:
    """The chromadb module (imported on first use only)."""
    try:
        import chromadb
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise ConfigError(f"chromadb is needed: pip install -c constraints.txt chromadb ({exc})") from None
    return chromadb


def open_client(connection: ChromaConnection, path: Path | str | None) -> Any:
    """A Chroma client: ``PersistentClient(path)`` in embedded mode (``EphemeralClient``
    when ``path`` is None), ``HttpClient`` in http mode. Server errors are ConfigError."""
    chromadb = import_chromadb()
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if connection.mode == "http":
        try:
            return chromadb.HttpClient(
                host=connection.host,
                port=connection.port,
                ssl=connection.ssl,
                headers=dict(connection.headers) or None,
                tenant=connection.tenant,
                database=connection.database,
                settings=settings,
            )
        except Exception as exc:  # noqa: BLE001 - chromadb raises plain exceptions for a missing server
            raise ConfigError(f"cannot reach the Chroma server at {connection.host}:{connection.port}: {exc}") from None
    try:
        if path is None:
            return chromadb.EphemeralClient(settings=settings, tenant=connection.tenant, database=connection.database)
        Path(path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings, tenant=connection.tenant, database=connection.database)
    except ValueError as exc:  # another client of this process opened the same folder with other Settings
        where = "in memory" if path is None else f"at {path}"
        raise ConfigError(f"cannot open the embedded Chroma database {where}: {exc}") from None


def close_client(client: Any) -> None:
    """Close a Chroma client (never raises: a client that cannot close is dropped anyway),
    with the HTTP connections chromadb itself leaves open.

    As of chromadb 1.5, ``HttpClient.close()`` stops its systems without closing their
    ``httpx.Client`` (the component's ``stop`` only marks it stopped), and the admin client
    an ``HttpClient`` makes registers an alias of the system in chromadb's class-level cache
    that nothing removes: each client opened and closed left its sockets open until the
    process exited (measured: 82 in the memcore-chroma tests). An HTTP system is never
    shared between clients (each has its own random identifier), so its connections are
    closed here and the alias removed."""
    clients = [client, getattr(client, "_admin_client", None)]
    found = [getattr(getattr(c, "_server", None), "_session", None) for c in clients]
    sessions: list[Any] = [s for s in found if s is not None and type(s).__module__.startswith("httpx")]  # HTTP mode only
    systems: list[Any] = []
    if sessions:
        try:
            systems = [c._system for c in clients if c is not None]
        except Exception:  # noqa: BLE001 - closed already: its systems are gone from the cache
            pass
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a client that cannot close is dropped anyway
        pass
    for session in sessions:
        try:
            session.close()
        except Exception:  # noqa: BLE001
            pass
    if systems:
        try:
            from chromadb.api.shared_system_client import SharedSystemClient

            cache = SharedSystemClient._identifier_to_system
            for key in [key for key, system in cache.items() if any(system is s for s in systems)]:
                cache.pop(key, None)
        except Exception:  # noqa: BLE001 - chromadb's internals moved: the connections are closed anyway
            pass


def chroma_error_types() -> tuple[type[BaseException], ...]:
    """The exception classes chromadb raises for server/storage failures."""
    chromadb = import_chromadb()
    errors = getattr(chromadb, "errors", None)
    base = getattr(errors, "ChromaError", None) if errors is not None else None
    return tuple(t for t in (base,) if t is not None)
