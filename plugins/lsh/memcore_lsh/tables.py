"""Hash tables as numpy arrays: every table lists the held slots grouped by bucket.

Table ``t`` is one row of the ``(tables, n)`` int32 matrix ``slots``, ordered by code
(every held slot appears exactly once per table); a bucket is a run of that row. Two
directories say where each run lies, chosen by :func:`make_tables` from ``bits``:

- :class:`DirectTables` (``bits <= 16``): an offset array of ``2**bits + 1`` entries per
  table, so finding a bucket is a plain array lookup;
- :class:`SortedTables` (wider codes): the sorted codes themselves, searched with
  ``numpy.searchsorted``.

Lookups are vectorised over queries, tables and probes; adding or removing a batch is one
sorted merge / one compress per table (``O(n)`` memory moves, no Python loop over records).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

__all__ = ["BucketTables", "DirectTables", "SortedTables", "make_tables", "DIRECT_MAX_BITS", "SLOT_DTYPE"]

SLOT_DTYPE = np.int32
"""Slot numbers in the tables (and bucket offsets): half the memory and cache footprint of
int64, which the random reads of a lookup feel; an index holds fewer than 2**31 records."""

DIRECT_MAX_BITS = 16
"""Widest code that gets a direct-address directory (``2**16 + 1`` offsets per table)."""


def make_tables(tables: int, bits: int) -> "BucketTables":
    """The bucket tables suited to ``bits``-bit codes."""
    return DirectTables(tables, bits) if bits <= DIRECT_MAX_BITS else SortedTables(tables, bits)


class BucketTables(ABC):
    """``tables`` rows of slots grouped by code, with vectorised bucket lookup."""

    def __init__(self, tables: int, bits: int):
        self.tables = tables
        self.bits = bits
        self.slots = np.zeros((tables, 0), dtype=SLOT_DTYPE)

    def __len__(self) -> int:
        return self.slots.shape[1]

    # -- the directory (subclasses) --------------------------------------------------------

    @abstractmethod
    def _runs(self, t: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)`` positions in row ``t`` of the buckets of ``keys`` (any shape)."""

    @abstractmethod
    def _index(self, sorted_keys: list[np.ndarray]) -> None:
        """Build the directory from each table's codes in row order."""

    @abstractmethod
    def _indexed_insert(self, t: int, sorted_keys: np.ndarray, at: np.ndarray) -> None:
        """Update the directory of table ``t`` for ``sorted_keys`` inserted at positions ``at``."""

    @abstractmethod
    def _indexed_delete(self, t: int, keys: np.ndarray, keep: np.ndarray) -> None:
        """Update the directory of table ``t`` for the removal of ``keys`` (row entries where not ``keep``)."""

    @abstractmethod
    def bucket_sizes(self) -> list[np.ndarray]:
        """The size of every non-empty bucket, per table."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Memory held by the tables and their directory."""

    # -- building --------------------------------------------------------------------------

    def rebuild(self, slots: np.ndarray, codes: np.ndarray) -> None:
        """Replace the contents by ``slots`` with their ``(n, tables)`` codes."""
        slots = _slot_array(slots)
        rows = np.empty((self.tables, slots.size), dtype=SLOT_DTYPE)
        sorted_keys = []
        for t in range(self.tables):
            order = np.argsort(codes[:, t], kind="stable")
            rows[t] = slots[order]
            sorted_keys.append(codes[order, t])
        self.slots = rows
        self._index(sorted_keys)

    def insert(self, slots: np.ndarray, codes: np.ndarray) -> None:
        """Add new ``slots`` (not held yet) with their ``(m, tables)`` codes, each at the end of its bucket."""
        slots = _slot_array(slots)
        if slots.size == 0:
            return
        rows = np.empty((self.tables, len(self) + slots.size), dtype=SLOT_DTYPE)
        for t in range(self.tables):
            order = np.argsort(codes[:, t], kind="stable")
            keys = codes[order, t]
            _, at = self._runs(t, keys)
            rows[t] = np.insert(self.slots[t], at, slots[order])
            self._indexed_insert(t, keys, at)
        self.slots = rows

    def delete(self, slots: np.ndarray, codes: np.ndarray) -> None:
        """Remove held ``slots`` whose ``(m, tables)`` codes are given."""
        slots = _slot_array(slots)
        if slots.size == 0:
            return
        remaining = len(self) - slots.size
        rows = np.empty((self.tables, remaining), dtype=SLOT_DTYPE)
        for t in range(self.tables):
            start, end = self._runs(t, codes[:, t])
            positions = _ranges(start, end - start)
            positions = positions[np.isin(self.slots[t, positions], slots)]
            keep = np.ones(len(self), dtype=bool)
            keep[positions] = False
            if int(keep.sum()) != remaining:
                raise RuntimeError("lsh tables out of step with the held slots")  # a bug, never bad input
            self._indexed_delete(t, codes[:, t], keep)
            rows[t] = self.slots[t, keep]
        self.slots = rows

    def renumber(self, mapping: np.ndarray) -> None:
        """Map every slot ``s`` to ``mapping[s]`` (an increasing map, so runs keep their order)."""
        self.slots = mapping[self.slots].astype(SLOT_DTYPE)

    # -- reading ---------------------------------------------------------------------------

    def bucket_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the buckets of ``keys`` ``(q, tables, p)`` lie in the flattened slot matrix.

        Returns ``(starts, counts)``, both ``(q, tables * p)`` int64.
        """
        q, tables, p = keys.shape
        n = len(self)
        starts = np.empty((q, tables, p), dtype=np.int64)
        counts = np.empty((q, tables, p), dtype=np.int64)
        for t in range(tables):
            start, end = self._runs(t, keys[:, t, :])
            starts[:, t, :] = start + t * n
            counts[:, t, :] = end - start
        return starts.reshape(q, -1), counts.reshape(q, -1)

    def gather(self, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The slots in the ranges ``(starts, counts)``, concatenated in order."""
        return self.slots.reshape(-1).take(_ranges(starts, counts))


class DirectTables(BucketTables):
    """Direct-address directory: ``offsets[t, c] .. offsets[t, c + 1]`` is the run of code ``c``."""

    def __init__(self, tables: int, bits: int):
        if bits > DIRECT_MAX_BITS:
            raise ValueError(f"direct tables take at most {DIRECT_MAX_BITS} bits, got {bits}")
        super().__init__(tables, bits)
        self.offsets = np.zeros((tables, (1 << bits) + 1), dtype=SLOT_DTYPE)

    def _runs(self, t: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = keys.astype(np.intp)
        offsets = self.offsets[t]
        return offsets[keys], offsets[keys + 1]

    def bucket_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # every table at once: row t of the offsets starts at t * (2**bits + 1) in the flat array
        q, tables, p = keys.shape
        width = self.offsets.shape[1]
        flat = keys.astype(np.intp) + (np.arange(tables, dtype=np.intp) * width)[None, :, None]
        offsets = self.offsets.reshape(-1)
        start, end = offsets[flat], offsets[flat + 1]
        starts = start + (np.arange(tables, dtype=np.int64) * len(self))[None, :, None]
        return starts.reshape(q, -1), (end - start).reshape(q, -1)

    def _counts(self, keys: np.ndarray) -> np.ndarray:
        return np.cumsum(np.bincount(keys.astype(np.intp), minlength=1 << self.bits))

    def _index(self, sorted_keys: list[np.ndarray]) -> None:
        for t, keys in enumerate(sorted_keys):
            self.offsets[t, 0] = 0
            self.offsets[t, 1:] = self._counts(keys)

    def _indexed_insert(self, t: int, sorted_keys: np.ndarray, at: np.ndarray) -> None:
        self.offsets[t, 1:] += self._counts(sorted_keys)

    def _indexed_delete(self, t: int, keys: np.ndarray, keep: np.ndarray) -> None:
        self.offsets[t, 1:] -= self._counts(keys)

    def bucket_sizes(self) -> list[np.ndarray]:
        sizes = np.diff(self.offsets, axis=1)
        return [row[row > 0] for row in sizes]

    @property
    def nbytes(self) -> int:
        return int(self.slots.nbytes + self.offsets.nbytes)


class SortedTables(BucketTables):
    """Sorted-code directory: ``keys[t]`` holds the code of each entry of row ``t``."""

    def __init__(self, tables: int, bits: int):
        super().__init__(tables, bits)
        self.keys = [np.zeros(0, dtype=np.uint64) for _ in range(tables)]

    def _runs(self, t: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row = self.keys[t]
        flat = keys.reshape(-1)
        if flat.size < 64:
            return row.searchsorted(keys, side="left"), row.searchsorted(keys, side="right")
        # sorted needles: numpy's binary search then starts from the previous answer, which
        # turns scattered cache misses over a large table into a forward sweep
        order = np.argsort(flat, kind="stable")
        needles = flat[order]
        start, end = np.empty(flat.size, dtype=np.int64), np.empty(flat.size, dtype=np.int64)
        start[order] = row.searchsorted(needles, side="left")
        end[order] = row.searchsorted(needles, side="right")
        return start.reshape(keys.shape), end.reshape(keys.shape)

    def _index(self, sorted_keys: list[np.ndarray]) -> None:
        self.keys = [np.asarray(keys, dtype=np.uint64) for keys in sorted_keys]

    def _indexed_insert(self, t: int, sorted_keys: np.ndarray, at: np.ndarray) -> None:
        self.keys[t] = np.insert(self.keys[t], at, sorted_keys)

    def _indexed_delete(self, t: int, keys: np.ndarray, keep: np.ndarray) -> None:
        self.keys[t] = self.keys[t][keep]

    def bucket_sizes(self) -> list[np.ndarray]:
        out = []
        for row in self.keys:
            if row.size == 0:
                out.append(np.zeros(0, dtype=np.int64))
                continue
            edges = np.flatnonzero(np.diff(row)) + 1
            out.append(np.diff(np.concatenate(([0], edges, [row.size]))))
        return out

    @property
    def nbytes(self) -> int:
        return int(self.slots.nbytes + sum(row.nbytes for row in self.keys))


def _slot_array(slots: np.ndarray) -> np.ndarray:
    """``slots`` as :data:`SLOT_DTYPE` (ValueError past its range, never a silent wrap)."""
    slots = np.asarray(slots)
    if slots.size and int(slots.max()) > np.iinfo(SLOT_DTYPE).max:
        raise ValueError(f"lsh tables hold at most {np.iinfo(SLOT_DTYPE).max + 1} slots")
    return slots.astype(SLOT_DTYPE, copy=False)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(start, start + count)`` for each pair, without a Python loop.

    The cumulative sum of steps: 1 inside a range, the jump to the next range's start at
    its first position (faster than ``repeat`` + ``arange`` for many short ranges).
    """
    starts = np.asarray(starts, dtype=np.int64).reshape(-1)
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    some = np.flatnonzero(counts > 0)  # (then take: faster than a boolean mask here)
    starts, counts = starts.take(some), counts.take(some)
    if counts.size == 0:
        return np.zeros(0, dtype=np.int64)
    ends = counts.cumsum()
    steps = np.ones(int(ends[-1]), dtype=np.int64)
    steps[0] = starts[0]
    steps[ends[:-1]] = starts[1:] - (starts[:-1] + counts[:-1] - 1)
    return steps.cumsum()
