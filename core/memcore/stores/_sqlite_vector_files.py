"""The vector files of the SQLite store: one fixed-width float32 file per space, memory-mapped.

Schema version 3 keeps each space's vectors out of the database, once, in
``vectors/<slot>.f32`` beside it: rows of ``dim`` float32 values, no header, so that the
file *is* a matrix an index can memory-map and search in place (numpy, BLAS) instead of
keeping a copy of its own. The database says which row is whose and how long the file is:

- ``vectors_<slot>`` maps a record's rowid to its row (``rid -> row``);
- ``vector_spaces.rows`` is the file's *committed* length: the rows that committed
  transactions may reference. A batch writes its vectors first (appended past that length,
  or into free rows), ``fdatasync``\\ s the file (unless ``synchronous=OFF``), then commits
  the transaction that references them and moves the length: a crash before the commit
  leaves rows nobody references, and the writer's next open cuts the file back to its
  committed length (a torn tail is never read);
- ``free_<slot>`` lists the rows that committed deletes (and vector updates: a changed
  vector gets a new row, so a rolled-back batch never loses the old one) gave back. A row
  is zeroed right after the commit that freed it, and again at the writer's next open when
  a crash came in between, so no byte of a deleted record stays on disk; later batches
  reuse free rows before appending.

:class:`SpaceFile` is one such file (writes by ``pwrite``, so a full disk raises its
``OSError``; reads through a shared read-only mapping, remapped when the file grew).
:class:`MappedSpace` is what the store hands to an index (:meth:`SQLiteStore.mapped_vectors`):
the space's rows as a read-only array and the rows of given records.
"""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import CorruptError

__all__ = ["SpaceFile", "MappedSpace", "VECTOR_DIR", "space_file_path", "runs"]

VECTOR_DIR = "vectors"
"""The folder of the space files, beside the database."""

_POPULATE = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform == "linux" else None)
_WRITE_MAX = 1 << 30
"""Most bytes one ``pwrite`` is asked to write (Linux writes at most ~2 GiB per call)."""


def space_file_path(directory: Path, slot: int) -> Path:
    """The file of the space with this slot number."""
    return directory / VECTOR_DIR / f"{int(slot)}.f32"


def runs(rows: np.ndarray) -> list[tuple[int, int, int]]:
    """``(start_index, end_index, first_row)`` of each run of consecutive rows in ``rows``
    (in the given order): each run is one ``pwrite``."""
    if len(rows) == 0:
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = [0, *breaks.tolist()]
    ends = [*breaks.tolist(), len(rows)]
    return [(s, e, int(rows[s])) for s, e in zip(starts, ends)]


class SpaceFile:
    """The rows of one space: ``pwrite`` to write, a shared read-only mapping to read."""

    def __init__(self, path: Path, dim: int, writable: bool):
        if dim <= 0:
            raise CorruptError(f"{path}: a vector space of dimension {dim}")
        self.path = path
        self.dim = dim
        self.width = dim * 4
        self.writable = writable
        if writable:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fd: int | None = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        except FileNotFoundError:
            raise CorruptError(f"{path} is missing: the store's vectors of this space are lost (restore it from a backup)") from None
        self._array: np.ndarray | None = None
        self._mapped: mmap.mmap | None = None

    def size_rows(self) -> int:
        """Whole rows in the file now (committed or not)."""
        assert self.fd is not None
        return os.fstat(self.fd).st_size // self.width

    def array(self, rows: int, *, populate: bool = False) -> np.ndarray:
        """The first ``rows`` rows as a read-only ``(rows, dim)`` float32 array over the
        file's mapping (mapped again when the file grew past the mapping); CorruptError
        when the file is shorter. ``populate``: map the pages ahead (``MADV_POPULATE_READ``)."""
        if rows <= 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        array = self._array
        if array is None or array.shape[0] < rows:
            assert self.fd is not None
            have = self.size_rows()
            if have < rows:
                raise CorruptError(f"{self.path} holds {have} rows of {self.dim} float32, the store references {rows}: the file was truncated")
            self._mapped = mmap.mmap(self.fd, have * self.width, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
            array = self._array = np.frombuffer(self._mapped, dtype=np.float32).reshape(have, self.dim)
        if populate and _POPULATE is not None and self._mapped is not None:
            try:
                self._mapped.madvise(_POPULATE, 0, rows * self.width)
            except (OSError, ValueError, AttributeError):  # an older kernel: faulted in on use
                pass
        return array[:rows]

    def write(self, rows: np.ndarray, matrix: np.ndarray) -> None:
        """Write row ``i`` of ``matrix`` (float32, C order, ``(len(rows), dim)``) at file row
        ``rows[i]``, one ``pwrite`` per run of consecutive rows (an OSError on a full disk)."""
        assert self.fd is not None
        data = np.ascontiguousarray(matrix, dtype=np.float32).data.cast("B")
        for start, end, row in runs(rows):
            self._pwrite(data[start * self.width : end * self.width], row * self.width)

    def zero(self, rows: Sequence[int]) -> None:
        """Overwrite ``rows`` with zeros (freed rows: nothing of a deleted vector stays)."""
        picked = np.unique(np.asarray(rows, dtype=np.int64))
        picked = picked[picked < self.size_rows()]
        if len(picked) == 0:
            return
        zeros = memoryview(bytes(self.width * min(len(picked), 4096)))
        for start, end, row in runs(picked):
            for s in range(start, end, 4096):
                n = min(end, s + 4096) - s
                self._pwrite(zeros[: n * self.width], (row + s - start) * self.width)

    def _pwrite(self, data: memoryview, offset: int) -> None:
        assert self.fd is not None
        while len(data):
            done = os.pwrite(self.fd, data[:_WRITE_MAX], offset)
            data, offset = data[done:], offset + done

    def truncate(self, rows: int) -> None:
        """Cut the file to ``rows`` rows (a torn tail past the committed length)."""
        assert self.fd is not None
        os.ftruncate(self.fd, rows * self.width)
        if self._array is not None and self._array.shape[0] > rows:
            self._array = None  # the next read maps the file again (the old mapping stays valid for whoever holds it)
            self._mapped = None

    def sync(self) -> None:
        """``fdatasync``: the rows written so far are on disk."""
        assert self.fd is not None
        os.fdatasync(self.fd)

    def close(self) -> None:
        """Close the file (arrays handed out keep their mapping alive)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self._array = None
        self._mapped = None


class MappedSpace:
    """A space's vectors as the store keeps them, for an index that searches them in place.

    ``matrix()`` is a read-only float32 array over the space's file (the store's committed
    rows; rows nobody references are zeros or a freed record's replacement), ``rows(ids)``
    the row of each id (-1 when the store keeps no vector of that record in this space).
    Rows change only by logged writes: a deleted or re-embedded record's old row may be
    reused once the write that freed it committed, so an index keeps rows exactly as long
    as it keeps the ids (its catch-up from the log replaces both)."""

    def __init__(
        self,
        space: str,
        dim: int,
        rows_of: Callable[[Sequence[str]], np.ndarray],
        matrix: Callable[[bool], np.ndarray],
        holding: Callable[[Sequence[str], np.ndarray], np.ndarray | None],
    ):
        self.space = space
        self.dim = dim
        self._rows_of = rows_of
        self._matrix = matrix
        self._holding = holding

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        """The file row of each id (int64; -1: no vector of this record in the space)."""
        return self._rows_of(ids)

    def rows_holding(self, ids: Sequence[str], vectors: np.ndarray) -> np.ndarray | None:
        """The rows of ``ids`` when each holds exactly the given vector (row ``i`` of
        ``vectors``, float32), else None (a record the store does not keep, or keeps otherwise)."""
        return self._holding(ids, vectors)

    def matrix(self, populate: bool = False) -> np.ndarray:
        """Every committed row, ``(rows, dim)`` float32, read-only, memory-mapped."""
        return self._matrix(populate)

    def __repr__(self) -> str:
        return f"MappedSpace(space={self.space!r}, dim={self.dim})"
