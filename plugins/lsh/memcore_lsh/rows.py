"""Slots: the per-record data of the ``lsh`` index (id, codes, optional vector).

A record occupies one slot (a row of the code and vector matrices). Slots are appended;
a removed record leaves a dead slot until :meth:`Slots.compact` renumbers the live ones
in their existing order (an increasing map), so any order decided by slot number is the
same before and after compaction, saving and loading.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

__all__ = ["Slots"]


class Slots:
    """Growable matrices of codes ``(slots, tables)``, packed codes ``(slots, words)`` and, optionally, vectors ``(slots, dim)``."""

    def __init__(self, dim: int, tables: int, words: int, store_vectors: bool):
        self.dim = dim
        self.tables = tables
        self.words = words
        self.store_vectors = store_vectors
        self.ids: list[str | None] = []
        self.slot_of: dict[str, int] = {}
        self._codes = np.zeros((0, tables), dtype=np.uint64)
        self._packed = np.zeros((0, words), dtype=np.uint64)
        self._vectors = np.zeros((0, dim), dtype=np.float32) if store_vectors else None
        self._alive = np.zeros(0, dtype=bool)

    # -- views -----------------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Slots handed out, dead ones included."""
        return len(self.ids)

    @property
    def live(self) -> int:
        """Slots holding a record."""
        return len(self.slot_of)

    @property
    def dead(self) -> int:
        """Slots left by removed records, not compacted yet."""
        return self.used - self.live

    @property
    def codes(self) -> np.ndarray:
        """``(used, tables)`` uint64 codes."""
        return self._codes[: self.used]

    @property
    def packed(self) -> np.ndarray:
        """``(used, words)`` uint64: the full codes packed densely (for Hamming distances)."""
        return self._packed[: self.used]

    @property
    def vectors(self) -> np.ndarray | None:
        """``(used, dim)`` normalised float32 vectors (None when vectors are not stored)."""
        return None if self._vectors is None else self._vectors[: self.used]

    def live_slots(self) -> np.ndarray:
        """Slot numbers of the held records, ascending."""
        return np.flatnonzero(self._alive[: self.used])

    def slots_of(self, ids: Iterable[str]) -> np.ndarray:
        """Slots of the held ids among ``ids`` (others skipped), ascending."""
        found = [s for s in (self.slot_of.get(i) for i in ids) if s is not None]
        return np.unique(np.array(found, dtype=np.int64))

    # -- changes ---------------------------------------------------------------------------

    def append(self, ids: Sequence[str], codes: np.ndarray, packed: np.ndarray, vectors: np.ndarray | None) -> np.ndarray:
        """New slots for ``ids`` (not held), returned in order."""
        start, count = self.used, len(ids)
        self._reserve(start + count)
        self._codes[start : start + count] = codes
        self._packed[start : start + count] = packed
        if self._vectors is not None:
            self._vectors[start : start + count] = vectors
        self._alive[start : start + count] = True
        for offset, rid in enumerate(ids):
            self.slot_of[rid] = start + offset
        self.ids.extend(ids)
        return np.arange(start, start + count, dtype=np.int64)

    def kill(self, slots: np.ndarray) -> None:
        """Mark ``slots`` dead and forget their ids."""
        for s in slots.tolist():
            rid = self.ids[s]
            if rid is not None:
                del self.slot_of[rid]
                self.ids[s] = None
        self._alive[slots] = False

    def compact(self) -> np.ndarray:
        """Drop dead slots; returns the map old slot -> new slot (-1 for dead ones)."""
        live = self.live_slots()
        mapping = np.full(self.used, -1, dtype=np.int64)
        mapping[live] = np.arange(live.size, dtype=np.int64)
        self._codes = self._codes[live].copy()
        self._packed = self._packed[live].copy()
        if self._vectors is not None:
            self._vectors = self._vectors[live].copy()
        self._alive = np.ones(live.size, dtype=bool)
        self.ids = [self.ids[s] for s in live.tolist()]
        self.slot_of = {rid: i for i, rid in enumerate(self.ids) if rid is not None}  # (every live slot has an id)
        return mapping

    def replace_all(self, ids: list[str], codes: np.ndarray, packed: np.ndarray, vectors: np.ndarray | None) -> None:
        """Set the contents to ``ids`` in slots ``0..n-1`` (used by ``load``)."""
        self.ids = list(ids)
        self.slot_of = {rid: i for i, rid in enumerate(ids)}
        self._codes = np.ascontiguousarray(codes, dtype=np.uint64)
        self._packed = np.ascontiguousarray(packed, dtype=np.uint64)
        self._vectors = None if vectors is None else np.ascontiguousarray(vectors, dtype=np.float32)
        self._alive = np.ones(len(self.ids), dtype=bool)

    def _reserve(self, need: int) -> None:
        capacity = self._codes.shape[0]
        if need <= capacity:
            return
        grown = max(need, 2 * capacity, 64)
        codes = np.zeros((grown, self.tables), dtype=np.uint64)
        codes[: self.used] = self._codes[: self.used]
        self._codes = codes
        packed = np.zeros((grown, self.words), dtype=np.uint64)
        packed[: self.used] = self._packed[: self.used]
        self._packed = packed
        alive = np.zeros(grown, dtype=bool)
        alive[: self.used] = self._alive[: self.used]
        self._alive = alive
        if self._vectors is not None:
            vectors = np.zeros((grown, self.dim), dtype=np.float32)
            vectors[: self.used] = self._vectors[: self.used]
            self._vectors = vectors
