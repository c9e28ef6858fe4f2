"""Vectors in the SQLite store: one rowid table per space, read in bulk.

Each space has a slot number (table ``vector_spaces``) and a table ``vectors_<slot>``
keyed by the record's rowid. :func:`read_vectors` is what an index refilling its vectors
on load calls (through :class:`memcore.VectorReader`): for many ids it scans the space's
table once, in record order, straight into one preallocated float32 matrix; when the ids
asked are the stored ones in record order (an index that saw the records inserted), the
blobs are joined and viewed as the matrix without a per-row index lookup.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import CorruptError
from .sqlite_schema import create_vector_table, ensure_vectors_view, vector_table

__all__ = ["SpaceSlots", "read_vectors", "SCAN_FROM"]

SCAN_FROM = 5000
"""``read_vectors`` of at least this many ids scans the space once instead of looking ids up."""
_CHUNK = 500


class SpaceSlots:
    """The space -> table map of one connection, read from ``vector_spaces`` when needed.

    Slots are never reused (a space keeps its table once created), so a cached map is
    never wrong, only incomplete: an unknown space makes it read the table again."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self._slots: dict[str, int] | None = None

    def _load(self) -> dict[str, int]:
        self._slots = {str(name): int(slot) for name, slot in self.db.execute("SELECT name, slot FROM vector_spaces")}
        return self._slots

    def forget(self) -> None:
        """Read the map again next time (after a rolled-back batch that may have added a space)."""
        self._slots = None

    def table(self, space: str, create: sqlite3.Cursor | None = None) -> str | None:
        """The table of ``space``; None when it has none, unless ``create`` (a cursor in the
        writer's transaction) is given: then the table is created with the batch."""
        slots = self._slots
        if slots is None or space not in slots:
            slots = self._load()
        slot = slots.get(space)
        if slot is None:
            if create is None:
                return None
            slot = max(slots.values(), default=-1) + 1
            create.execute("INSERT INTO vector_spaces VALUES (?, ?)", (space, slot))
            create_vector_table(create, slot)
            slots[space] = slot
            ensure_vectors_view(create, slots.values())
        return vector_table(slot)

    def items(self, refresh: bool = False) -> list[tuple[str, str]]:
        """``(space, table)`` of every space (``refresh``: read the map first, as a reader does)."""
        slots = self._load() if refresh or self._slots is None else self._slots
        return [(name, vector_table(slot)) for name, slot in slots.items()]

    def tables(self) -> list[str]:
        """Every space table."""
        return [table for _, table in self.items()]


def _rows(db: sqlite3.Connection, table: str, wanted: Sequence[str], scan: bool) -> Iterator[tuple[str, bytes]]:
    if scan:  # the space table in rowid order, each row's id looked up by rowid
        yield from db.execute(f"SELECT r.id, v.data FROM {table} v JOIN records r ON r.rowid = v.rid ORDER BY v.rid")
        return
    for start in range(0, len(wanted), _CHUNK):
        chunk = list(wanted[start : start + _CHUNK])
        yield from db.execute(f"SELECT r.id, v.data FROM records r JOIN {table} v ON v.rid = r.rowid WHERE r.id IN ({','.join('?' * len(chunk))})", chunk)


def read_vectors(
    db: sqlite3.Connection, table: str, ids: list[str], space: str, check: Callable[[str, bytes], np.ndarray], file: Path, scan_from: int = SCAN_FROM
) -> tuple[np.ndarray, np.ndarray]:
    """``(matrix, present)`` of ``ids`` in one space table; ``check(id, blob)`` raises the
    CorruptError that names a damaged record. One vectorised finite check per call. From
    ``scan_from`` distinct ids on, the table is scanned instead of looking ids up."""
    n = len(ids)
    position: dict[str, int] = {}
    for i, rid in enumerate(ids):
        position.setdefault(rid, i)
    scan = len(position) >= scan_from
    rows = _rows(db, table, list(position), scan)
    matrix: np.ndarray | None = None
    present = np.zeros(n, dtype=bool)
    if scan:
        fetched = list(rows)
        width = len(fetched[0][1]) if fetched else 0
        if len(fetched) == n == len(position) and width and width % 4 == 0:
            found = [rid for rid, _ in fetched]
            blobs = [data for _, data in fetched]
            if found == ids and all(type(data) is bytes and len(data) == width for data in blobs):  # ids in record order: no per-row placement
                matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, width // 4).copy()
                present[:] = True
        if matrix is None:
            rows = iter(fetched)
        del fetched
    if matrix is None:
        matrix, present = _place(rows, position, n, space, check, file)
    if matrix.shape[1] == 0:
        return matrix, present
    squares = np.einsum("ij,ij->i", matrix, matrix)
    if not np.isfinite(squares).all():  # NaN, inf or overflow: the per-row check names the record
        for i in np.flatnonzero(~np.isfinite(squares)).tolist():
            check(ids[i], matrix[i].tobytes())
    if len(position) != n:  # a repeated id: every occurrence gets the row
        for i, rid in enumerate(ids):
            j = position[rid]
            if j != i and present[j]:
                matrix[i] = matrix[j]
                present[i] = True
    return matrix, present


def _place(
    rows: Iterator[tuple[str, bytes]], position: dict[str, int], n: int, space: str, check: Callable[[str, bytes], np.ndarray], file: Path
) -> tuple[np.ndarray, np.ndarray]:
    """Copy each blob straight into its row of a preallocated matrix."""
    present = np.zeros(n, dtype=bool)
    matrix: np.ndarray | None = None
    view: memoryview | None = None
    width = 0
    get = position.get
    for rid, data in rows:
        row = get(rid)
        if row is None:
            continue
        if view is None:
            check(rid, data)  # the first blob sets the width: it must be a readable vector
            width = len(data)
            matrix = np.zeros((n, width // 4), dtype=np.float32)
            view = memoryview(matrix.data).cast("B")
        if len(data) != width or type(data) is not bytes:  # damaged or another dimension: named by the per-row check
            check(rid, data)
            raise CorruptError(f"{file}: stored vector {space!r} of record {rid!r} has {len(data) // 4} values, others {width // 4}")
        view[row * width : (row + 1) * width] = data
        present[row] = True
    if matrix is None:
        return np.zeros((n, 0), dtype=np.float32), present
    return matrix, present
