"""Scoring candidates and picking the best ``k`` of each query.

Two scorers, chosen once from the config (``rerank``):

- :class:`CosineScorer`: exact cosine similarity with the stored normalised vectors;
  ``score = raw = cosine``.
- :class:`HammingScorer`: no vectors needed. ``raw`` is the Hamming distance ``h`` between
  the full codes (all tables, ``B`` bits); ``score = cos(π·h/B)``, the SimHash estimate of
  the cosine (a bit differs with probability ``θ/π``), so scores stay "higher is better"
  and within ``[-1, 1]`` like the reranked ones.

:func:`best_k` works on blocks of queries at once: their candidate lists are padded into
a ``(queries, width)`` matrix, scored in one call (a batched dot product for the cosine),
and each row's best ``k + 1`` are selected with one partition of packed integer keys
(the score's order bits and the column). Only rows with equal scores among their first
``k + 1`` are finished in Python, by score then id, so ranks never depend on slot
numbers. Every score is computed by the same numpy kernel whatever the block, so a
query gets bit-identical scores alone or in a batch.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from itertools import repeat
from typing import Callable, Sequence, cast

import numpy as np

from memcore.plugin import Hit

from .candidates import CandidateLists
from .hashing import popcount
from .rows import Slots

__all__ = ["Scorer", "CosineScorer", "HammingScorer", "best_k", "ROW_BLOCK"]

ROW_BLOCK = 4096
"""Candidates scored at once (queries x padded width): the gathered vectors stay in cache."""

_WORST = np.uint32(0xFFFFFFFF)
"""Order key of a padding cell: after every real candidate."""


class Scorer(ABC):
    """Scores padded blocks of candidates."""

    #: human-readable name of the score
    name: str

    @abstractmethod
    def block(self, slots: np.ndarray, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(order, scores, raw)`` of the ``(q, width)`` candidate ``slots`` of ``q`` queries.

        ``order`` is uint32, smaller = better, equal exactly when the scores are equal;
        ``vectors`` / ``packed`` are the queries' normalised vectors and packed codes.
        """


class CosineScorer(Scorer):
    """Exact cosine similarity with the stored vectors."""

    name = "cosine similarity"

    def __init__(self, rows: Slots):
        self.rows = rows

    def block(self, slots: np.ndarray, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        stored = self.rows.vectors
        if stored is None:  # (the config refuses rerank without store_vectors)
            raise ValueError("cosine scoring needs the stored vectors (store_vectors = true)")
        q, width = slots.shape
        scores = np.empty((q, width), dtype=np.float32)
        # einsum, not BLAS: single-threaded, steady on a busy machine, and the same kernel (a
        # contiguous dot product per cell) for any block shape, so the scores never depend
        # on the batch; one query with a very long list is scored in column pieces
        step = width if q > 1 else max(1, ROW_BLOCK)
        for lo in range(0, width, step):
            hi = min(width, lo + step)
            np.einsum("qcd,qd->qc", stored.take(slots[:, lo:hi], axis=0), vectors, out=scores[:, lo:hi])
        scores += np.float32(0.0)  # -0.0 -> +0.0: equal scores get equal order keys
        bits = scores.view(np.uint32)
        ascending = np.where(bits >= np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
        return ~ascending, scores, scores


class HammingScorer(Scorer):
    """SimHash cosine estimate ``cos(π·h/B)`` from the full-code Hamming distance ``h``."""

    name = "SimHash cosine estimate cos(pi*hamming/bits)"

    def __init__(self, rows: Slots, total_bits: int):
        self.rows = rows
        self.total_bits = total_bits

    def block(self, slots: np.ndarray, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, width = slots.shape
        codes = self.rows.packed.take(slots, axis=0)  # (q, width, words)
        codes ^= packed[:, None, :]
        counts = popcount(codes)
        distance = counts[:, :, 0].astype(np.int64)
        for w in range(1, counts.shape[2]):
            distance += counts[:, :, w]
        return distance.astype(np.uint32), np.cos(distance * (math.pi / self.total_bits)), distance


def best_k(
    scorer: Scorer,
    lists: CandidateLists,
    vectors: np.ndarray,
    packed: np.ndarray,
    k: int,
    ids: Sequence[str | None],
    source: str,
) -> list[list[Hit]]:
    """The best ``k`` hits of each query of ``lists``, best first, equal scores ordered by id.

    ``vectors`` / ``packed`` are the normalised vectors and packed codes of the queries of
    ``lists``; ``ids`` maps slots to ids; ``source`` is the hits' source (the index name).
    """
    n = len(lists)
    if n == 1:  # a single search: fewer numpy calls, the same results
        return [_best_k_one(scorer, lists.slots, vectors, packed, k, ids, source)]
    out: list[list[Hit]] = [[] for _ in range(n)]
    sizes = lists.sizes()
    widest = int(sizes.max()) if n else 0
    if widest == 0:
        return out
    per_block = max(1, ROW_BLOCK // widest)
    for a in range(0, n, per_block):
        b = min(n, a + per_block)
        width = int(sizes[a:b].max())
        if width:
            _best_k_block(scorer, lists, sizes[a:b], a, width, vectors[a:b], packed[a:b], k, ids, source, out)
    return out


def _best_k_block(
    scorer: Scorer,
    lists: CandidateLists,
    sizes: np.ndarray,
    a: int,
    width: int,
    vectors: np.ndarray,
    packed: np.ndarray,
    k: int,
    ids: Sequence[str | None],
    source: str,
    out: list[list[Hit]],
) -> None:
    """Rank queries ``a .. a + len(sizes)`` of ``lists`` (at most ``width`` candidates each) into ``out``."""
    q = sizes.size
    lo, hi = int(lists.bounds[a]), int(lists.bounds[a + q])
    uniform = hi - lo == q * width  # every list has `width` candidates (the usual case with a cap): no padding
    if uniform:
        slots = lists.slots[lo:hi].reshape(q, width)
    else:
        columns = np.arange(width, dtype=np.int64)
        valid = columns < sizes[:, None]
        slots = lists.slots.take(np.where(valid, lists.bounds[a : a + q, None] + columns, lo))
    order, scores, raw = scorer.block(slots, vectors, packed)
    if not uniform:
        order[~valid] = _WORST
    keys = (order.astype(np.uint64) << np.uint64(32)) | np.arange(width, dtype=np.uint64)
    m = min(k + 1, width)  # the best k and the next one, to see a tie at the cut
    if width > m:
        keys = np.partition(keys, m - 1, axis=1)[:, :m]
    keys.sort(axis=1)
    top_order = keys >> np.uint64(32)
    count = np.minimum(sizes, m)  # real candidates among the m
    tied = ((top_order[:, 1:] == top_order[:, :-1]) & (np.arange(1, m) < count[:, None])).any(axis=1)
    top = (keys & np.uint64(0xFFFFFFFF)).astype(np.intp)
    take = np.minimum(sizes, k)
    if tied.any() or not uniform or width < k:
        take[tied] = 0
        rows = np.arange(q).repeat(take)
        cols = top[rows, _ranks(take)]
    else:  # k hits for every query
        rows = np.arange(q).repeat(k)
        cols = top[:, :k].reshape(-1)
    # one conversion and one constructor call per hit, in flat lists cut per query
    id_of = cast("Callable[[int], str]", ids.__getitem__)  # candidates are live slots: their ids are set
    hits = list(map(Hit, map(id_of, slots[rows, cols].tolist()), scores[rows, cols].tolist(), raw[rows, cols].tolist(), repeat(source)))
    start = 0
    for r, end in enumerate(take.cumsum().tolist()):
        out[a + r] = hits[start:end]
        start = end
    for r in np.flatnonzero(tied).tolist():
        size = int(sizes[r])
        best = _by_id(slots[r, :size], order[r, :size], scores[r, :size], raw[r, :size], k, ids)
        out[a + r] = [Hit(rid, score, r_, source) for rid, score, r_ in best]


def _best_k_one(scorer: Scorer, slots: np.ndarray, vectors: np.ndarray, packed: np.ndarray, k: int, ids: Sequence[str | None], source: str) -> list[Hit]:
    """:func:`_best_k_block` for one query (its candidates are one unpadded row)."""
    width = slots.size
    if width == 0:
        return []
    order, scores, raw = scorer.block(slots.reshape(1, width), vectors, packed)
    order, scores, raw = order[0], scores[0], raw[0]
    keys = (order.astype(np.uint64) << np.uint64(32)) | np.arange(width, dtype=np.uint64)
    m = min(k + 1, width)
    if width > m:
        keys = np.partition(keys, m - 1)[:m]
    keys.sort()
    top = keys.tolist()
    if any((a >> 32) == (b >> 32) for a, b in zip(top, top[1:])):
        return [Hit(rid, score, r, source) for rid, score, r in _by_id(slots, order, scores, raw, k, ids)]
    cols = (keys[:k] & np.uint64(0xFFFFFFFF)).astype(np.intp)
    id_of = cast("Callable[[int], str]", ids.__getitem__)  # candidates are live slots: their ids are set
    return list(map(Hit, map(id_of, slots.take(cols).tolist()), scores.take(cols).tolist(), raw.take(cols).tolist(), repeat(source)))


def _ranks(counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(c) for c in counts])`` without a Python loop."""
    total = int(counts.sum())
    firsts = np.repeat(counts.cumsum() - counts, counts)
    ranks: np.ndarray = np.arange(total, dtype=np.int64) - firsts
    return ranks


def _by_id(slots: np.ndarray, order: np.ndarray, scores: np.ndarray, raw: np.ndarray, k: int, ids: Sequence[str | None]) -> list[tuple[str, float, float]]:
    """The best ``k`` of one query, every score tied with the k-th included before the id tie-break."""
    if k < order.size:
        kth = np.partition(order, k - 1)[k - 1]
        part = np.flatnonzero(order <= kth)
    else:
        part = np.arange(order.size)
    rows = sorted(zip(order[part].tolist(), [ids[s] for s in slots[part].tolist()], scores[part].tolist(), raw[part].tolist()))[:k]
    return [(rid, s, r) for _, rid, s, r in rows]
