"""A faiss index addressed by labels, searched without ``IndexIDMap2.search``.

Three ways to hold labels, chosen by the layout:

- *native*: IVF indexes take labels themselves (``add_with_ids``, ``remove_ids``);
- *positional*: indexes without ``remove_ids`` (HNSW...) are used bare and a label is the
  vector's position in faiss (the index never shifts positions; a compaction rebuilds
  and the :class:`~memcore_faiss.labels.LabelMap` is renumbered);
- *wrapped*: everything else (Flat, PQ, SQ...) sits in an ``IndexIDMap2``, which keeps the
  position -> label map (``id_map``), the reverse map (``reconstruct``, ``remove_ids``)
  and goes into the saved file.

Searching through ``IndexIDMap2.search`` is avoided: it translates the result labels in an
OpenMP parallel region, and on a busy 2-core machine that region alone measured
0.7-11 ms per single query (against ~0.05 ms for the HNSW search itself).
:meth:`Container.search` searches the inner index directly and translates positions with
a numpy view of ``id_map``; selectors are translated the way ``IndexIDMap2`` does it
(``IDSelectorTranslated``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .selectors import Pushdown

__all__ = ["Container"]


class Container:
    """One faiss index plus, when wrapped, a cached view of its position -> label map."""

    def __init__(self, faiss: Any, index: Any):
        self.faiss = faiss
        self.index = index
        self.wrapped = isinstance(index, faiss.IndexIDMap2)
        self.searcher = faiss.downcast_index(index.index) if self.wrapped else index
        #: brute-force storage (IndexFlat): batched searches of it go through BLAS
        self.exhaustive = isinstance(self.searcher, faiss.IndexFlat)
        self.positions = np.empty(0, dtype=np.int64)
        self.ntotal = 0
        self.refresh()

    def refresh(self) -> None:
        """Re-read ``ntotal`` and re-point the label view after a change (the C++ vector may move)."""
        self.ntotal = n = int(self.index.ntotal)
        if self.wrapped:
            self.positions = self.faiss.rev_swig_ptr(self.index.id_map.data(), n) if n else np.empty(0, dtype=np.int64)

    def add(self, vectors: np.ndarray, labels: np.ndarray, positional: bool = False) -> None:
        """Add vectors under ``labels`` (for a positional index: the next positions)."""
        if positional:
            if len(labels) and int(labels[0]) != self.ntotal:
                raise AssertionError(f"positional labels must continue at {self.ntotal}, got {int(labels[0])}")
            self.index.add(vectors)
        else:
            self.index.add_with_ids(vectors, labels)
        self.refresh()

    def remove(self, selector: Any) -> None:
        """``remove_ids`` with a selector over labels."""
        self.index.remove_ids(selector)
        self.refresh()

    def reconstruct(self, labels: np.ndarray, dim: int) -> np.ndarray:
        """The stored (possibly decoded) vectors of ``labels``."""
        if not len(labels):
            return np.zeros((0, dim), dtype=np.float32)
        vectors: np.ndarray = self.index.reconstruct_batch(np.ascontiguousarray(labels, dtype=np.int64))
        return vectors

    def translate(self, pushdown: Pushdown) -> Pushdown:
        """A selector over what faiss searches accepting what ``pushdown`` accepts over labels."""
        if not self.wrapped:
            return pushdown
        translated = self.faiss.IDSelectorTranslated(self.index.id_map, pushdown.selector)
        return Pushdown(translated, [pushdown.selector, *pushdown.keep])

    def search(self, x: np.ndarray, k: int, params: Any) -> tuple[np.ndarray, np.ndarray]:
        """faiss search; returns (raw numbers, labels) with -1 where faiss found nothing."""
        distances, found = self.searcher.search(x, k, params=params)
        if not self.wrapped:
            return distances, found
        labels = self.positions[found]
        if found.min() < 0:
            labels[found < 0] = -1
        return distances, labels
