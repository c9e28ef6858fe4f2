"""Vector quantisation per byte on the pca layout (``residual_transform = "pca-vq"``).

The ``pca`` codec (:mod:`.transform`) packs the rotated residual's components into bytes:
a byte holds one 8-bit component, two 4-bit ones, four 2-bit ones, eight 1-bit ones (or a
mix at a width boundary), and each component is quantised alone (Lloyd-Max). The byte's
256 values then decode to the *Cartesian product* of its components' scalar levels.

``pca-vq`` keeps that layout (same rotation, same widths, same bytes per token) but gives
each byte a **codebook** of ``2**bits`` points in the space of the components it holds,
trained with k-means (Lloyd) on the held-out residuals, starting from the product grid.
Lloyd's iterations never increase the training error, so the codebook is at least as good
as the scalar quantisers on the training data; in practice it is better because a
codebook fills the joint space of several components (a 1-bit scalar quantiser of each of
8 components wastes most of its 256 combinations, a 256-point codebook in 8 dimensions
does not). Decoding is unchanged: one lookup table per byte position (byte value -> the
codeword), now holding the codewords instead of products of scalar levels. Encoding picks,
per byte, the nearest codeword (one small matrix product per byte).

Stored: the pca codec's tables (``buckets.json``, ``rotation.npy``) plus ``codebooks.npy``:
``(bytes per token, 256, m)`` float32, ``m`` the most components a byte holds; byte ``p``'s
codebook is ``[p, :2**bits_p, :m_p]``, the rest zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .codec import nearest_centroids
from .transform import TransformCodec

__all__ = ["VQTransformCodec", "VQ_ITERS", "byte_layout"]

VQ_ITERS = 12
"""Lloyd iterations of each byte's codebook (from the product grid of the scalar levels)."""

_CHUNK = 16384


def byte_layout(codec: TransformCodec) -> list[tuple[int, int, int]]:
    """Per byte position of ``codec``'s packing: ``(first component, end component, bits used)``."""
    out = []
    for p in range(codec.bytes_per_token):
        comps = np.flatnonzero(codec._byte == p)
        if len(comps) == 0:
            out.append((codec.coded, codec.coded, 0))
        else:
            out.append((int(comps[0]), int(comps[-1]) + 1, int(codec.widths[comps].sum())))
    return out


def _nearest(z: np.ndarray, book: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Nearest rows of ``book`` (squared norms ``norms``, +inf for unused rows) to each row of ``z``."""
    nearest: np.ndarray = np.argmin(norms[None, :] - 2.0 * (z @ book.T), axis=1)
    return nearest


@dataclass
class VQTransformCodec(TransformCodec):
    """The pca codec with a trained codebook per byte position (see the module docstring).

    ``codebooks``: ``(bytes_per_token, 256, m)``; byte p's codewords are the first
    ``2**bits_p`` rows of ``codebooks[p]``, their first ``m_p`` columns (its components,
    in packing order)."""

    codebooks: np.ndarray = field(default_factory=lambda: np.zeros((0, 256, 1), dtype=np.float32))

    transform = "pca-vq"

    def tables_nbytes(self) -> int:
        """Bytes of the codec's array files beside the centroids: the rotation and the codebooks."""
        return int(self.rotation.nbytes + self.codebooks.nbytes)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.codebooks = np.ascontiguousarray(self.codebooks, dtype=np.float32)
        layout = byte_layout(self)
        width = max((c1 - c0 for c0, c1, _ in layout), default=1)
        if self.codebooks.shape != (self.bytes_per_token, 256, width):
            raise ValueError(f"codebooks of shape {self.codebooks.shape} do not fit the component widths (expected {(self.bytes_per_token, 256, width)})")
        if not np.isfinite(self.codebooks).all():
            raise ValueError("codebooks hold NaN or infinite values")
        segments = []
        for b0, b1, c0, c1, _lut, base in self._segments:  # same layout, codewords instead of products of scalar levels
            m = (c1 - c0) // (b1 - b0)
            segments.append((b0, b1, c0, c1, np.ascontiguousarray(self.codebooks[b0:b1, :, :m].reshape((b1 - b0) * 256, m)), base))
        self._segments = segments
        self._books = []  # per byte: (first component, last component, codewords (K, m), squared norms)
        for p, (c0, c1, bits) in enumerate(layout):
            book = self.codebooks[p, : 1 << bits, : c1 - c0]
            self._books.append((c0, c1, book, np.einsum("ij,ij->i", book, book)))

    def byte_layout(self) -> list[tuple[int, int, int]]:
        """Per byte position: ``(first component, end component, bits used)`` (components in packing order)."""
        return byte_layout(self)

    @classmethod
    def train(cls, heldout: np.ndarray, centroids: np.ndarray, nbits: int, iters: int = VQ_ITERS) -> "VQTransformCodec":
        """The pca codec's rotation, widths and scalar tables, then per byte a k-means codebook
        on the held-out residuals' components of that byte, started from the scalar product grid."""
        base = TransformCodec.train(heldout, centroids, nbits)
        residuals = heldout - np.take(centroids, nearest_centroids(heldout, centroids), axis=0)
        z = np.ascontiguousarray((residuals @ base.rotation[:, : base.coded]).astype(np.float32))
        layout = byte_layout(base)
        width = max((c1 - c0 for c0, c1, _ in layout), default=1)
        books = np.zeros((base.bytes_per_token, 256, width), dtype=np.float32)
        grid: dict[int, np.ndarray] = {}
        for b0, b1, c0, c1, lut, _ in base._segments:
            m = (c1 - c0) // (b1 - b0)
            for i in range(b1 - b0):
                grid[b0 + i] = lut.reshape(b1 - b0, 256, m)[i]
        for p, (c0, c1, bits) in enumerate(layout):
            if not bits:
                continue
            count, x = 1 << bits, z[:, c0:c1]
            book = grid[p][:count].astype(np.float32).copy()  # the product of the scalar levels: Lloyd starts from it
            for _ in range(iters):
                ids = _nearest(x, book, np.einsum("ij,ij->i", book, book))
                counts = np.bincount(ids, minlength=count)
                sums = np.stack([np.bincount(ids, weights=x[:, j], minlength=count) for j in range(c1 - c0)], axis=1)
                book = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], book).astype(np.float32)
            books[p, :count, : c1 - c0] = book
        return cls(
            nbits=base.nbits,
            dim=base.dim,
            rotation=base.rotation,
            widths=base.widths,
            cutoffs=base.cutoffs,
            weights=base.weights,
            means=base.means,
            avg_residual=base.avg_residual,
            codebooks=books,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any], rotation: np.ndarray, codebooks: np.ndarray | None = None) -> "VQTransformCodec":
        """Inverse of :meth:`to_json` plus ``codebooks.npy``; ValueError when the tables do not fit."""
        base = TransformCodec.from_json(data, rotation)
        if codebooks is None:
            raise ValueError("a pca-vq codec needs its codebooks")
        return cls(base.nbits, base.dim, base.rotation, base.widths, base.cutoffs, base.weights, base.means, base.avg_residual, codebooks)

    def compress(self, x: np.ndarray, centroids: np.ndarray, codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, packed bytes (n, dim*nbits/8) uint8)``: per byte the nearest codeword's index."""
        codes = nearest_centroids(x, centroids) if codes is None else codes
        out = np.zeros((len(x), self.bytes_per_token), dtype=np.uint8)
        for start in range(0, len(x), _CHUNK):
            part = slice(start, start + _CHUNK)
            z = ((x[part] - np.take(centroids, codes[part], axis=0)) @ self.rotation[:, : self.coded]).astype(np.float32)
            for p, (c0, c1, book, norms) in enumerate(self._books):
                if c1 > c0:
                    out[part, p] = _nearest(z[:, c0:c1], book, norms)
        return codes, out
