"""A cluster-pruned exact cone: scan only the clusters that can hold a top-``k`` direction.

The mirror's directions are grouped by spherical k-means (``nlist = ceil(sqrt(N))``
centroids, trained on a sample). Each cluster ``j`` keeps its unit centroid ``c_j`` and its
angular radius ``rho_j`` (the largest angle between ``c_j`` and a member). For a unit query
``q`` at angle ``theta_j`` from ``c_j``, every member ``x`` satisfies (triangle inequality
on the sphere) ``angle(q, x) >= theta_j - rho_j``, so ``q·x <= cos(max(0, theta_j -
rho_j))``: the cluster's **bound**. :meth:`ClusterCone.cone` scans clusters in descending
bound order until they hold ``4k`` rows, takes the exact top ``k`` among them (float32,
faiss' kernel, as the full scan), and then scans every other cluster whose bound reaches
the ``k``-th cosine found (:data:`SLACK` covers rounding). What is left out cannot enter
the top ``k``: the result is the exact cone. When pruning leaves more than
:data:`MAX_SHARE` of the rows to scan (directions spread evenly, no cluster structure) it
returns None and the caller scans otherwise; after :data:`GIVE_UP` such queries in a row it
stops trying (:attr:`ClusterCone.useful`).

Built on first use (k-means on ``min(N, 64·nlist)`` rows, 8 iterations, then one
assignment pass); rows the mirror writes afterwards (:meth:`touch`) and rows appended are
scored exactly on every search until more than ``max(1024, N/32)`` of them call for a
rebuild (the same rule as :mod:`.prescan`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .prescan import rebuild_limit

__all__ = ["ClusterCone", "MIN_ROWS", "SLACK", "MAX_SHARE", "GIVE_UP"]

MIN_ROWS = 20_000
"""Below this many rows clustering does not pay: no cluster cone."""

SLACK = 1e-5
"""Added to every bound: float32 rounding of the cosines and centroids (bounds are float64)."""

MAX_SHARE = 0.25
"""Give up on a query when the clusters to scan hold more than this share of the rows."""

GIVE_UP = 32
"""Queries in a row that pruning could not serve before :attr:`ClusterCone.useful` turns False."""


class ClusterCone:
    """Clusters of rows ``[0, built)`` of a mirror's directions, with their bounds, and the
    rows written since the build (scored exactly until the next build)."""

    def __init__(self, directions: np.ndarray, faiss: Any, seed: int = 1234):
        n, d = directions.shape
        self.built = int(n)
        nlist = max(8, math.ceil(math.sqrt(n)))
        x = np.ascontiguousarray(directions, dtype=np.float32)
        sample = x if n <= 64 * nlist else x[np.random.default_rng(seed).choice(n, 64 * nlist, replace=False)]
        km = faiss.Kmeans(d, nlist, niter=8, spherical=True, seed=seed, max_points_per_centroid=64)
        km.train(sample)
        centroids = km.centroids.astype(np.float64)
        centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-300)
        self.centroids = centroids  # float64: the bounds are computed in float64
        _, assign = faiss.knn(x, centroids.astype(np.float32), 1, metric=faiss.METRIC_INNER_PRODUCT)
        assign = assign[:, 0]
        self.order = np.argsort(assign, kind="stable").astype(np.int64)  # rows grouped by cluster
        self.starts = np.searchsorted(assign[self.order], np.arange(nlist + 1))
        cos = np.einsum("ij,ij->i", x.astype(np.float64), centroids[assign])  # each row to its centroid, float64
        cosmin = np.ones(nlist)
        np.minimum.at(cosmin, assign, cos - 1e-9)  # a hair lower: a radius never too small
        self.rho = np.arccos(np.clip(cosmin, -1.0, 1.0))  # an empty cluster: radius 0 at its centroid
        self.sizes = np.diff(self.starts)
        self._stale = np.zeros(n, dtype=bool)  # rows < built whose cluster no longer holds them as they are
        self._dirty: list[int] = []
        self.misses = 0  # queries in a row pruning could not serve
        self.served = 0
        self.declined = 0

    @property
    def useful(self) -> bool:
        """False once :data:`GIVE_UP` queries in a row had to be declined."""
        return self.misses < GIVE_UP

    def touch(self, row: int) -> None:
        """The mirror wrote (or moved a particle into) ``row``."""
        if row < self.built and not self._stale[row]:
            self._stale[row] = True
            self._dirty.append(row)

    def stale(self, n: int) -> bool:
        """True when the rows to score exactly (written since the build) call for a rebuild."""
        return len(self._dirty) + max(0, n - self.built) > rebuild_limit(n)

    def _rows(self, clusters: np.ndarray, n: int) -> np.ndarray:
        starts, sizes = self.starts[clusters], self.sizes[clusters]
        total = int(sizes.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        offsets = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(total)
        rows = self.order[offsets]
        if self._dirty or n < self.built:
            rows = rows[~self._stale[rows] & (rows < n)]
        return rows

    def cone(self, q: np.ndarray, directions: np.ndarray, k: int, knn: Any) -> np.ndarray | None:
        """The rows of the ``k`` highest cosines to the unit query ``q`` (1, d) among
        ``directions`` (the mirror's (n, d)), best first; None when pruning would scan more
        than :data:`MAX_SHARE` of them."""
        n = directions.shape[0]
        cos = np.clip(self.centroids @ q[0].astype(np.float64) + 1e-9, -1.0, 1.0)  # a hair higher: an angle never too large
        bound = np.cos(np.maximum(np.arccos(cos) - self.rho, 0.0)) + SLACK
        ranked = np.argsort(-bound)
        descending = -bound[ranked]  # ascending: for searchsorted
        m = int(np.searchsorted(np.cumsum(self.sizes[ranked]), 4 * k)) + 1  # the first clusters holding 4k rows
        extra = [np.asarray(self._dirty, dtype=np.int64)] if self._dirty else []
        if n > self.built:
            extra.append(np.arange(self.built, n, dtype=np.int64))
        extra = [e[e < n] for e in extra]
        for _ in range(3):
            rows = self._rows(ranked[:m], n)
            if extra:
                rows = np.concatenate([rows, *extra])
            if len(rows) > MAX_SHARE * n:
                break
            kk = min(k, len(rows))
            if kk < k:  # fewer than k rows in these clusters: scan every cluster (or give up)
                if m >= len(ranked):
                    if kk == 0:
                        break
                    return self._served(rows[knn(q, directions[rows], kk)[1][0]])
                m = len(ranked)
                continue
            scores, picked = knn(q, directions[rows], k)
            reach = int(np.searchsorted(descending, -float(scores[0][k - 1]), side="right"))  # clusters whose bound reaches the k-th cosine
            if reach <= m:
                return self._served(rows[picked[0]])
            m = reach
        self.misses += 1
        self.declined += 1
        return None

    def _served(self, rows: np.ndarray) -> np.ndarray:
        self.misses = 0
        self.served += 1
        return rows
