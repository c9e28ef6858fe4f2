"""Transform coding of residuals (``residual_transform = "pca"``).

ColBERTv2 quantises every residual coordinate with the same ``nbits``. MiniLM's residuals
are correlated (their top 100 of 384 principal components hold about 59 % of the
variance), so a transform coder spends the same bytes better:

1. **rotation**: ``P`` (``dim x dim``, orthogonal), the principal axes of the training
   residuals (eigenvectors of their second-moment matrix), so ``z = r @ P`` has
   uncorrelated coordinates of decreasing variance;
2. **bit allocation**: each component gets a width of 0, 1, 2, 4 or 8 bits, the total
   at most ``dim * nbits`` (the bytes per token of the plain codec), greedily by the
   measured distortion saved per bit: high-variance components get more bits,
   low-variance ones fewer or none;
3. **scalar quantisers**: per component, Lloyd-Max refined (from quantile start points,
   a few iterations on the training residuals: weights = bucket means, cutoffs =
   midpoints of adjacent weights). A 0-bit component decodes to its mean.

Packing: components sorted by width (widest first) take consecutive bit positions of the
``dim * nbits / 8`` bytes, so none straddles a byte. The rotation's columns are stored in
that order (coded components first), so decoding is one lookup table per byte position
(byte value -> the weights of the components it holds) and one gather.

Scoring happens in the rotated space: ``<q, c + P z> = <q P, c P + z>`` and the rotation
keeps norms, so the engine rotates the query once and compares it with ``c P + z``;
only a re-training rotates vectors back (:meth:`TransformCodec.decompress`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from .codec import nearest_centroids

__all__ = ["TransformCodec", "WIDTHS"]

WIDTHS = (0, 1, 2, 4, 8)
_CHUNK = 16384
_LLOYD_ITERS = 8
_SPAN = 16.0  # > the range of a residual coordinate (|r| <= 2): separates columns in one sorted array


def _bucketize(z: np.ndarray, cutoffs: list[np.ndarray]) -> np.ndarray:
    """Bucket ids ``(n, len(cutoffs))`` of the columns of ``z``: the number of the
    column's (sorted) cutoffs <= the value. Columns are grouped by their number of cutoffs;
    up to 3 cutoffs by comparisons, more by a vectorised binary search."""
    ids = np.zeros(z.shape, dtype=np.int64)
    lengths = np.array([len(c) for c in cutoffs])
    for length in np.unique(lengths):
        cols = np.flatnonzero(lengths == length)
        table = np.stack([cutoffs[j] for j in cols])  # (m, length)
        part = z[:, cols]
        if length <= 3:
            out = np.zeros(part.shape, dtype=np.int64)
            for level in table.T:
                out += part >= level[None, :]
        else:  # length = 2**w - 1: w halving steps
            flat = np.concatenate([table, np.full((len(cols), 1), np.inf, dtype=table.dtype)], axis=1).ravel()
            base = (np.arange(len(cols)) * (length + 1))[None, :]
            out = np.zeros(part.shape, dtype=np.int64)
            step = (int(length) + 1) // 2
            while step:
                out += step * (part >= np.take(flat, base + out + step - 1))
                step //= 2
        ids[:, cols] = out
    return ids


def _lloyd(sorted_z: np.ndarray, prefix: np.ndarray, prefix2: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-column Lloyd-Max quantisers of ``width`` bits on the column-sorted training
    values ``sorted_z`` (``prefix`` / ``prefix2``: column prefix sums of values / squares,
    a zero row first): ``(cutoffs (dim, B-1), weights (dim, B), mean squared error (dim,))``.

    A bucket is a run of the sorted column, so its count and sum come from two
    ``searchsorted`` positions and the prefix sums: no pass over the values per iteration."""
    n, dim = sorted_z.shape
    count = 1 << width
    weights = sorted_z[np.minimum(((np.arange(count) + 0.5) / count * n).astype(np.int64), n - 1)].T.astype(np.float64)  # (dim, B) quantiles
    shift = np.arange(dim, dtype=np.float64) * _SPAN
    haystack = (sorted_z.T.astype(np.float64) + shift[:, None]).ravel()  # globally sorted
    col_base = (np.arange(dim) * n)[:, None]
    pt, pt2 = prefix.T, prefix2.T  # (dim, n+1)

    def buckets(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cutoffs = (weights[:, 1:] + weights[:, :-1]) / 2
        below = np.searchsorted(haystack, (cutoffs + shift[:, None]).ravel(), side="left").reshape(dim, count - 1) - col_base
        edges = np.concatenate([np.zeros((dim, 1), dtype=np.int64), below, np.full((dim, 1), n, dtype=np.int64)], axis=1)
        return cutoffs, edges, np.diff(edges, axis=1)

    for _ in range(_LLOYD_ITERS):
        _, edges, counts = buckets(weights)
        sums = np.take_along_axis(pt, edges[:, 1:], axis=1) - np.take_along_axis(pt, edges[:, :-1], axis=1)
        weights = np.where(counts > 0, sums / np.maximum(counts, 1), weights)
        weights = np.maximum.accumulate(weights, axis=1)  # keep them ordered (empty buckets)
    cutoffs, edges, counts = buckets(weights)
    sums = np.take_along_axis(pt, edges[:, 1:], axis=1) - np.take_along_axis(pt, edges[:, :-1], axis=1)
    squares = np.take_along_axis(pt2, edges[:, 1:], axis=1) - np.take_along_axis(pt2, edges[:, :-1], axis=1)
    mse = (squares - 2 * weights * sums + weights * weights * counts).sum(axis=1) / n
    return cutoffs.astype(np.float32), weights.astype(np.float32), np.maximum(mse, 0.0)


def _allocate(mse: dict[int, np.ndarray], budget: int) -> np.ndarray:
    """Widths (bits) per component, total <= ``budget``: greedy by distortion saved per bit."""
    dim = len(mse[0])
    widths = np.zeros(dim, dtype=np.int64)
    step = {w: WIDTHS[i + 1] for i, w in enumerate(WIDTHS[:-1])}

    def entry(j: int) -> tuple[float, int, int] | None:
        w = int(widths[j])
        if w not in step:
            return None
        nxt = step[w]
        return (-(float(mse[w][j]) - float(mse[nxt][j])) / (nxt - w), j, nxt)

    heap = [e for e in map(entry, range(dim)) if e is not None]
    heapq.heapify(heap)
    left = budget
    while heap and left > 0:
        _, j, nxt = heapq.heappop(heap)
        cost = nxt - int(widths[j])
        if cost > left:  # a cheaper step of another component may still fit
            continue
        widths[j] = nxt
        left -= cost
        e = entry(j)
        if e is not None:
            heapq.heappush(heap, e)
    return widths


@dataclass
class TransformCodec:
    """A learned rotation + per-component widths and Lloyd-Max tables of one index.

    ``rotation``: ``(dim, dim)``, columns in packing order (coded components first);
    ``widths``: bits per component in that order (non-increasing); ``cutoffs[j]`` /
    ``weights[j]``: component j's ``2**w - 1`` cutoffs / ``2**w`` weights; ``means``:
    the decoded value of every component (used by the 0-bit ones)."""

    nbits: int
    dim: int
    rotation: np.ndarray
    widths: np.ndarray
    cutoffs: list[np.ndarray]
    weights: list[np.ndarray]
    means: np.ndarray
    avg_residual: float

    transform = "pca"

    def tables_nbytes(self) -> int:
        """Bytes of the codec's array files beside the centroids: the rotation."""
        return int(self.rotation.nbytes)

    def __post_init__(self) -> None:
        self.rotation = np.ascontiguousarray(self.rotation, dtype=np.float32)
        self.widths = np.asarray(self.widths, dtype=np.int64)
        self.means = np.asarray(self.means, dtype=np.float32)
        self.cutoffs = [np.asarray(c, dtype=np.float32).reshape(-1) for c in self.cutoffs]
        self.weights = [np.asarray(w, dtype=np.float32).reshape(-1) for w in self.weights]
        d = self.dim
        if self.rotation.shape != (d, d) or self.widths.shape != (d,) or self.means.shape != (d,) or len(self.cutoffs) != d or len(self.weights) != d:
            raise ValueError(f"transform tables do not fit dim {d}")
        if not set(self.widths.tolist()) <= set(WIDTHS) or (np.diff(self.widths) > 0).any():
            raise ValueError("component widths must be 0, 1, 2, 4 or 8 bits, widest first")
        if int(self.widths.sum()) > d * self.nbits:
            raise ValueError(f"component widths add up to {int(self.widths.sum())} bits, more than dim * nbits = {d * self.nbits}")
        for w, cut, wt in zip(self.widths.tolist(), self.cutoffs, self.weights):
            if (w and (len(cut) != (1 << w) - 1 or len(wt) != 1 << w)) or (not w and (len(cut) or len(wt))):
                raise ValueError("bucket tables do not fit the component widths")
        self.coded = int((self.widths > 0).sum())
        offsets = np.concatenate(([0], np.cumsum(self.widths)))[:-1]
        self._byte = offsets[: self.coded] // 8
        self._shift = (offsets[: self.coded] % 8).astype(np.uint8)
        # decoding: runs of consecutive bytes holding the same number m of components (their
        # components are consecutive too) share one lookup table: row i * 256 + b holds the
        # weights of the m components that byte b0 + i holds when its value is b
        counts = np.bincount(self._byte, minlength=self.bytes_per_token)
        self._segments: list[tuple[int, int, int, int, np.ndarray, np.ndarray]] = []  # (b0, b1, c0, c1, lut, row base)
        values = np.arange(256)
        p, first = 0, 0
        while p < self.bytes_per_token and counts[p]:
            q = p
            while q < self.bytes_per_token and counts[q] == counts[p]:
                q += 1
            m, last = int(counts[p]), first + int(counts[p:q].sum())
            lut = np.zeros((q - p, 256, m), dtype=np.float32)
            for j in range(first, last):
                ids = (values >> int(self._shift[j])) & ((1 << int(self.widths[j])) - 1)
                lut[self._byte[j] - p, :, (j - first) % m] = self.weights[j][ids]
            self._segments.append((p, q, first, last, lut.reshape((q - p) * 256, m), (np.arange(q - p, dtype=np.int64) * 256)[None, :]))
            p, first = q, last
        self._base = np.where(self.widths > 0, 0.0, self.means).astype(np.float32)  # what 0-bit components decode to
        self._scoring: tuple[int, np.ndarray] | None = None

    @property
    def bytes_per_token(self) -> int:
        """Packed residual bytes per token vector (as the plain codec at the same nbits)."""
        return self.dim * self.nbits // 8

    @classmethod
    def train(cls, heldout: np.ndarray, centroids: np.ndarray, nbits: int) -> "TransformCodec":
        """Rotation, widths and quantisers from training token vectors (their residuals)."""
        residuals = (heldout - np.take(centroids, nearest_centroids(heldout, centroids), axis=0)).astype(np.float64)
        dim = residuals.shape[1]
        second = residuals.T @ residuals / max(len(residuals), 1)
        eigenvalues, vectors = np.linalg.eigh(second)
        order = np.argsort(-eigenvalues, kind="stable")
        vectors = vectors[:, order]
        z = residuals @ vectors
        means = z.mean(axis=0)
        mse = {0: z.var(axis=0)}
        tables = {}
        z.sort(axis=0)
        zeros = np.zeros((1, dim))
        prefix, prefix2 = np.concatenate([zeros, np.cumsum(z, axis=0)]), np.concatenate([zeros, np.cumsum(z * z, axis=0)])
        for w in WIDTHS[1:]:
            cut, wt, err = _lloyd(z, prefix, prefix2, w)
            tables[w], mse[w] = (cut, wt), err
        widths = _allocate(mse, dim * nbits)
        order = np.argsort(-widths, kind="stable")  # widest first; among equals, by decreasing variance
        widths = widths[order]
        cutoffs = [tables[int(w)][0][j] if w else np.zeros(0) for j, w in zip(order.tolist(), widths.tolist())]
        weights = [tables[int(w)][1][j] if w else np.zeros(0) for j, w in zip(order.tolist(), widths.tolist())]
        return cls(
            nbits=nbits,
            dim=dim,
            rotation=vectors[:, order],
            widths=widths,
            cutoffs=cutoffs,
            weights=weights,
            means=means[order],
            avg_residual=float(np.abs(residuals).mean()),
        )

    # -- coding ------------------------------------------------------------------------------

    def compress(self, x: np.ndarray, centroids: np.ndarray, codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, packed residual bytes (n, dim*nbits/8) uint8)`` of token vectors ``x``."""
        codes = nearest_centroids(x, centroids) if codes is None else codes
        out = np.zeros((len(x), self.bytes_per_token), dtype=np.uint8)
        for start in range(0, len(x), _CHUNK):
            part = slice(start, start + _CHUNK)
            z = (x[part] - np.take(centroids, codes[part], axis=0)) @ self.rotation[:, : self.coded]
            ids = _bucketize(z, self.cutoffs[: self.coded]).astype(np.uint8) << self._shift[None, :]
            block = out[part]
            for p in np.unique(self._byte):
                block[:, p] = np.bitwise_or.reduce(ids[:, self._byte == p], axis=1)
        return codes, out

    def _rotated(self, codes: np.ndarray, residuals: np.ndarray, rotated_centroids: np.ndarray) -> np.ndarray:
        x = np.take(rotated_centroids, codes, axis=0)
        for b0, b1, c0, c1, lut, base in self._segments:
            x[:, c0:c1] += np.take(lut, residuals[:, b0:b1] + base, axis=0).reshape(len(codes), c1 - c0)
        return x

    def scoring_centroids(self, centroids: np.ndarray) -> np.ndarray:
        """``centroids @ P`` plus the decoded value of the 0-bit components (cached per centroid array)."""
        if self._scoring is None or self._scoring[0] != id(centroids):
            self._scoring = (id(centroids), np.ascontiguousarray(centroids @ self.rotation + self._base[None, :], dtype=np.float32))
        return self._scoring[1]

    def rotate_query(self, q: np.ndarray) -> np.ndarray:
        """Query token vectors in the space :meth:`decompress_scoring` returns."""
        return np.ascontiguousarray(q @ self.rotation)

    def decompress_scoring(self, codes: np.ndarray, residuals: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """Unit-length approximations in the rotated space (``x_hat @ P``), float32 ``(n, dim)``."""
        x = self._rotated(codes, residuals, self.scoring_centroids(centroids))
        x /= np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x)), 1e-12)[:, None]
        return x

    def decompress(self, codes: np.ndarray, residuals: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """Unit-length approximations of the token vectors in their own space, float32 ``(n, dim)``."""
        return np.ascontiguousarray(self.decompress_scoring(codes, residuals, centroids) @ self.rotation.T)

    # -- persistence -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The JSON form saved in ``buckets.json`` (the rotation goes to ``rotation.npy``)."""
        return {
            "nbits": self.nbits,
            "dim": self.dim,
            "transform": self.transform,
            "widths": self.widths.tolist(),
            "bucket_cutoffs": [c.tolist() for c in self.cutoffs],
            "bucket_weights": [w.tolist() for w in self.weights],
            "means": self.means.tolist(),
            "avg_residual": self.avg_residual,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], rotation: np.ndarray) -> "TransformCodec":
        """Inverse of :meth:`to_json`; ValueError when the tables do not fit."""
        return cls(
            int(data["nbits"]),
            int(data["dim"]),
            rotation,
            np.asarray(data["widths"]),
            [np.asarray(c, dtype=np.float32) for c in data["bucket_cutoffs"]],
            [np.asarray(w, dtype=np.float32) for w in data["bucket_weights"]],
            np.asarray(data["means"]),
            float(data["avg_residual"]),
        )
