"""Records of one store read, each built when a hit first asks for it.

A retrieval attaches the stored record of each of its hits. On a small memory the search
itself takes a few microseconds, and building ten :class:`~memcore.model.Record` objects
(plus a copy of each metadata dict) cost about as much again, for hits whose records the
caller often never reads. So the collection asks the store for a :class:`RecordBatch`
(:meth:`memcore.Store.get_batch`): which of the ids exist, and what to build each record
from, read in one go at attach time. A hit keeps a reference to the batch and builds its
record on first access of :attr:`memcore.Hit.record` -- from what was read at attach time,
so the record is the one a direct read would have given then, whatever is written later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from ._record import Record

__all__ = ["RecordBatch"]


class RecordBatch:
    """What one read of some records found: ``rows`` maps each found id to what ``build``
    turns into its :class:`Record` (without ``build``: the records themselves).

    The rows must never change after the batch is made (a store hands over a snapshot: rows
    it replaces, never mutates). Each :meth:`record` call builds a new record, so the
    caller owns it.
    """

    __slots__ = ("_rows", "_build", "complete")

    def __init__(self, rows: Mapping[str, Any], build: Callable[[Any], Record] | None = None, *, complete: bool = False):
        self._rows = rows
        self._build = build
        self.complete = complete
        """True when the store found every id it was asked for (attaching drops nothing)."""

    def __contains__(self, rid: object) -> bool:
        return rid in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def record(self, rid: str) -> Record | None:
        """The record of ``rid`` as read (None when the read did not find it)."""
        row = self._rows.get(rid)
        if row is None:
            return None
        if self._build is None:
            found: Record = row
            return found
        return self._build(row)

    @classmethod
    def of_records(cls, records: "Sequence[Record | None]") -> "RecordBatch":
        """A batch of records already built (the default of :meth:`memcore.Store.get_batch`)."""
        return cls({r.id: r for r in records if r is not None})
