"""Read access to the vectors the store keeps, for indexes that save no copy of their own.

The store is the source of truth and keeps every record's vectors. A vector index that
saves its vectors too keeps them twice on disk. With a :class:`VectorReader` (handed to
index factories as :attr:`memcore.IndexContext.vectors` by a Collection) an index saves
only what it cannot get back from the store -- a graph, an id map -- and refills its
vectors from the store in :meth:`memcore.Index.load`.

Crash consistency: the index was saved at some store sequence number S and the store may
be ahead (a writer killed before it saved again). A record changed after S has logged
ops above S, and the catch-up that follows ``load`` removes or re-adds it, so whatever
``load`` reads for it is replaced. A record deleted (or taken out of the index) after S
has no vector any more: :meth:`VectorReader.read` reports it as not ``present`` and the
catch-up takes it out. A record that is still a member but has no vector of the right
shape means the store and the index disagree: :class:`~memcore.errors.CorruptError`, and
the collection rebuilds the index from the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import CorruptError

if TYPE_CHECKING:  # pragma: no cover
    from ..stores._sqlite_vector_files import MappedSpace
    from ..stores._store import Store

__all__ = ["VectorReader"]


class VectorReader:
    """The stored vectors of the records of one index (see the module docstring)."""

    def __init__(self, store: "Store", index: str):
        self.store = store
        self.index = index

    def read(self, ids: Sequence[str], space: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of ``ids`` in ``space`` as stored (not normalised): ``(matrix, present)``.

        ``matrix`` is float32 ``(len(ids), dim)`` in the order of ``ids``; ``present[i]`` is
        False when the store has no vector for ``ids[i]`` because it is no longer a member
        (deleted since the index was saved): its row is zeros, and the catch-up after
        ``load`` takes it out. Large lists are fine (the SQLite store scans the space once).
        Raises :class:`~memcore.errors.CorruptError` when a member of the index has no
        vector in ``space`` or one of another dimension.
        """
        ids = list(ids)
        if not ids:
            return np.zeros((0, dim), dtype=np.float32), np.zeros(0, dtype=bool)
        matrix, present = self.store.vectors(ids, space)
        if present.any() and matrix.shape[1] != dim:
            raise CorruptError(f"index {self.index!r}: the store keeps {matrix.shape[1]}-d vectors in space {space!r}, the index expects {dim}")
        if matrix.shape[1] != dim:  # nothing present: the store could not tell the width
            matrix = np.zeros((len(ids), dim), dtype=np.float32)
        self._check_missing(ids, present, space)
        return matrix, present

    def read_into(self, ids: Sequence[str], space: str, out: np.ndarray) -> np.ndarray:
        """:meth:`read` written into ``out`` (float32, ``(len(ids), dim)``, C-contiguous: an
        index's own vector storage), without a second matrix; returns ``present``. The same
        checks and errors as :meth:`read`."""
        ids = list(ids)
        if out.dtype != np.float32 or out.ndim != 2 or out.shape[0] != len(ids) or not out.flags.c_contiguous:
            raise ValueError(f"read_into needs a C-contiguous float32 ({len(ids)}, dim) matrix, got {out.dtype} {out.shape}")
        if not ids:
            return np.zeros(0, dtype=bool)
        try:
            present = self.store.vectors_into(ids, space, out)
        except CorruptError as exc:
            raise CorruptError(f"index {self.index!r}: {exc}") from None
        self._check_missing(ids, present, space)
        return present

    def mapped(self, space: str, dim: int) -> "MappedSpace | None":
        """The store's vectors of ``space`` as one memory-mapped matrix plus the row of each
        record, when the store keeps them so (the SQLite store); None otherwise (or when its
        vectors of ``space`` have another dimension than ``dim``). An index may then search
        the store's rows in place instead of keeping a copy (the ``exact`` index does)."""
        get = getattr(self.store, "mapped_vectors", None)
        found = None if get is None else get(space)
        if found is None or found.dim != dim:
            return None
        return found  # type: ignore[no-any-return]

    def _check_missing(self, ids: list[str], present: np.ndarray, space: str) -> None:
        if not present.all():
            missing = [ids[i] for i in np.flatnonzero(~present).tolist()]
            members = self.store.memberships(missing)
            lost = [rid for rid in missing if self.index in members.get(rid, ())]
            if lost:
                raise CorruptError(f"index {self.index!r}: the store has no vector in space {space!r} for member(s) {lost[:5]}")

    def __repr__(self) -> str:
        return f"VectorReader(index={self.index!r})"
