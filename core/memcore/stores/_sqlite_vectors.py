"""Vectors in the SQLite store: the spaces of one connection, their files and bulk reads.

Each space has a slot number, a dimension and a committed row count (table
``vector_spaces``), a table ``vectors_<slot>`` (record rowid -> row of the space's file)
and its file ``vectors/<slot>.f32`` (see :mod:`._sqlite_vector_files`). :func:`read_vectors`
is what an index refilling its vectors calls (through :class:`memcore.VectorReader`): the
rows of many ids looked up in one pass, then gathered from the mapped file into one
float32 matrix (``out`` when given: no second copy).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import CorruptError, DimensionError
from ._sqlite_schema import create_vector_table, ensure_vectors_view, free_table, vector_table
from ._sqlite_vector_files import SpaceFile, space_file_path

__all__ = ["Space", "SpaceSlots", "check_dim", "read_vectors", "vector_rows", "SCAN_FROM"]

SCAN_FROM = 5000
"""``read_vectors`` of at least this many ids scans the space's table once instead of looking ids up."""
_CHUNK = 500


@dataclass
class Space:
    """One vector space of a store file."""

    name: str
    slot: int
    dim: int

    @property
    def table(self) -> str:
        """Its ``rid -> row`` table."""
        return vector_table(self.slot)

    @property
    def free(self) -> str:
        """Its table of free rows."""
        return free_table(self.slot)


class SpaceSlots:
    """The spaces of one connection (read from ``vector_spaces`` when needed) and their files.

    Slots are never reused (a space keeps its slot once created), so a cached map is never
    wrong, only incomplete: an unknown space makes it read the table again."""

    def __init__(self, db: sqlite3.Connection, directory: Path, writable: bool):
        self.db = db
        self.directory = directory
        self.writable = writable
        self._spaces: dict[str, Space] | None = None
        self._files: dict[int, SpaceFile] = {}

    def _load(self) -> dict[str, Space]:
        self._spaces = {str(name): Space(str(name), int(slot), int(dim)) for name, slot, dim in self.db.execute("SELECT name, slot, dim FROM vector_spaces")}
        return self._spaces

    def forget(self) -> None:
        """Read the map again next time (after a rolled-back batch that may have added a space)."""
        self._spaces = None

    def get(self, name: str, create: sqlite3.Cursor | None = None, dim: int = 0) -> Space | None:
        """The space ``name``; None when the store has none, unless ``create`` (a cursor in
        the writer's transaction) is given: then it is created with the batch, of ``dim``."""
        spaces = self._spaces
        if spaces is None or name not in spaces:
            spaces = self._load()
        space = spaces.get(name)
        if space is None and create is not None:
            slot = max((s.slot for s in spaces.values()), default=-1) + 1
            create.execute("INSERT INTO vector_spaces (name, slot, dim, rows) VALUES (?, ?, ?, 0)", (name, slot, dim))
            create_vector_table(create, slot)
            space = spaces[name] = Space(name, slot, dim)
            ensure_vectors_view(create, [s.slot for s in spaces.values()])
            stale = self._files.pop(slot, None)  # the file of a space a rolled-back batch created in this slot
            if stale is not None:
                stale.close()
            self.file(space).truncate(0)  # a file left by a batch that created this slot and was rolled back
        return space

    def table(self, name: str) -> str | None:
        """The ``rid -> row`` table of ``name`` (None: no such space)."""
        space = self.get(name)
        return None if space is None else space.table

    def refresh(self) -> dict[int, int]:
        """Read the map again, with each space's committed rows (one statement, in the
        caller's snapshot): what a reader's record read needs. Returns ``slot -> rows``."""
        found = self.db.execute("SELECT name, slot, dim, rows FROM vector_spaces").fetchall()
        self._spaces = {str(name): Space(str(name), int(slot), int(dim)) for name, slot, dim, _ in found}
        return {int(slot): int(rows) for _, slot, _, rows in found}

    def items(self, refresh: bool = False) -> list[Space]:
        """Every space (``refresh``: read the map first, as a reader does)."""
        spaces = self._load() if refresh or self._spaces is None else self._spaces
        return list(spaces.values())

    def file(self, space: Space) -> SpaceFile:
        """The open file of ``space``."""
        handle = self._files.get(space.slot)
        if handle is None:
            handle = self._files[space.slot] = SpaceFile(space_file_path(self.directory, space.slot), space.dim, self.writable)
        return handle

    def committed(self, space: Space) -> int:
        """The rows committed transactions reference (read in the caller's snapshot)."""
        row = self.db.execute("SELECT rows FROM vector_spaces WHERE slot = ?", (space.slot,)).fetchone()
        return 0 if row is None else int(row[0])

    def matrix(self, space: Space, populate: bool = False, committed: int | None = None) -> np.ndarray:
        """The committed rows of ``space``, memory-mapped read-only (``committed``: their
        number, read in the caller's snapshot already)."""
        return self.file(space).array(self.committed(space) if committed is None else committed, populate=populate)

    def recover(self) -> None:
        """The writer at open: cut each file back to its committed length (rows a batch
        wrote before a crash kept it from committing) and zero the free rows a crash
        between a commit and its zeroing left with content."""
        for space in self.items(refresh=True):
            handle = self.file(space)
            committed = self.committed(space)
            have = handle.size_rows()
            if have > committed:
                handle.truncate(committed)
            elif have < committed:
                handle.array(committed)  # the CorruptError naming the truncated file
            free = np.fromiter((row for (row,) in self.db.execute(f"SELECT row FROM {space.free}")), dtype=np.int64)
            if len(free):
                matrix = handle.array(committed)
                dirty = free[(free < committed)]
                dirty = dirty[matrix[dirty].any(axis=1)] if len(dirty) else dirty
                if len(dirty):
                    handle.zero(dirty.tolist())
                    handle.sync()

    def close(self) -> None:
        """Close every file."""
        for handle in self._files.values():
            handle.close()
        self._files.clear()


def check_dim(space: Space, matrix: np.ndarray) -> None:
    """A ``(n, dim)`` matrix of the space's width, or the DimensionError that says so."""
    if matrix.ndim != 2 or matrix.shape[1] != space.dim:
        raise DimensionError(f"space {space.name!r} stores {space.dim}-d vectors, got {matrix.shape[-1] if matrix.ndim else 0} values")


def vector_rows(db: sqlite3.Connection, space: Space, ids: Sequence[str], scan_from: int = SCAN_FROM) -> np.ndarray:
    """The file row of each of ``ids`` in ``space`` (int64; -1 when it has none there)."""
    found: dict[str, int] = {}
    if len(ids) >= scan_from:  # the whole table in rowid order, each row's id looked up by rowid
        found = dict(db.execute(f"SELECT r.id, v.row FROM {space.table} v JOIN records r ON r.rowid = v.rid"))
    else:
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            found.update(
                db.execute(f"SELECT r.id, v.row FROM records r JOIN {space.table} v ON v.rid = r.rowid WHERE r.id IN ({','.join('?' * len(chunk))})", chunk)
            )
    get = found.get
    return np.fromiter((get(rid, -1) for rid in ids), dtype=np.int64, count=len(ids))


def read_vectors(
    db: sqlite3.Connection,
    slots: SpaceSlots,
    space: Space,
    ids: list[str],
    check: Callable[[str, bytes], np.ndarray],
    file: Path,
    scan_from: int = SCAN_FROM,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(matrix, present)`` of ``ids`` in ``space``; ``check(id, bytes)`` raises the
    CorruptError that names a damaged record. One vectorised finite check per call. With
    ``out`` (float32, ``(len(ids), dim)``, C-contiguous) the rows are gathered there and
    ``out`` is the matrix returned; another width is a CorruptError."""
    rows = vector_rows(db, space, ids, scan_from)
    committed = slots.committed(space)
    present = rows >= 0
    beyond = np.flatnonzero(rows >= committed)
    if len(beyond):
        rid = ids[int(beyond[0])]
        raise CorruptError(f"{file}: stored vector {space.name!r} of record {rid!r} is at row {int(rows[beyond[0]])}, past the {committed} rows of its file")
    if out is not None and out.shape[1] != space.dim:
        raise CorruptError(f"{file}: stored vectors {space.name!r} have {space.dim} values, {out.shape[1]} expected")
    matrix = out if out is not None else np.empty((len(ids), space.dim), dtype=np.float32)
    source = slots.matrix(space) if present.any() else np.zeros((1, space.dim), dtype=np.float32)
    np.take(source, np.where(present, rows, 0), axis=0, out=matrix, mode="clip")  # rows checked above
    if not present.all():
        matrix[~present] = 0.0
    squares = np.einsum("ij,ij->i", matrix, matrix)
    if not np.isfinite(squares).all():  # NaN, inf or overflow: the per-row check names the record
        for i in np.flatnonzero(~np.isfinite(squares)).tolist():
            check(ids[i], matrix[i].tobytes())
    return matrix, present
