"""Late-interaction scoring, vectorised with numpy: exact MaxSim and the PLAID stages.

Passages are *slots* of a flat token layout: slot ``s`` owns token rows
``offsets[s] : offsets[s] + doclens[s]``. A query is a ``(nq, dim)`` matrix of unit
token vectors; a passage's MaxSim score is ``sum_q max_t <q, d_t>``.

PLAID (Santhanam et al., 2022) as ColBERT implements it:

1. candidate generation: the ``ncells`` best centroids of each query token, their
   inverted lists -> candidate passages;
2. pruned centroid interaction: each token is approximated by its centroid, centroids
   whose best score over the query tokens is below ``centroid_score_threshold`` are
   dropped; keep the best ``ndocs`` passages;
3. full centroid interaction (no pruning) on those; keep the best ``ndocs / 4``;
4. exact MaxSim on the decompressed residuals; the best ``k``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["token_rows", "maxsim", "centroid_scores", "top", "candidates"]

_MAX_GATHER = 1 << 18  # token rows scored per chunk (bounds the (tokens, nq) temporaries)


def token_rows(slots: np.ndarray, offsets: np.ndarray, doclens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indexes of the tokens of ``slots`` (in slot order) and each slot's first position in them."""
    lens = doclens[slots].astype(np.int64)
    starts = np.cumsum(lens) - lens
    rows = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts - offsets[slots], lens)
    return rows, starts


def _segment_max_sum(sim: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per segment (starting at ``starts``) the max over its rows of each column, summed."""
    sums: np.ndarray = np.maximum.reduceat(sim, starts, axis=0).sum(axis=1)
    return sums


def _chunks(slots: np.ndarray, doclens: np.ndarray) -> list[slice]:
    """Consecutive groups of ``slots`` holding at most about _MAX_GATHER tokens each."""
    if len(slots) == 0:
        return []
    cum = np.cumsum(doclens[slots].astype(np.int64))
    bounds = np.searchsorted(cum, np.arange(_MAX_GATHER, int(cum[-1]) + _MAX_GATHER, _MAX_GATHER), side="right")
    out, start = [], 0
    for end in np.unique(np.clip(bounds, 1, len(slots))):
        if end > start:
            out.append(slice(start, int(end)))
            start = int(end)
    if start < len(slots):
        out.append(slice(start, len(slots)))
    return out


def maxsim(q: np.ndarray, slots: np.ndarray, offsets: np.ndarray, doclens: np.ndarray, fetch: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Exact MaxSim of query ``q`` against ``slots``; ``fetch(rows)`` returns those token vectors."""
    scores = np.empty(len(slots), dtype=np.float32)
    for part in _chunks(slots, doclens):
        rows, starts = token_rows(slots[part], offsets, doclens)
        scores[part] = _segment_max_sum(fetch(rows) @ q.T, starts)
    return scores


def centroid_scores(s_t: np.ndarray, slots: np.ndarray, offsets: np.ndarray, doclens: np.ndarray, codes: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """Approximate MaxSim with each token replaced by its centroid's scores ``s_t[code]``
    (``s_t``: ``(C, nq)``). With ``keep`` (a ``(C,)`` mask), tokens of other centroids are
    dropped; a passage left without tokens scores 0."""
    scores = np.zeros(len(slots), dtype=np.float32)
    for part in _chunks(slots, doclens):
        rows, starts = token_rows(slots[part], offsets, doclens)
        token_codes = np.take(codes, rows)
        if keep is None:
            scores[part] = _segment_max_sum(np.take(s_t, token_codes, axis=0), starts)
            continue
        position = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rows))))
        kept = keep[token_codes]
        if not kept.any():
            continue
        position = position[kept]
        first = np.flatnonzero(np.r_[True, position[1:] != position[:-1]])
        scores[part][position[first]] = _segment_max_sum(np.take(s_t, token_codes[kept], axis=0), first)
    return scores


def top(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` best scores, best first (ties: lower position first)."""
    if n <= 0 or len(scores) == 0:
        return np.empty(0, dtype=np.int64)
    if n < len(scores):
        part = np.argpartition(-scores, n - 1)[:n]
    else:
        part = np.arange(len(scores))
    return part[np.lexsort((part, -scores[part]))]


def candidates(s: np.ndarray, ncells: int, ivf_offsets: np.ndarray, ivf_slots: np.ndarray) -> np.ndarray:
    """Stage 1: the passages in the inverted lists of each query token's ``ncells`` best centroids."""
    ncells = min(ncells, s.shape[1])
    if ncells < s.shape[1]:
        cells = np.unique(np.argpartition(-s, ncells - 1, axis=1)[:, :ncells])
    else:
        cells = np.arange(s.shape[1])
    lo, hi = ivf_offsets[cells], ivf_offsets[cells + 1]
    lens = hi - lo
    if lens.sum() == 0:
        return np.empty(0, dtype=np.int64)
    rows, _ = token_rows(np.arange(len(cells)), lo, lens)
    return np.unique(ivf_slots[rows])
