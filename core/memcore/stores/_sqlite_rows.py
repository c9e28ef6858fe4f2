"""The rows behind ``SQLiteStore.get(..., with_vectors=False)``, cached between writes.

Every retrieval attaches the records of its hits: on a small memory (hundreds of items,
an agent's conversation) that ``SELECT`` is the largest fixed cost of a query. The store
keeps the rows it read (text, metadata, scope, times, links -- never vectors). The writer
(the only process that writes) forgets in each ``apply`` the rows that batch can change
(:meth:`RowCache.forget`: the records it writes, deletes or gives links to a deleted record;
everything for a batch dropping indexes or touching more than :data:`FORGET_UP_TO` ids); a
reader forgets every row whenever the store's sequence number moved. Callers get new
:class:`~memcore.model.Record` objects built from the cached row each time, so nothing
they change can reach the cache: flat metadata (every value a string, number, boolean or
null: the common case) is kept parsed and copied with ``dict()``, nested metadata is kept as
its JSON text and parsed again for each caller.
"""

from __future__ import annotations

import json
from typing import Any, Collection

from ..model._record import Record, Scope

__all__ = ["FORGET_UP_TO", "RowCache", "cached_row", "parsed_metadata", "row_record"]

Row = tuple[Any, ...]
"""``(id, text, metadata, scope, created_at, updated_at, links)``; metadata as
:func:`parsed_metadata` left it, scope a (frozen, shareable) :class:`~memcore.model.Scope` or None."""

_SCALARS = (str, int, float, bool, type(None))
FORGET_UP_TO = 1_000
"""A write involving more ids than this forgets every cached row (cheaper than sorting them out)."""


def parsed_metadata(text: str) -> dict[str, Any] | str:
    """Stored metadata JSON as a dict when it is flat (a shallow copy is then a full copy),
    else the JSON text itself (each caller parses its own copy)."""
    meta = json.loads(text)
    if type(meta) is dict and all(type(v) in _SCALARS for v in meta.values()):
        return meta
    return text


def cached_row(row: list[Any]) -> Row:
    """The cached form of a ``records`` row ``(id, text, metadata, user_id, agent_id,
    run_id, created_at, updated_at, links)``: metadata parsed once, the scope built once."""
    rid, text, metadata, user_id, agent_id, run_id, created_at, updated_at, links = row
    scope = None if user_id is None and agent_id is None and run_id is None else Scope(user_id, agent_id, run_id)
    return (rid, text, parsed_metadata(metadata), scope, created_at, updated_at, links)


def row_record(row: Row) -> Record:
    """A new :class:`Record` (without vectors) from a cached row; nothing it holds is shared
    with the cache but immutable values."""
    meta = row[2]
    return Record(row[0], row[1], dict(meta) if type(meta) is dict else json.loads(meta), {}, row[6], row[3], row[4], row[5])


class RowCache:
    """Record rows by id, valid for one store sequence number; at most ``limit`` rows.

    ``rows`` is replaced, never emptied in place: a dict handed out earlier stays a snapshot
    of one sequence number (rows are only added to it while no write happened since it was
    made), what a :class:`~memcore.model._record_batch.RecordBatch` relies on. After a write that
    changed none of its rows (:meth:`forget`), the dict stays current but is *shared*: the
    next :meth:`put` copies it first, so a snapshot never gains a row read after a write."""

    def __init__(self, limit: int = 20_000):
        self.limit = limit
        self.rows: dict[str, Row] = {}
        self.seq: int | None = None
        self._shared = False

    def valid_for(self, seq: int) -> None:
        """Forget every row when the store moved past the sequence they were read at."""
        if seq != self.seq:
            self.clear()
            self.seq = seq

    def put(self, rows: dict[str, Row]) -> bool:
        """Remember rows (everything is forgotten first when the limit would be passed).
        True when ``self.rows`` holds every row it held before and the new ones."""
        kept = len(self.rows) + len(rows) <= self.limit and len(rows) <= self.limit
        if not kept:
            self.rows = {}
        elif self._shared:
            self.rows = dict(self.rows)
        self._shared = False
        if len(rows) <= self.limit:
            self.rows.update(rows)
        return kept

    def forget(self, ids: Collection[str]) -> None:
        """Before a write that changes the rows of ``ids`` and no others: the other rows
        stay (in a new dict when some of ``ids`` were held, else in the same dict, shared);
        more than :data:`FORGET_UP_TO` ids forget everything."""
        rows = self.rows
        if len(ids) > FORGET_UP_TO:
            self.clear()
            return
        stale = [rid for rid in ids if rid in rows]
        if not stale:
            self._shared = True
            return
        kept = rows.copy()
        for rid in stale:
            del kept[rid]
        self.rows = kept
        self._shared = False

    def clear(self) -> None:
        """Forget every row."""
        self.rows = {}
        self.seq = None
        self._shared = False
