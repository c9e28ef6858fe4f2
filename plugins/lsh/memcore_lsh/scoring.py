"""Scoring candidates and picking the best ``k`` of each query.

Two scorers, chosen once from the config (``rerank``):

- :class:`CosineScorer`: exact cosine similarity with the stored normalised vectors;
  ``score = raw = cosine``.
- :class:`HammingScorer`: no vectors needed. ``raw`` is the Hamming distance ``h`` between
  the full codes (all tables, ``B`` bits); ``score = cos(π·h/B)``, the SimHash estimate of
  the cosine (a bit differs with probability ``θ/π``), so scores stay "higher is better"
  and within ``[-1, 1]`` like the reranked ones.

:func:`best_k` ranks every query of a chunk at once and breaks ties by id.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from .candidates import CandidateLists
from .hashing import popcount
from .rows import Slots

__all__ = ["Scorer", "CosineScorer", "HammingScorer", "best_k"]


class Scorer(ABC):
    """Scores candidate lists."""

    #: human-readable name of the score
    name: str

    @abstractmethod
    def score(self, lists: CandidateLists, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, raw)`` aligned with ``lists.slots``; ``vectors``/``packed`` codes are the chunk's queries'."""


class CosineScorer(Scorer):
    """Exact cosine similarity with the stored vectors."""

    name = "cosine similarity"

    def __init__(self, rows: Slots):
        self.rows = rows

    def score(self, lists: CandidateLists, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stored = self.rows.vectors
        scores = np.empty(lists.slots.size, dtype=np.float32)
        bounds = lists.bounds.tolist()
        for j in range(len(lists)):
            lo, hi = bounds[j], bounds[j + 1]
            if hi > lo:
                # einsum, not BLAS: single-threaded and steady for these small gathers (OpenBLAS'
                # threaded gemv is erratic on a busy machine), and the same for any batch size
                np.einsum("ij,j->i", stored[lists.slots[lo:hi]], vectors[j], out=scores[lo:hi])
        return scores, scores


class HammingScorer(Scorer):
    """SimHash cosine estimate ``cos(π·h/B)`` from the full-code Hamming distance ``h``."""

    name = "SimHash cosine estimate cos(pi*hamming/bits)"

    def __init__(self, rows: Slots, total_bits: int):
        self.rows = rows
        self.total_bits = total_bits

    def score(self, lists: CandidateLists, vectors: np.ndarray, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distance = popcount(self.rows.packed[lists.slots] ^ packed[lists.owners()]).sum(axis=1, dtype=np.int64)
        return np.cos(distance * (math.pi / self.total_bits)), distance


def best_k(lists: CandidateLists, scores: np.ndarray, raw: np.ndarray, k: int, ids: Sequence[str | None]) -> list[list[tuple[str, float, float]]]:
    """The best ``k`` ``(id, score, raw)`` of each query, best first, equal scores ordered by id.

    One sort for the whole chunk; only queries with equal scores among their first ``k + 1``
    are re-sorted in Python (by score, then id), so ranks never depend on slot numbers.
    """
    n = len(lists)
    if scores.size == 0:
        return [[] for _ in range(n)]
    owner = lists.owners()
    order = np.lexsort((-scores, owner))  # by query, then best score first
    owner_sorted = owner[order]
    rank = np.arange(order.size, dtype=np.int64) - lists.bounds[owner_sorted]
    ranked = scores[order]
    tied = (ranked[1:] == ranked[:-1]) & (owner_sorted[1:] == owner_sorted[:-1]) & (rank[1:] <= k)
    tied_queries = set(owner_sorted[1:][tied].tolist())
    top = order[rank < k]
    top_owner = owner[top].tolist()
    top_ids = [ids[s] for s in lists.slots[top].tolist()]
    top_scores = scores[top].tolist()
    top_raw = raw[top].tolist()
    out: list[list[tuple[str, float, float]]] = [[] for _ in range(n)]
    for j, rid, s, r in zip(top_owner, top_ids, top_scores, top_raw):
        out[j].append((rid, s, r))
    for j in tied_queries:
        lo, hi = int(lists.bounds[j]), int(lists.bounds[j + 1])
        out[j] = _best_k_by_id(lists.slots[lo:hi], scores[lo:hi], raw[lo:hi], k, ids)
    return out


def _best_k_by_id(slots: np.ndarray, scores: np.ndarray, raw: np.ndarray, k: int, ids: Sequence[str | None]) -> list[tuple[str, float, float]]:
    """The best ``k`` of one query, every score tied with the k-th included before the id tie-break."""
    if k < scores.size:
        kth = np.partition(scores, scores.size - k)[scores.size - k]
        part = np.flatnonzero(scores >= kth)
    else:
        part = np.arange(scores.size)
    rows = sorted(zip((-scores[part]).tolist(), [ids[s] for s in slots[part].tolist()], raw[part].tolist()))[:k]
    return [(rid, -neg, r) for neg, rid, r in rows]
