"""Indexes on the metadata fields that filters read, created by the SQLite store on demand.

A ``where`` filter compiles to ``json_extract(metadata, '$."field"')`` conditions (see
:func:`memcore.model._filters.to_sql`). Without help SQLite evaluates them on every record (a
scan with a JSON parse per row: ~40-60 ms at 100k records). The first time a writer
resolves a filter on a field, this module adds an SQLite expression index on exactly that
expression, so equality, ``$in`` and range conditions on it become index searches
(~1 ms for 1% of 100k records). SQLite keeps the index in the same transaction as every
record write; a reader uses the indexes the writer created. At most ``limit`` fields are
indexed (each one costs a little on every insert); a failure to create one (a read-only
file, a full disk) only leaves that field unindexed.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from ..model._filters import json_path
from .._util.log import get_logger

__all__ = ["FieldIndexes", "INDEX_PREFIX"]

log = get_logger("memcore.store")

INDEX_PREFIX = "mc_field:"
"""Name prefix of the expression indexes (``mc_field:<field>``)."""


class FieldIndexes:
    """The expression indexes of one SQLite connection: which exist, and creating more."""

    def __init__(self, db: sqlite3.Connection, limit: int, writable: bool):
        self.db = db
        self.limit = limit
        self.writable = writable
        self.known = {
            name[len(INDEX_PREFIX) :] for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='index' AND name LIKE ?", (INDEX_PREFIX + "%",))
        }
        self._failed: set[str] = set()

    def ensure(self, fields: Iterable[str]) -> None:
        """Create the missing indexes of ``fields`` (names already checked by the filter parser)."""
        if not self.writable:
            return
        for field in fields:
            if field in self.known or field in self._failed or len(self.known) >= self.limit:
                continue
            name = INDEX_PREFIX + field
            try:
                self.db.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON records (json_extract(metadata, {json_path(field)}))')
            except sqlite3.Error as exc:
                self._failed.add(field)
                log.warning("store.field_index_failed", field=field, error=str(exc))
                continue
            self.known.add(field)
            log.info("store.field_indexed", field=field)
