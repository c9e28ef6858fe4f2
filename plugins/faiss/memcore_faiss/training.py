"""Training a trainable faiss index (IVF, PQ, SQ...): what it trains on and what it skips.

Two costs of faiss' training that buy this plugin nothing, measured on 39,936 clustered
384-d vectors into ``IVF1024,PQ96`` (one thread, figures in ``docs/plugins/faiss.md``):

- **polysemous training.** ``index_factory`` turns it on for every ``PQ<m>`` storage
  (``IVF..,PQ..`` and ``PQ..``; only a ``np`` suffix, outside this plugin's grammar, turns
  it off): a simulated annealing of each sub-quantizer's centroid order so that Hamming
  distances between codes approximate real ones. Searches use it only with a
  ``polysemous_ht`` threshold, which this plugin never sets. 13 s of training without it,
  over 300 s with it. :func:`skip_polysemous` turns it off on every node of a new index.
- **more vectors than k-means samples.** faiss' k-means samples at most 256 points per
  centroid (``max_points_per_centroid``), but an IVF index first assigns *every* given
  vector to its nearest list (and an IVF-PQ computes every residual) before the PQ
  samples. :func:`training_sample` hands faiss at most ``train_sample`` vectors (default
  :func:`default_train_sample`: max(256 per centroid, 65,536)), a seeded random subset,
  so a large first batch or a large ``min_train`` does not multiply the cost; every
  collected vector is still added after training.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

__all__ = ["POINTS_PER_CENTROID", "SAMPLE_FLOOR", "SAMPLE_SEED", "default_train_sample", "skip_polysemous", "training_sample"]

POINTS_PER_CENTROID = 256
"""faiss' k-means samples at most this many points per centroid (``max_points_per_centroid``)."""

SAMPLE_FLOOR = 65_536
"""The default training sample is never smaller: 256 points for each of a PQ's 256 centroids."""

SAMPLE_SEED = 1234
"""Seed of the training sample (the same vectors give the same index)."""


def default_train_sample(centroids: int) -> int:
    """The default bound of the training sample for an index with ``centroids`` centroids
    (the largest count among its quantizers: IVF lists, a PQ's 2^nbits)."""
    return max(POINTS_PER_CENTROID * centroids, SAMPLE_FLOOR)


def _nodes(faiss: Any, index: Any) -> Iterator[Any]:
    """``index`` and the indexes inside it (transforms' inner index, HNSW storage), downcast."""
    node = faiss.downcast_index(index)
    yield node
    inner = getattr(node, "index", None) if isinstance(node, faiss.IndexPreTransform) else None
    if inner is not None:
        yield from _nodes(faiss, inner)
    storage = getattr(node, "storage", None)
    if isinstance(storage, faiss.Index):
        yield from _nodes(faiss, storage)


def skip_polysemous(faiss: Any, index: Any) -> int:
    """Turn polysemous training off on every node of ``index`` that has it on; returns how many."""
    count = 0
    for node in _nodes(faiss, index):
        if getattr(node, "do_polysemous_training", False):
            node.do_polysemous_training = False
            count += 1
    return count


def training_sample(vectors: np.ndarray, limit: int) -> np.ndarray:
    """``vectors`` when there are at most ``limit`` of them, else ``limit`` of them drawn at
    random (seeded, without repetition, in their original order)."""
    n = len(vectors)
    if n <= limit:
        return vectors
    rows = np.random.default_rng(SAMPLE_SEED).choice(n, size=limit, replace=False)
    rows.sort()
    return np.ascontiguousarray(vectors[rows])
