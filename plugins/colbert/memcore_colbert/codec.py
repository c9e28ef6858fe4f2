"""ColBERTv2 residual compression: centroid id + ``nbits`` per dimension of the residual.

Training (on held-out token vectors): residuals ``r = x - c(x)`` (``c`` the nearest
centroid by dot product); with ``B = 2**nbits`` buckets, the cutoffs are quantiles at
``i/B`` (i = 1..B-1) and the weights quantiles at ``i/B + 1/(2B)`` (i = 0..B-1);
``avg_residual`` is the mean absolute residual.

``buckets = "pooled"`` (the default) is ColBERTv2's choice, one quantile set over all
coordinates. ``buckets = "per_dim"`` takes those quantiles of each dimension's residuals
separately: a ``(dim, B-1)`` cutoff table and a ``(dim, B)`` weight table
(``dim * (2B - 1)`` floats per index). It matters for token vectors whose dimensions have
very different spreads (pooled buckets then put almost every coordinate of a narrow
dimension in the two middle buckets and clip the wide ones). MiniLM's residuals are not
like that (per-dimension standard deviations 0.03-0.04 but for one constant dimension),
and per-dimension buckets measured no recall gain on SciFact (docs/plugins/colbert.md).

Encoding: per dimension, the bucket id of ``r_d`` among that dimension's cutoffs,
``nbits`` bits each, packed ``8 // nbits`` dimensions per byte, low bits first. Decoding
goes through a lookup table (one per byte position when per dimension) (byte -> the weights of the dimensions it
holds), then ``x_hat = c + weights``, L2-normalised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ResidualCodec", "nearest_centroids", "code_dtype", "BUCKET_MODES"]

_CHUNK = 16384
BUCKET_MODES = ("per_dim", "pooled")


def code_dtype(ncentroids: int) -> np.dtype:
    """The smallest unsigned integer dtype holding centroid ids ``0 .. ncentroids - 1``."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if ncentroids <= int(np.iinfo(dtype).max) + 1:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def nearest_centroids(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the best centroid (by dot product) of each row of ``x``, chunked matmuls,
    in the smallest unsigned dtype that fits the number of centroids."""
    out = np.empty(len(x), dtype=code_dtype(len(centroids)))
    for start in range(0, len(x), _CHUNK):
        out[start : start + _CHUNK] = np.argmax(x[start : start + _CHUNK] @ centroids.T, axis=1)
    return out


@dataclass
class ResidualCodec:
    """Bucket cutoffs and weights of one index (and the lookup table derived from them).

    ``cutoffs`` / ``weights``: ``(B-1,)`` / ``(B,)`` when pooled, ``(dim, B-1)`` /
    ``(dim, B)`` per dimension."""

    nbits: int
    dim: int
    cutoffs: np.ndarray
    weights: np.ndarray
    avg_residual: float

    def __post_init__(self) -> None:
        self.cutoffs = np.asarray(self.cutoffs, dtype=np.float32)
        self.weights = np.asarray(self.weights, dtype=np.float32)
        buckets = 1 << self.nbits
        per_dim = self.cutoffs.ndim == 2
        if self.cutoffs.shape != ((self.dim, buckets - 1) if per_dim else (buckets - 1,)) or self.weights.shape != (
            (self.dim, buckets) if per_dim else (buckets,)
        ):
            raise ValueError(f"bucket tables of shapes {self.cutoffs.shape} / {self.weights.shape} do not fit nbits {self.nbits}, dim {self.dim}")
        self._cut = self.cutoffs if per_dim else np.broadcast_to(self.cutoffs, (self.dim, buckets - 1))  # (dim, B-1)
        weights = self.weights  # (dim, B) when per dimension
        per = 8 // self.nbits
        mask = buckets - 1
        byte = np.arange(256, dtype=np.int32)[:, None]
        ids = (byte >> (np.arange(per, dtype=np.int32) * self.nbits)[None, :]) & mask  # (256, per)
        if not per_dim:  # one (256, per) table serves every byte position
            self._lut = np.ascontiguousarray(self.weights[ids])
            self._lut_base: np.ndarray | None = None
            return
        nbytes = self.bytes_per_token
        # (nbytes * 256, per): row j * 256 + b holds the weights of the dims byte j holds when its value is b
        dims = (np.arange(nbytes)[:, None, None] * per + np.arange(per)[None, None, :]).repeat(256, axis=1)  # (nbytes, 256, per)
        self._lut = np.ascontiguousarray(weights[dims, ids[None, :, :]].reshape(nbytes * 256, per))
        self._lut_base = (np.arange(nbytes, dtype=np.int32) * 256)[None, :]

    @property
    def per_dim(self) -> bool:
        """True when cutoffs and weights are per dimension."""
        return self.cutoffs.ndim == 2

    @property
    def bytes_per_token(self) -> int:
        """Packed residual bytes per token vector."""
        return self.dim * self.nbits // 8

    @classmethod
    def train(cls, heldout: np.ndarray, centroids: np.ndarray, nbits: int, buckets: str = "pooled") -> "ResidualCodec":
        """Cutoffs, weights and average residual from held-out token vectors."""
        if buckets not in BUCKET_MODES:
            raise ValueError(f"buckets must be one of {BUCKET_MODES}, not {buckets!r}")
        residuals = heldout - np.take(centroids, nearest_centroids(heldout, centroids), axis=0)
        count = 1 << nbits
        cut_q = np.arange(1, count, dtype=np.float64) / count
        weight_q = np.arange(count, dtype=np.float64) / count + 1.0 / (2 * count)
        if buckets == "per_dim":
            cutoffs, weights = np.quantile(residuals, cut_q, axis=0).T, np.quantile(residuals, weight_q, axis=0).T
        else:
            flat = residuals.ravel()
            cutoffs, weights = np.quantile(flat, cut_q), np.quantile(flat, weight_q)
        return cls(
            nbits=nbits,
            dim=heldout.shape[1],
            cutoffs=cutoffs.astype(np.float32),
            weights=weights.astype(np.float32),
            avg_residual=float(np.abs(residuals).mean()),
        )

    def compress(self, x: np.ndarray, centroids: np.ndarray, codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(codes (n,) smallest unsigned dtype, residuals uint8 (n, dim*nbits/8))`` of token vectors ``x``
        (``codes``: their nearest centroids when already known)."""
        codes = nearest_centroids(x, centroids) if codes is None else codes
        out = np.empty((len(x), self.bytes_per_token), dtype=np.uint8)
        per = 8 // self.nbits
        shifts = (np.arange(per, dtype=np.uint8) * self.nbits)[None, None, :]
        cut = self._cut.T  # (B-1, dim)
        for start in range(0, len(x), _CHUNK):
            part = slice(start, start + _CHUNK)
            r = x[part] - np.take(centroids, codes[part], axis=0)
            ids = np.zeros(r.shape, dtype=np.uint8)
            for level in cut:  # bucket id = number of cutoffs <= r_d (searchsorted side="right")
                ids += r >= level
            out[part] = (ids.reshape(len(ids), -1, per) << shifts).sum(axis=2, dtype=np.uint8)
        return codes, out

    def decompress(self, codes: np.ndarray, residuals: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """Unit-length approximations of the token vectors, float32 ``(n, dim)``."""
        # np.take: much faster than fancy indexing for these gathers
        x = np.take(centroids, codes, axis=0)
        index = residuals if self._lut_base is None else residuals + self._lut_base
        x += np.take(self._lut, index, axis=0).reshape(len(codes), self.dim)
        x /= np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x)), 1e-12)[:, None]
        return x

    transform = "none"

    def tables_nbytes(self) -> int:
        """Bytes of the codec's array files beside the centroids (none: its tables are a few floats in JSON)."""
        return 0

    def scoring_centroids(self, centroids: np.ndarray) -> np.ndarray:
        """The centroids in the space of :meth:`decompress_scoring` (no transform: themselves)."""
        return centroids

    def rotate_query(self, q: np.ndarray) -> np.ndarray:
        """Query token vectors in the space of :meth:`decompress_scoring` (no transform: unchanged)."""
        return q

    def decompress_scoring(self, codes: np.ndarray, residuals: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """What MaxSim scores against :meth:`rotate_query`'s output (no transform: :meth:`decompress`)."""
        return self.decompress(codes, residuals, centroids)

    def to_json(self) -> dict[str, Any]:
        """The JSON form saved in ``buckets.json`` / ``avg_residual.json``."""
        return {
            "nbits": self.nbits,
            "dim": self.dim,
            "transform": self.transform,
            "buckets": "per_dim" if self.per_dim else "pooled",
            "bucket_cutoffs": self.cutoffs.tolist(),
            "bucket_weights": self.weights.tolist(),
            "avg_residual": self.avg_residual,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ResidualCodec":
        """Inverse of :meth:`to_json` (pooled 1-D or per-dimension 2-D tables); ValueError when the tables do not fit."""
        return cls(int(data["nbits"]), int(data["dim"]), np.asarray(data["bucket_cutoffs"]), np.asarray(data["bucket_weights"]), float(data["avg_residual"]))
