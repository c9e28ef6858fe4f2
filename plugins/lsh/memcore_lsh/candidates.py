"""Candidate generation: the union of a query's probed buckets over all tables.

Works on a chunk of queries at once, without a Python loop over queries or candidates:
the bucket entries of every query are gathered, filtered by the ``allowed`` mask and
de-duplicated per query with one sort of packed integer keys. Without a cap the key is
``(query, slot)``. With a ``max_candidates`` cap it is ``(query, distance, slot)``, the
distance being the full-code Hamming distance to the query: after the same one sort each
query's entries run nearest first, ties to the lower slot, and its first ``cap`` distinct
entries are the ones kept (deterministic, and unchanged by save/load, which keep slot
order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .hashing import popcount
from .tables import BucketTables

__all__ = ["CandidateLists", "bucket_candidates", "single_list", "hamming", "GATHER_LIMIT"]

GATHER_LIMIT = 1 << 16
"""Bucket entries gathered at once (a chunk of queries): small enough to stay in cache."""

_KEY_BITS = 63
"""Bits of a packed sort key (int64, non-negative)."""


@dataclass
class CandidateLists:
    """Candidate slots of a chunk of queries: ``slots[bounds[j]:bounds[j + 1]]`` (ascending) are query ``j``'s."""

    bounds: np.ndarray
    slots: np.ndarray

    def __len__(self) -> int:
        return self.bounds.size - 1

    def sizes(self) -> np.ndarray:
        """Number of candidates of each query."""
        return np.diff(self.bounds)

    def owners(self) -> np.ndarray:
        """For every candidate, the index of its query in the chunk."""
        return np.arange(len(self), dtype=np.int64).repeat(self.sizes())


def single_list(slots: np.ndarray) -> CandidateLists:
    """The candidate lists of one query."""
    return CandidateLists(np.array([0, slots.size], dtype=np.int64), slots)


def hamming(stored_packed: np.ndarray, slots: np.ndarray, query_packed: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Full-code Hamming distance (int64) between each slot and the query that owns it.

    ``numpy.take`` rows (much faster than fancy indexing of 2-d arrays) and one add per
    64-bit word (a reduction over a short last axis is slow in numpy).
    """
    codes = stored_packed.take(slots, axis=0)
    codes ^= query_packed.take(owner, axis=0)
    counts = popcount(codes)
    distance = counts[:, 0].astype(np.int64)
    for w in range(1, counts.shape[1]):
        distance += counts[:, w]
    return distance


def bucket_candidates(
    tables: BucketTables,
    keys: np.ndarray,
    query_packed: np.ndarray,
    stored_packed: np.ndarray,
    used: int,
    mask: np.ndarray | None,
    cap: int | None,
) -> Iterator[tuple[int, CandidateLists]]:
    """Yield ``(first query, lists)`` chunk by chunk for the probe ``keys`` ``(q, tables, p)``.

    ``query_packed`` are the queries' packed full codes, ``stored_packed`` those of every
    slot, ``used`` the number of slots, ``mask`` the allowed slots (or None), ``cap`` the
    most candidates kept per query (the nearest by full-code Hamming distance) or None.
    """
    starts, counts = tables.bucket_ranges(keys)
    per_query = counts.sum(axis=1)
    n_queries = per_query.size
    slot_bits = max(1, int(used).bit_length())
    distance_bits = 0 if cap is None else int(stored_packed.shape[1] * 64).bit_length()
    owner_bits = _KEY_BITS - slot_bits - distance_bits
    if owner_bits < 1:  # pragma: no cover - more than 2**50 slots
        raise ValueError(f"lsh: {used} slots do not fit a sort key")
    most = 1 << owner_bits  # queries per chunk, so that the owner fits its key field
    ends = per_query.cumsum()
    first = 0
    limit = GATHER_LIMIT
    while first < n_queries:
        before = int(ends[first - 1]) if first else 0
        # as many queries as fit the limit, at least one however large its buckets
        last = max(first + 1, int(ends.searchsorted(before + limit, side="right")))
        last = min(last, first + most, n_queries)
        yield (
            first,
            _chunk(
                tables,
                starts[first:last],
                counts[first:last],
                per_query[first:last],
                query_packed[first:last],
                stored_packed,
                slot_bits,
                distance_bits,
                mask,
                cap,
            ),
        )
        first = last


def _chunk(
    tables: BucketTables,
    starts: np.ndarray,
    counts: np.ndarray,
    per_query: np.ndarray,
    query_packed: np.ndarray,
    stored_packed: np.ndarray,
    slot_bits: int,
    distance_bits: int,
    mask: np.ndarray | None,
    cap: int | None,
) -> CandidateLists:
    n = per_query.size
    slots = tables.gather(starts, counts)
    owner = np.arange(n, dtype=np.int64).repeat(per_query)
    if mask is not None:
        keep = np.flatnonzero(mask[slots])
        owner, slots = owner.take(keep), slots.take(keep)
    if cap is None:
        key = _distinct((owner << slot_bits) | slots)
        owner = key >> slot_bits
        slots = key & ((1 << slot_bits) - 1)
    else:
        key = (hamming(stored_packed, slots, query_packed, owner) << slot_bits) | slots
        key = _distinct(key | (owner << (slot_bits + distance_bits)))  # by query, distance, slot
        owner = key >> (slot_bits + distance_bits)
        first = owner.searchsorted(np.arange(n, dtype=np.int64))
        rank = np.arange(key.size, dtype=np.int64) - first.take(owner)
        if rank.size and int(rank.max()) >= cap:
            keep = np.flatnonzero(rank < cap)
            key, owner = key.take(keep), owner.take(keep)
        # back to (query, slot) order: the lists are ascending by slot
        key = np.sort((owner << slot_bits) | (key & ((1 << slot_bits) - 1)))
        owner = key >> slot_bits
        slots = key & ((1 << slot_bits) - 1)
    bounds = owner.searchsorted(np.arange(n + 1, dtype=np.int64))
    return CandidateLists(bounds, slots)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, faster than numpy.unique's hashing on these sizes)."""
    values = np.sort(values)
    if values.size > 1:
        new = np.empty(values.size, dtype=bool)
        new[0] = True
        np.not_equal(values[1:], values[:-1], out=new[1:])
        values = values.take(np.flatnonzero(new))  # (faster than a boolean mask)
    return values


def _nearest(owner: np.ndarray, slots: np.ndarray, query_packed: np.ndarray, stored_packed: np.ndarray, cap: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep, per query, the ``cap`` slots nearest by Hamming distance (ties: lower slot).

    ``owner``/``slots`` are distinct pairs sorted by (owner, slot); so is the result. The
    reference of the cut :func:`bucket_candidates` applies (with one sort for both the
    de-duplication and the cut).
    """
    if owner.size == 0:
        return owner, slots
    slot_bits = max(1, int(slots.max()).bit_length())
    distance_bits = int(stored_packed.shape[1] * 64).bit_length()
    key = (hamming(stored_packed, slots, query_packed, owner) << slot_bits) | slots
    key = np.sort(key | (owner << (slot_bits + distance_bits)))
    by_owner = key >> (slot_bits + distance_bits)
    first = by_owner.searchsorted(np.arange(n, dtype=np.int64))
    keep = np.arange(key.size, dtype=np.int64) - first[by_owner] < cap
    key = np.sort((by_owner[keep] << slot_bits) | (key[keep] & ((1 << slot_bits) - 1)))
    return key >> slot_bits, key & ((1 << slot_bits) - 1)
