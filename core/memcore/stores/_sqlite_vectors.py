"""Vectors in the SQLite store: one rowid table per space, read in bulk.

Each space has a slot number (table ``vector_spaces``) and a table ``vectors_<slot>``
keyed by the record's rowid. :func:`read_vectors` is what an index refilling its vectors
on load calls (through :class:`memcore.VectorReader`): for many ids it scans the space's
table once, in record order, copying each blob straight into its row of one preallocated
float32 matrix (no intermediate list, no second copy).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from itertools import chain
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import CorruptError
from ._sqlite_schema import create_vector_table, ensure_vectors_view, vector_table

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
    if scan:  # the space table in rowid order, each row's id looked up by rowid (sequential pages, no sort)
        return iter(db.execute(f"SELECT r.id, v.data FROM {table} v JOIN records r ON r.rowid = v.rid ORDER BY v.rid"))
    return chain.from_iterable(
        db.execute(f"SELECT r.id, v.data FROM records r JOIN {table} v ON v.rid = r.rowid WHERE r.id IN ({','.join('?' * len(chunk))})", chunk)
        for chunk in (list(wanted[start : start + _CHUNK]) for start in range(0, len(wanted), _CHUNK))
    )


def read_vectors(
    db: sqlite3.Connection,
    table: str,
    ids: list[str],
    space: str,
    check: Callable[[str, bytes], np.ndarray],
    file: Path,
    scan_from: int = SCAN_FROM,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(matrix, present)`` of ``ids`` in one space table; ``check(id, blob)`` raises the
    CorruptError that names a damaged record. One vectorised finite check per call. From
    ``scan_from`` ids on, the table is scanned instead of looking ids up; while the scan
    meets ``ids`` in their order (an index that received the records as they were
    inserted), each blob goes to the next row without an id lookup. With ``out`` (float32,
    ``(len(ids), dim)``, C-contiguous) the blobs are written there and ``out`` is the matrix
    returned; a stored vector of another width is a CorruptError."""
    n = len(ids)
    scan = n >= scan_from
    wanted = ids if scan else list(dict.fromkeys(ids))
    matrix, present, position = _place(_rows(db, table, wanted, scan), ids, scan, space, check, file, out)
    if matrix.shape[1] == 0:
        return matrix, present
    squares = np.einsum("ij,ij->i", matrix, matrix)
    if not np.isfinite(squares).all():  # NaN, inf or overflow: the per-row check names the record
        for i in np.flatnonzero(~np.isfinite(squares)).tolist():
            check(ids[i], matrix[i].tobytes())
    if position is not None and len(position) != n:  # a repeated id: every occurrence gets the row
        for i, rid in enumerate(ids):
            j = position[rid]
            if j != i and present[j]:
                matrix[i] = matrix[j]
                present[i] = True
    return matrix, present


def _positions(ids: list[str]) -> dict[str, int]:
    position: dict[str, int] = {}
    for i, rid in enumerate(ids):
        position.setdefault(rid, i)
    return position


def _place(
    rows: Iterator[tuple[str, bytes]],
    ids: list[str],
    in_order: bool,
    space: str,
    check: Callable[[str, bytes], np.ndarray],
    file: Path,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, int] | None]:
    """Copy each blob straight into its row of one preallocated matrix (``out`` when given):
    the next row while the rows come in the order of ``ids`` (``in_order``), else the row of
    its id (first occurrence). Returns the matrix, ``present`` and the id positions when they
    were needed (None: every id was met in order, so none repeats)."""
    n = len(ids)
    present = np.zeros(n, dtype=bool)
    matrix: np.ndarray | None = None
    view: memoryview | None = None
    width = 0
    position = None if in_order else _positions(ids)
    k = 0  # ids[:k] were met in order
    placed: list[int] = []
    for rid, data in rows:
        if position is None and k < n and rid == ids[k]:
            row = k
            k += 1
        else:
            if position is None:
                position = _positions(ids)
            found = position.get(rid)
            if found is None:
                continue
            row = found
            placed.append(row)
        if view is None:
            check(rid, data)  # the first blob sets the width: it must be a readable vector
            width = len(data)
            if out is not None and width != out.shape[1] * 4:
                raise CorruptError(f"{file}: stored vector {space!r} of record {rid!r} has {width // 4} values, {out.shape[1]} expected")
            matrix = out if out is not None else np.zeros((n, width // 4), dtype=np.float32)
            view = memoryview(matrix.data).cast("B")
        if len(data) != width or type(data) is not bytes:  # damaged or another dimension: named by the per-row check
            check(rid, data)
            raise CorruptError(f"{file}: stored vector {space!r} of record {rid!r} has {len(data) // 4} values, others {width // 4}")
        view[row * width : (row + 1) * width] = data
    present[:k] = True
    present[placed] = True
    if k < n and position is None:  # ids left unmet: a repeated id may still get its row
        position = _positions(ids)
    if out is not None:
        if not present.all():  # rows of absent ids are zeros, as in a fresh matrix
            out[~present] = 0.0
        return out, present, position
    if matrix is None:
        return np.zeros((n, 0), dtype=np.float32), present, position
    return matrix, present, position
