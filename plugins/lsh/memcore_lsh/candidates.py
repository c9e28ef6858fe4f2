"""Candidate generation: the union of a query's probed buckets over all tables.

Works on a chunk of queries at once, without a Python loop over queries: the bucket
entries of every query are gathered, de-duplicated per query (one sort of
``query * slots + slot`` keys), filtered by the ``allowed`` mask and, with a
``max_candidates`` cap, reduced to the candidates nearest the query by full-code Hamming
distance (ties to the lower slot, so the choice is deterministic and survives save/load).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .hashing import popcount
from .tables import BucketTables

__all__ = ["CandidateLists", "bucket_candidates", "single_list", "GATHER_LIMIT"]

GATHER_LIMIT = 1 << 16
"""Bucket entries gathered at once (a chunk of queries): small enough to stay in cache."""


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
        return np.repeat(np.arange(len(self), dtype=np.int64), self.sizes())


def single_list(slots: np.ndarray) -> CandidateLists:
    """The candidate lists of one query."""
    return CandidateLists(np.array([0, slots.size], dtype=np.int64), slots)


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
    slot, ``used`` the number of slots, ``mask`` the allowed slots (or None).
    """
    starts, counts = tables.bucket_ranges(keys)
    per_query = counts.sum(axis=1)
    n_queries = per_query.size
    first = 0
    while first < n_queries:
        last = first + 1  # at least one query per chunk, however large its buckets
        total = int(per_query[first])
        while last < n_queries and total + per_query[last] <= GATHER_LIMIT:
            total += int(per_query[last])
            last += 1
        raw = tables.gather(starts[first:last], counts[first:last])
        owner = np.repeat(np.arange(last - first, dtype=np.int64), per_query[first:last])
        owner, slots = np.divmod(_distinct(owner * used + raw), used)  # by (query, slot)
        if mask is not None:
            keep = mask[slots]
            owner, slots = owner[keep], slots[keep]
        if cap is not None:
            owner, slots = _nearest(owner, slots, query_packed[first:last], stored_packed, cap, last - first)
        bounds = np.searchsorted(owner, np.arange(last - first + 1, dtype=np.int64))
        yield first, CandidateLists(bounds, slots)
        first = last


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, faster than numpy.unique's hashing on these sizes)."""
    values = np.sort(values)
    if values.size > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


def _nearest(owner: np.ndarray, slots: np.ndarray, query_packed: np.ndarray, stored_packed: np.ndarray, cap: int, n: int):
    """Keep, per query, the ``cap`` slots nearest by Hamming distance (ties: lower slot).

    No sort: a histogram of distances per query gives the distance ``d*`` of the
    ``cap``-th nearest; all nearer slots are kept, and the lowest slots at ``d*`` fill up.
    """
    sizes = np.bincount(owner, minlength=n)
    if (sizes <= cap).all():
        return owner, slots
    codes = stored_packed[slots] ^ query_packed[owner]
    distance = popcount(codes[:, 0]).astype(np.int64)
    for w in range(1, codes.shape[1]):
        distance += popcount(codes[:, w])
    if n == 1:  # one query (a single search): a partition is cheaper than the histogram
        order = distance * (int(slots[-1]) + 1) + slots  # distinct, by (distance, slot)
        chosen = np.sort(np.argpartition(order, cap - 1)[:cap])
        return owner[chosen], slots[chosen]
    width = int(distance.max()) + 1
    histogram = np.bincount(owner * width + distance, minlength=n * width).reshape(n, width)
    cumulative = np.cumsum(histogram, axis=1)
    cut = np.argmax(cumulative >= cap, axis=1)  # distance of the cap-th nearest (0 when fewer than cap)
    cut[sizes <= cap] = width  # keep everything
    below = np.where(cut > 0, cumulative[np.arange(n), np.maximum(cut - 1, 0)], 0)
    need = cap - below  # slots to take at distance == cut
    d_cut = cut[owner]
    keep = distance < d_cut
    at_cut = distance == d_cut
    before = np.concatenate(([0], np.cumsum(at_cut)))  # entries at the cut before each position
    first = np.concatenate(([0], np.cumsum(sizes)))[:-1]  # each query's first position
    rank = before[:-1] - before[first][owner]  # ... counted within the query (its entries are by slot)
    keep |= at_cut & (rank < need[owner])
    return owner[keep], slots[keep]
