"""Indexes on the metadata fields that filters read, created by the SQLite store on demand.

A ``where`` filter compiles to ``json_extract(metadata, '$."field"')`` conditions (see
:func:`memcore.model._filters.to_sql`). Without help SQLite evaluates them on every record (a
scan with a JSON parse per row: ~40-60 ms at 100k records). The first time a writer
resolves a filter on a field, this module adds an SQLite expression index on exactly that
expression, so equality, ``$in`` and range conditions on it become index searches.
The index also holds the value's JSON type and the record id (``(json_extract(...),
json_type(...), id)``): a filter's condition is the type (``1`` must not match ``true``,
whose ``json_extract`` is also 1) and the value, so resolving a filter to ids or rows
(:meth:`SQLiteStore.allowed_ids`, :meth:`SQLiteStore.allowed_rows`, what a filtered search
asks) is read from the index alone, without a lookup and a JSON parse of each matching
record (measured at 100k records, CPU, 50%: ~50 -> ~17 ms for the rows; the id alone, without the
type, had taken 1% 2.3 -> 0.5 ms, 10% 11.6 -> 5.1 ms, 50% 47 -> 31 ms). An index of an
older file (on the expression alone, or without the type) is rebuilt the first time a
writer filters on its field. SQLite keeps the index in the same transaction as every record
write; a reader uses the indexes the writer created. At most ``limit`` fields are indexed
(each one costs a little on every insert); a failure to create one (a read-only file, a
full disk) only leaves that field unindexed.
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
        found = db.execute("SELECT name, sql FROM sqlite_master WHERE type='index' AND name LIKE ?", (INDEX_PREFIX + "%",)).fetchall()
        self.known = {name[len(INDEX_PREFIX) :] for name, sql in found}
        #: fields whose index lacks the value's JSON type or the id (made by older versions): rebuilt when a writer filters on them
        self.uncovered = {name[len(INDEX_PREFIX) :] for name, sql in found if not _covering(sql)}
        self._failed: set[str] = set()

    def ensure(self, fields: Iterable[str]) -> None:
        """Create the missing indexes of ``fields`` (names already checked by the filter parser)."""
        if not self.writable:
            return
        for field in fields:
            upgrade = field in self.uncovered
            if field in self._failed or (field in self.known and not upgrade) or (not upgrade and len(self.known) >= self.limit):
                continue
            name = INDEX_PREFIX + field
            try:
                self._create(name, field, upgrade)
            except sqlite3.Error as exc:
                self._failed.add(field)
                log.warning("store.field_index_failed", field=field, error=str(exc))
                continue
            self.known.add(field)
            self.uncovered.discard(field)
            log.info("store.field_indexed", field=field)

    def _create(self, name: str, field: str, upgrade: bool) -> None:
        """Create the index of ``field`` (replacing its older one when ``upgrade``) in one
        savepoint: on a failure the older index is kept, as it was."""
        self.db.execute('SAVEPOINT "mc_field_index"')
        try:
            if upgrade:
                self.db.execute(f'DROP INDEX IF EXISTS "{name}"')
            path = json_path(field)
            self.db.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON records (json_extract(metadata, {path}), json_type(metadata, {path}), id)')
        except sqlite3.Error:
            self.db.execute('ROLLBACK TO "mc_field_index"')
            self.db.execute('RELEASE "mc_field_index"')
            raise
        self.db.execute('RELEASE "mc_field_index"')


def _covering(sql: str | None) -> bool:
    """Whether an index's ``CREATE INDEX`` statement holds the value's JSON type and the id
    (what a filter's conditions and the matches' ids are read from, without the records)."""
    text = (sql or "").rstrip()
    return "json_type(" in text and text.endswith(", id)")
