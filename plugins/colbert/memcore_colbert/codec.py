"""ColBERTv2 residual compression: centroid id + ``nbits`` per dimension of the residual.

Training (on held-out token vectors): residuals ``r = x - c(x)`` (``c`` the nearest
centroid by dot product); with ``B = 2**nbits`` buckets, the cutoffs are the quantiles of
all residual coordinates pooled at ``i/B`` (i = 1..B-1) and the weights the quantiles at
``i/B + 1/(2B)`` (i = 0..B-1); ``avg_residual`` is the mean absolute residual.

Encoding: per dimension, the bucket id of ``r_d`` among the cutoffs, ``nbits`` bits each,
packed ``8 // nbits`` dimensions per byte, low bits first. Decoding goes through a
256-entry lookup table (byte -> the weights of the dimensions it holds), then
``x_hat = c + weights``, L2-normalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ResidualCodec", "nearest_centroids"]

_CHUNK = 16384


def nearest_centroids(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the best centroid (by dot product) of each row of ``x``, chunked matmuls."""
    out = np.empty(len(x), dtype=np.int32)
    for start in range(0, len(x), _CHUNK):
        out[start : start + _CHUNK] = np.argmax(x[start : start + _CHUNK] @ centroids.T, axis=1)
    return out


@dataclass
class ResidualCodec:
    """Bucket cutoffs and weights of one index (and the LUT derived from them)."""

    nbits: int
    dim: int
    cutoffs: np.ndarray  # (B-1,) float32
    weights: np.ndarray  # (B,) float32
    avg_residual: float

    def __post_init__(self) -> None:
        self.cutoffs = np.asarray(self.cutoffs, dtype=np.float32)
        self.weights = np.asarray(self.weights, dtype=np.float32)
        per = 8 // self.nbits
        mask = (1 << self.nbits) - 1
        byte = np.arange(256, dtype=np.int32)[:, None]
        ids = (byte >> (np.arange(per, dtype=np.int32) * self.nbits)[None, :]) & mask
        self._lut = self.weights[ids]  # (256, per): the weights of the dims one byte holds

    @property
    def bytes_per_token(self) -> int:
        """Packed residual bytes per token vector."""
        return self.dim * self.nbits // 8

    @classmethod
    def train(cls, heldout: np.ndarray, centroids: np.ndarray, nbits: int) -> "ResidualCodec":
        """Cutoffs, weights and average residual from held-out token vectors."""
        residuals = heldout - np.take(centroids, nearest_centroids(heldout, centroids), axis=0)
        buckets = 1 << nbits
        flat = residuals.ravel()
        cut_q = np.arange(1, buckets, dtype=np.float64) / buckets
        weight_q = np.arange(buckets, dtype=np.float64) / buckets + 1.0 / (2 * buckets)
        return cls(
            nbits=nbits,
            dim=heldout.shape[1],
            cutoffs=np.quantile(flat, cut_q).astype(np.float32),
            weights=np.quantile(flat, weight_q).astype(np.float32),
            avg_residual=float(np.abs(residuals).mean()),
        )

    def compress(self, x: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(codes int32 (n,), residuals uint8 (n, dim*nbits/8))`` of token vectors ``x``."""
        codes = nearest_centroids(x, centroids)
        out = np.empty((len(x), self.bytes_per_token), dtype=np.uint8)
        per = 8 // self.nbits
        shifts = (np.arange(per, dtype=np.uint8) * self.nbits)[None, None, :]
        for start in range(0, len(x), _CHUNK):
            part = slice(start, start + _CHUNK)
            ids = np.searchsorted(self.cutoffs, x[part] - np.take(centroids, codes[part], axis=0), side="right").astype(np.uint8)
            out[part] = (ids.reshape(len(ids), -1, per) << shifts).sum(axis=2, dtype=np.uint8)
        return codes, out

    def decompress(self, codes: np.ndarray, residuals: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """Unit-length approximations of the token vectors, float32 ``(n, dim)``."""
        # np.take: much faster than fancy indexing for these gathers
        x = np.take(centroids, codes, axis=0)
        x += np.take(self._lut, residuals, axis=0).reshape(len(codes), self.dim)
        x /= np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x)), 1e-12)[:, None]
        return x

    def to_json(self) -> dict:
        """The JSON form saved in ``buckets.json`` / ``avg_residual.json``."""
        return {
            "nbits": self.nbits,
            "dim": self.dim,
            "bucket_cutoffs": self.cutoffs.tolist(),
            "bucket_weights": self.weights.tolist(),
            "avg_residual": self.avg_residual,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ResidualCodec":
        """Inverse of :meth:`to_json` (the caller checks sizes)."""
        return cls(int(data["nbits"]), int(data["dim"]), np.asarray(data["bucket_cutoffs"]), np.asarray(data["bucket_weights"]), float(data["avg_residual"]))
