"""faiss IDSelectors and SearchParameters: pushing ``allowed`` and tombstones into faiss.

A selector is checked against faiss labels (through ``IndexIDMap2``'s translation where
the index is wrapped). Dense label sets use a bitmap (one bit per label up to the
counter, no copy), sparse ones an ``IDSelectorBatch`` (a hash set with a Bloom filter).
The numpy arrays a selector points into are kept on the :class:`Pushdown` that owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Pushdown", "include", "exclude", "search_params"]

BITMAP_DENSITY = 32
"""Use a bitmap when the label counter is at most this many times the number of labels."""


@dataclass
class Pushdown:
    """A faiss selector plus the buffers it reads (which must outlive the search)."""

    selector: Any
    keep: list[Any] = field(default_factory=list)


def include(faiss: Any, labels: np.ndarray, next_label: int) -> Pushdown:
    """A selector accepting exactly ``labels`` (sorted int64, all below ``next_label``)."""
    if next_label <= BITMAP_DENSITY * len(labels):
        mask = np.zeros(next_label, dtype=bool)
        mask[labels] = True
        bitmap = np.packbits(mask, bitorder="little")
        return Pushdown(faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap)), [bitmap])
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    return Pushdown(faiss.IDSelectorBatch(len(labels), faiss.swig_ptr(labels)), [labels])


def exclude(faiss: Any, labels: np.ndarray) -> Pushdown:
    """A selector rejecting ``labels`` (the tombstones) and accepting everything else."""
    inner = include(faiss, labels, 1 << 62)  # always a hash set: tombstones are few
    return Pushdown(faiss.IDSelectorNot(inner.selector), [inner.selector, *inner.keep])


def search_params(faiss: Any, family: str, pushdown: Pushdown | None, ef_search: int | None, nprobe: int | None) -> Any:
    """SearchParameters of the right class for ``family``.

    faiss takes every field of a SearchParameters object, defaults included (efSearch 16,
    nprobe 1), over the index's own values: callers pass the effective ``ef_search`` /
    ``nprobe`` (the query's override or the index's value), never None for their family.
    """
    kwargs: dict[str, Any] = {}
    if pushdown is not None:
        kwargs["sel"] = pushdown.selector
    if family == "hnsw":
        params = faiss.SearchParametersHNSW(**kwargs)
        if ef_search is not None:
            params.efSearch = ef_search
    elif family == "ivf":
        params = faiss.SearchParametersIVF(**kwargs)
        if nprobe is not None:
            params.nprobe = nprobe
    else:
        params = faiss.SearchParameters(**kwargs)
    return params
