"""The refine step of lossy indexes: candidates re-scored with the store's exact vectors.

A faiss index whose storage approximates the vectors (PQ codes, scalar quantizers, a PCA
or OPQ transform) ranks by estimated scores, and those estimates cap its recall however
many lists it visits. With ``refine_k_factor = f`` (> 0) the index asks faiss for
``k * f`` candidates and scores them exactly, against the vectors the store already keeps
(:class:`ExactVectors`), then keeps the best ``k``: hits are ranked by, and carry, the
exact score. faiss' own ``IndexRefineFlat`` would keep a second full copy of every vector
in the index file and in memory; here the index reads the store's memory-mapped vector
file in place, at the row of each label the index already keeps for filtered searches
(:class:`.rows.StoreRows`, saved as ``rows`` in ``idmap.npz``): one map, no second copy.

Where the store maps no file (another store) or a live label's row is not known (the store
does not hold the vector the index was given), its vector is read through
:meth:`memcore.plugin.VectorReader.read`; the rows of a save that did not keep them are
looked up in the store once (:meth:`.rows.StoreRows.backfill`, by the index before it
refines). Tombstones are never refined: a removed label's row may hold another record's
vector by now. An index without a store (built by hand, without ``IndexContext.vectors``)
has nothing to refine with and keeps faiss' estimates.

Row validity: a record's row changes only by a logged write, which the index sees as a
remove (and a new label) before it searches again, so the row of a live label stays right
for as long as the label lives -- the argument of the ``exact`` index over the same file.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable

import numpy as np

from memcore.plugin import VectorReader

from .scores import Scoring

__all__ = ["ExactVectors", "refine"]


class ExactVectors:
    """The exact vectors of labels as the store keeps them: from its mapped vector file at
    the labels' known rows, else read through the store."""

    def __init__(self, reader: VectorReader, space: str, dim: int):
        self.reader = reader
        self.space = space
        self.dim = dim
        self._file: np.ndarray | None = None  # the store's mapped matrix, fetched again when it grew

    def reset(self) -> None:
        """Forget the mapped matrix (after a load: the store's file may have been replaced)."""
        self._file = None

    def vectors(
        self, labels: np.ndarray, row_of: np.ndarray, mapped: Any, id_of: Callable[[int], str | None], dead: AbstractSet[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The stored vectors of ``labels`` (>= 0; as the store keeps them, not normalised)
        and a mask of those found. ``row_of``: the store row of each label
        (:attr:`.rows.StoreRows.row_of`; negative: none known); ``mapped``: the store's
        :class:`memcore.plugin.MappedSpace` or None. ``dead`` labels (tombstones) are never
        found; live labels without a mapped row are read through the store."""
        n = len(labels)
        if not n:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=bool)
        inside = labels < len(row_of)
        rows = row_of[np.where(inside, labels, 0)]
        if not inside.all():
            rows = np.where(inside, rows, -1)
        file = self._file
        lo, hi = int(rows.min()), int(rows.max())
        if mapped is not None and hi >= 0 and (file is None or hi >= len(file)):
            file = self._file = mapped.matrix()
        if file is not None and lo >= 0 and hi < len(file):  # the usual case: every row mapped
            out: np.ndarray = np.take(file, rows, axis=0)
            found = np.ones(n, dtype=bool)
        else:
            out = np.zeros((n, self.dim), dtype=np.float32)
            found = np.zeros(n, dtype=bool)
            if file is not None:
                have = np.flatnonzero((rows >= 0) & (rows < len(file)))
                out[have] = np.take(file, rows[have], axis=0)
                found[have] = True
        if dead:  # tombstones (HNSW over SQ...): one look-up per candidate, not per tombstone
            found &= np.fromiter((label not in dead for label in labels.tolist()), dtype=bool, count=n)
        if not found.all():  # no mapped row: read through the store
            rest = [(i, rid) for i in np.flatnonzero(~found).tolist() if int(labels[i]) not in dead and (rid := id_of(int(labels[i]))) is not None]
            if rest:
                matrix, present = self.reader.read([rid for _, rid in rest], self.space, self.dim)
                at = np.asarray([i for i, _ in rest], dtype=np.int64)
                out[at] = matrix
                found[at] = present
        return out, found


def refine(
    scoring: Scoring,
    store: ExactVectors,
    x: np.ndarray,
    labels: np.ndarray,
    k: int,
    row_of: np.ndarray,
    mapped: Any,
    id_of: Callable[[int], str | None],
    dead: AbstractSet[int],
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row's candidate ``labels`` (``(nq, fetch)``, -1 padded) by the
    exact score against ``x`` (prepared queries): ``(raw, labels)`` in faiss' convention,
    best first, -1 (and a worst raw number) where a row has fewer than ``k`` candidates.
    ``row_of``, ``mapped``: see :meth:`ExactVectors.vectors`."""
    worst = np.inf if scoring.metric == "l2" else -np.inf
    width = min(k, labels.shape[1])
    raw_out = np.full((x.shape[0], width), worst, dtype=np.float32)
    labels_out = np.full((x.shape[0], width), -1, dtype=np.int64)
    for i in range(x.shape[0]):  # one query per call in practice; a batch row by row
        row = labels[i]
        candidates = row[row >= 0] if int(row.min(initial=0)) < 0 else row
        if not len(candidates):
            continue
        vectors, found = store.vectors(candidates, row_of, mapped, id_of, dead)
        raw = _exact_raw(scoring, x[i], vectors)
        raw[~found] = worst
        best, cols = scoring.top(raw[None, :], width)
        keep = np.isfinite(best[0])
        n = int(keep.sum())
        raw_out[i, :n] = best[0][keep]
        labels_out[i, :n] = candidates[cols[0][keep]]
    return raw_out, labels_out


def _exact_raw(scoring: Scoring, q: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """faiss' number for ``q`` (prepared: unit for cosine) against each stored (raw) vector:
    the cosine, the inner product or the squared L2 distance."""
    dots: np.ndarray = vectors @ q
    if scoring.metric == "ip":
        return dots
    squares = np.einsum("ij,ij->i", vectors, vectors)
    if scoring.metric == "cosine":
        norms = np.sqrt(squares)
        out: np.ndarray = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)  # zero vectors score 0
        return out
    squared: np.ndarray = np.maximum(squares + float(q @ q) - 2.0 * dots, 0.0)
    return squared
