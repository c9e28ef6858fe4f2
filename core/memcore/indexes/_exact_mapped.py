"""The ``exact`` index's rows when they are the store's: searched in place, never copied.

A store that keeps each space's vectors in one fixed-width float32 file (the SQLite store,
schema version 3) hands the index a :class:`~memcore.stores._sqlite_vector_files.MappedSpace`:
the file as a read-only memory-mapped matrix and the row of each record. The index then
keeps, per position, only the file row (``at``, int64) and for cosine the inverse norm of
that row (``scale``, float32): a score is ``file[at[i]] . q * scale[i]``, the same value a
normalised copy would give, and the vectors are on disk once. Its payload is ``rows.npy``
(+ ``scale.npy``) beside ``ids.json``: 8-12 bytes per record instead of the vectors.

The store's rows change only by logged writes (a deleted or re-embedded record's row is
freed and may be reused by a later batch), and the index keeps a row exactly as long as
it keeps the id: the catch-up from the log replaces both.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .._util.atomic import atomic_write_bytes
from ..errors import CorruptError
from ._payload import npy_bytes, read_npy

if TYPE_CHECKING:  # pragma: no cover
    from ..stores._sqlite_vector_files import MappedSpace

__all__ = ["MappedRows", "ROWS", "SCALE"]

ROWS = "rows.npy"
SCALE = "scale.npy"


def inverse_norms(vectors: np.ndarray) -> np.ndarray:
    """``1 / |v|`` per row (0 for an all-zero row: its cosine is 0, as a normalised copy gives)."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float32))
    out = np.zeros(len(vectors), dtype=np.float32)
    np.divide(1.0, norms, out=out, where=norms > 0)
    return out


def _identity(at: np.ndarray, n: int) -> bool:
    """Whether ``at[:n]`` is ``0, 1, ..., n - 1``: strictly increasing from 0 to ``n - 1``
    (one comparison of neighbours, no ``arange`` of ``n`` int64 to compare with)."""
    if n == 0:
        return True
    head = at[:n]
    return bool(head[0] == 0 and head[-1] == n - 1 and (n == 1 or (head[1:] > head[:-1]).all()))


class MappedRows:
    """Positions ``[0, n)`` of an exact index as rows of the store's mapped file."""

    def __init__(self, space: "MappedSpace", cosine: bool):
        self.space = space
        self.cosine = cosine
        self.file: np.ndarray = space.matrix()
        self.at = np.zeros(64, dtype=np.int64)
        self.scale: np.ndarray | None = np.zeros(64, dtype=np.float32) if cosine else None
        self.ident = True
        """Position ``i`` is file row ``i`` for every held position (appends in insertion order)."""

    def reserve(self, need: int) -> None:
        """Room for ``need`` positions (at least doubling)."""
        if need > len(self.at):
            size = max(need, 2 * len(self.at))
            self.at = np.resize(self.at, size)
            if self.scale is not None:
                self.scale = np.resize(self.scale, size)

    def rows_of(self, ids: Sequence[str], vectors: np.ndarray) -> np.ndarray | None:
        """The store's rows of ``ids``, when each holds exactly the given vector (what the
        index is asked to add); None otherwise (a record the store does not keep in this
        space, or keeps otherwise): the index then keeps a copy of its own."""
        rows = self.space.rows_holding(ids, vectors)
        if rows is not None:
            self.file = self.space.matrix()
        return rows

    def put(self, start: int, rows: np.ndarray, vectors: np.ndarray) -> None:
        """Positions ``[start, start + len(rows))`` are ``rows`` (holding ``vectors``)."""
        n = len(rows)
        self.reserve(start + n)
        if self.ident and not np.array_equal(rows, np.arange(start, start + n)):
            self.ident = False
        self.at[start : start + n] = rows
        if self.scale is not None:
            self.scale[start : start + n] = inverse_norms(vectors)

    def adopt(self, rows: np.ndarray) -> None:
        """Positions ``[0, len(rows))`` are the store's ``rows``, their norms computed from
        the file (block by block: no full-size copy)."""
        self.file = self.space.matrix(populate=True)
        n = len(rows)
        self.reserve(n)
        self.at[:n] = rows
        self.ident = _identity(self.at, n)
        if self.scale is not None:
            for start in range(0, n, 8192):
                block = rows[start : start + 8192]
                self.scale[start : start + len(block)] = inverse_norms(np.take(self.file, block, axis=0))

    def move(self, dst: int, src: int) -> None:
        """Position ``src``'s row goes to position ``dst`` (a removal filling its hole)."""
        self.at[dst] = self.at[src]
        if self.scale is not None:
            self.scale[dst] = self.scale[src]
        self.ident = False

    def scores(self, q: np.ndarray, n: int) -> np.ndarray:
        """``q``'s score against each of positions ``[0, n)`` (one product over the file)."""
        file = self.file
        if self.ident:
            scores: np.ndarray = file[:n].dot(q)
        elif 2 * n >= len(file):  # most rows are the index's: one product, then its rows' scores
            scores = file.dot(q)[self.at[:n]]
        else:
            scores = np.take(file, self.at[:n], axis=0).dot(q)
        if self.scale is not None:
            scores *= self.scale[:n]
        return scores

    def scores_many(self, queries: np.ndarray, n: int) -> np.ndarray:
        """:meth:`scores` of each row of ``queries``, as one ``(len(queries), n)`` matrix
        (one matrix product over the file)."""
        file = self.file
        if self.ident:
            scores: np.ndarray = queries @ file[:n].T
        elif 2 * n >= len(file):
            scores = (queries @ file.T)[:, self.at[:n]]
        else:
            scores = queries @ np.take(file, self.at[:n], axis=0).T
        if self.scale is not None:
            scores *= self.scale[:n]
        return scores

    def vectors(self, positions: np.ndarray | None, n: int) -> np.ndarray:
        """The vectors of ``positions`` (all ``n`` when None) as the index keeps them (unit
        rows for cosine): a gathered copy."""
        picked = np.arange(n) if positions is None else positions
        out = np.take(self.file, self.at[picked], axis=0)
        if self.scale is not None:
            out *= self.scale[picked][:, None]
        return out

    def raw(self) -> np.ndarray:
        """The stored vectors by file row (what :meth:`file_rows` index)."""
        return self.file

    def file_rows(self, positions: np.ndarray) -> np.ndarray:
        """The file rows of ``positions``."""
        rows: np.ndarray = self.at[positions]
        return rows

    def rescale(self, scores: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Scores of the raw rows of ``positions`` as scores of the index's vectors."""
        if self.scale is not None:
            scores *= self.scale[positions]
        return scores

    def save(self, directory: Path, n: int) -> None:
        """``rows.npy`` (+ ``scale.npy`` for cosine)."""
        atomic_write_bytes(directory / ROWS, npy_bytes(self.at[:n]))
        if self.scale is not None:
            atomic_write_bytes(directory / SCALE, npy_bytes(self.scale[:n]))

    def load(self, directory: Path, n: int, where: str) -> None:
        """Read a save of ``n`` positions and map the store's file, its pages ahead."""
        at = read_npy(directory / ROWS, where, dtype=np.int64, shape=(n,))
        scale = read_npy(directory / SCALE, where, dtype=np.float32, shape=(n,)) if self.cosine else None
        self.file = self.space.matrix(populate=True)
        if n and (at.min() < 0 or at.max() >= len(self.file)):
            raise CorruptError(f"{where}: {ROWS} names rows outside the store's {len(self.file)} rows")
        if scale is not None and not np.isfinite(scale).all():
            raise CorruptError(f"{where}: {SCALE} holds values that are not finite")
        # arrays of their own as read (no second copy: ~20 ms at 1M), writable for later changes
        self.at = np.require(at, requirements=["C", "W", "O"])
        self.scale = None if scale is None else np.require(scale, requirements=["C", "W", "O"])
        self.ident = _identity(self.at, n)
