"""The postgres store an index kind of this plugin works inside (``pgvector``, ``pg_text``)."""

from __future__ import annotations

from memcore.plugin import ConfigError, IndexContext

from .store import PostgresStore

__all__ = ["postgres_store_of"]


def postgres_store_of(context: IndexContext, kind: str, searches: str, instead: str) -> PostgresStore:
    """The :class:`PostgresStore` of the index's collection; :class:`ConfigError` naming the
    memory's store and ``instead`` (the kinds to use with it) when the store is another.

    ``searches``: what the index searches there (for the message), e.g. "the vectors"."""
    store = context.vectors.store if context.vectors is not None else None
    if not isinstance(store, PostgresStore):
        found = type(store).__name__ if store is not None else "not given"
        raise ConfigError(
            f"index {context.name!r} of kind {kind} searches {searches} the postgres store keeps in PostgreSQL; "
            f"it needs [store] kind = 'postgres' (this memory's store is {found}); with another store use {instead}",
            location=f"indexes.{context.name}",
        )
    return store
