"""The refine step of lossy indexes: candidates re-scored with the store's exact vectors.

A faiss index whose storage approximates the vectors (PQ codes, scalar quantizers, a PCA
or OPQ transform) ranks by estimated scores, and those estimates cap its recall however
many lists it visits. With ``refine_k_factor = f`` (> 0) the index asks faiss for
``k * f`` candidates and scores them exactly, against the vectors the store already keeps
(:class:`StoreRows`), then keeps the best ``k``: hits are ranked by, and carry, the exact
score. faiss' own ``IndexRefineFlat`` would keep a second full copy of every vector in
the index file and in memory; here the index keeps one int64 per label (the row of the
store's memory-mapped vector file that holds it, ``refine_rows.npy`` in the save).

Where the store maps no file (another store) or a record's row is not known, its vector is
read through :meth:`memcore.plugin.VectorReader.read`; an index without a store (built by
hand, without ``IndexContext.vectors``) has nothing to refine with and keeps faiss' estimates.

Row validity: a record's row changes only by a logged write, which the index sees as a
remove (and a new label) before it searches again, so the row of a live label stays right
for as long as the label lives -- the argument of the ``exact`` index over the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import AbstractSet, Any, Callable

import numpy as np

from memcore.plugin import CorruptError, VectorReader, atomic_write_bytes, npy_bytes, read_npy

from .scores import Scoring

__all__ = ["ROWS_FILE", "StoreRows", "refine"]

ROWS_FILE = "refine_rows.npy"
"""The store row of each label (-1: not known), saved beside the faiss file."""


class StoreRows:
    """label -> row of the store's mapped vector file, and the exact vectors of labels."""

    def __init__(self, reader: VectorReader, space: str, dim: int):
        self.reader = reader
        self.space = space
        self.dim = dim
        self.rows = np.full(0, -1, dtype=np.int64)
        self._mapped: Any = None  # memcore's MappedSpace, once the store has the space
        self._file: np.ndarray | None = None

    def _space(self) -> Any:
        """The store's mapped space (asked again until the store has one: a new store has none)."""
        if self._mapped is None:
            self._mapped = self.reader.mapped(self.space, self.dim)
        return self._mapped

    def _reserve(self, need: int) -> None:
        if need > len(self.rows):
            grown = np.full(max(need, 2 * len(self.rows), 64), -1, dtype=np.int64)
            grown[: len(self.rows)] = self.rows
            self.rows = grown

    def put(self, labels: np.ndarray, ids: list[str], vectors: np.ndarray) -> None:
        """``labels`` (just assigned to ``ids``) hold ``vectors`` as given to ``add``: their
        rows, when the store keeps exactly those vectors (else found at search, see :meth:`vectors`)."""
        if not len(labels):
            return
        self._reserve(int(labels.max()) + 1)
        space = self._space()
        found = space.rows_holding(ids, vectors) if space is not None else None
        self.rows[labels] = -1 if found is None else found

    def relabel(self, old: np.ndarray) -> None:
        """Label ``i`` is now what label ``old[i]`` was (a positional index renumbered)."""
        self._reserve(int(old.max()) + 1 if len(old) else 0)
        self.rows = self.rows[old] if len(old) else np.full(0, -1, dtype=np.int64)

    def vectors(self, labels: np.ndarray, id_of: Callable[[int], str | None], dead: AbstractSet[int]) -> tuple[np.ndarray, np.ndarray]:
        """The stored vectors of ``labels`` (>= 0; as the store keeps them, not normalised)
        and a mask of those found; ``dead`` labels (tombstones) are never found: a removed
        label's row may hold another record's vector by now. Rows not known yet are looked
        up in the store once and kept; vectors without a mapped row are read through the store."""
        n = len(labels)
        if not n:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=bool)
        top = int(labels.max())
        if top >= len(self.rows):
            self._reserve(top + 1)
        rows = self.rows[labels]
        space = self._space()
        if space is not None and int(rows.min()) < 0:
            unknown = [i for i in np.flatnonzero(rows < 0).tolist() if id_of(int(labels[i])) is not None]
            if unknown:
                looked = space.rows([id_of(int(labels[i])) or "" for i in unknown])
                rows[unknown] = looked
                self.rows[labels[unknown]] = looked
        file = self._file
        lo, hi = int(rows.min()), int(rows.max())
        if space is not None and (file is None or hi >= len(file)):
            file = self._file = space.matrix()
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

    def save(self, directory: Path, next_label: int) -> str:
        """Write the rows of labels ``[0, next_label)``; returns the file name."""
        self._reserve(next_label)
        atomic_write_bytes(Path(directory) / ROWS_FILE, npy_bytes(np.ascontiguousarray(self.rows[:next_label])))
        return ROWS_FILE

    def load(self, directory: Path, next_label: int, where: str) -> None:
        """Read a save's rows; a save without them (written before the refine step) leaves
        every row unknown: the rows are looked up at search, once each."""
        path = Path(directory) / ROWS_FILE
        if not path.is_file():
            self.rows = np.full(0, -1, dtype=np.int64)
            return
        rows = read_npy(path, where, dtype=np.int64, shape=(next_label,))
        if next_label and int(rows.min()) < -1:
            raise CorruptError(f"{where}: {ROWS_FILE} holds negative rows")
        self.rows = np.require(rows, requirements=["C", "W", "O"])
        self._file = None


def refine(
    scoring: Scoring, store: StoreRows, x: np.ndarray, labels: np.ndarray, k: int, id_of: Callable[[int], str | None], dead: AbstractSet[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row's candidate ``labels`` (``(nq, fetch)``, -1 padded) by the
    exact score against ``x`` (prepared queries): ``(raw, labels)`` in faiss' convention,
    best first, -1 (and a worst raw number) where a row has fewer than ``k`` candidates."""
    worst = np.inf if scoring.metric == "l2" else -np.inf
    width = min(k, labels.shape[1])
    raw_out = np.full((x.shape[0], width), worst, dtype=np.float32)
    labels_out = np.full((x.shape[0], width), -1, dtype=np.int64)
    for i in range(x.shape[0]):  # one query per call in practice; a batch row by row
        row = labels[i]
        candidates = row[row >= 0] if int(row.min(initial=0)) < 0 else row
        if not len(candidates):
            continue
        vectors, found = store.vectors(candidates, id_of, dead)
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
