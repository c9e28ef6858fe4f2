"""Random-hyperplane hashing (SimHash): vectors -> one ``bits``-bit code per table.

Bit ``j`` of table ``t`` is 1 when the vector lies on the positive side of hyperplane
``t * bits + j`` (a standard-normal direction). Two vectors at angle ``θ`` agree on a bit
with probability ``1 - θ/π`` (Charikar 2002), so near vectors tend to share codes.
Codes are ``uint64`` (bit ``j`` = ``1 << j``); a table is one column of the code matrix.

Multi-probe: the buckets near the query's own are the codes at small Hamming distance.
:class:`ProbePlan` enumerates them (XOR masks up to a radius) and, when a probe budget is
given, keeps for each query the masks whose flipped hyperplanes have the smallest margins
``|q·h|`` (query-directed probing, Lv et al. 2007): the buckets a near neighbour most likely
fell into.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np

__all__ = ["Hyperplanes", "ProbePlan", "popcount", "normalize_rows"]


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]
    unit: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit


if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def popcount(values: np.ndarray) -> np.ndarray:
        """Number of set bits of each uint64 element (as uint8)."""
        counts: np.ndarray = np.bitwise_count(values)
        return counts

else:  # pragma: no cover - numpy 1.26
    _BYTE_COUNTS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def popcount(values: np.ndarray) -> np.ndarray:
        """Number of set bits of each uint64 element (as uint8)."""
        values = np.ascontiguousarray(values, dtype=np.uint64)
        counts: np.ndarray = _BYTE_COUNTS[values.view(np.uint8)].reshape(*values.shape, 8).sum(axis=-1, dtype=np.uint8)
        return counts


class Hyperplanes:
    """``tables * bits`` hyperplanes through the origin, as a ``(dim, tables * bits)`` float32 matrix."""

    def __init__(self, planes: np.ndarray, tables: int, bits: int):
        planes = np.ascontiguousarray(planes, dtype=np.float32)
        if planes.ndim != 2 or planes.shape[1] != tables * bits:
            raise ValueError(f"hyperplane matrix has shape {planes.shape}, expected (dim, {tables * bits})")
        self.planes = planes
        self.tables = tables
        self.bits = bits
        self.dim = planes.shape[0]
        self._shifts = np.arange(bits, dtype=np.uint64)

    @classmethod
    def random(cls, dim: int, tables: int, bits: int, seed: int) -> "Hyperplanes":
        """Standard-normal hyperplanes drawn from ``numpy.random.default_rng(seed)``."""
        rng = np.random.default_rng(seed)
        return cls(rng.standard_normal((dim, tables * bits), dtype=np.float32), tables, bits)

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Signed distances to every hyperplane: ``(n, tables, bits)``."""
        projections: np.ndarray = (vectors @ self.planes).reshape(vectors.shape[0], self.tables, self.bits)
        return projections

    def codes(self, projections: np.ndarray) -> np.ndarray:
        """The ``(n, tables)`` uint64 codes of projections from :meth:`project` (bit = positive side)."""
        n = projections.shape[0]
        signs = np.packbits(projections > 0, axis=2, bitorder="little")  # (n, tables, ceil(bits / 8)) bytes
        out = np.zeros((n, self.tables, 8), dtype=np.uint8)
        out[:, :, : signs.shape[2]] = signs
        return out.view("<u8").reshape(n, self.tables).astype(np.uint64, copy=False)

    def pack_signs(self, projections: np.ndarray) -> np.ndarray:
        """``pack(codes(projections))`` straight from the signs (the query path)."""
        n = projections.shape[0]
        return _pack_bits(np.packbits((projections > 0).reshape(n, -1), axis=1, bitorder="little"), self.words)

    @property
    def words(self) -> int:
        """64-bit words of a packed full code."""
        return -(-self.tables * self.bits // 64)

    def hash(self, vectors: np.ndarray) -> np.ndarray:
        """``codes(project(vectors))``."""
        return self.codes(self.project(vectors))

    def pack(self, codes: np.ndarray) -> np.ndarray:
        """The ``tables * bits`` code bits of each row, packed densely into ``(n, words)`` uint64.

        Per-table codes use ``bits`` of their 64; packed, a full-code Hamming distance reads
        ``ceil(tables * bits / 64)`` words instead of ``tables``.
        """
        n = codes.shape[0]
        bits = ((codes[:, :, None] >> self._shifts) & np.uint64(1)).astype(np.uint8).reshape(n, self.tables * self.bits)
        return _pack_bits(np.packbits(bits, axis=1, bitorder="little"), self.words)


def _pack_bits(packed: np.ndarray, words: int) -> np.ndarray:
    """Rows of little-endian bit bytes (from ``numpy.packbits``) as ``(n, words)`` uint64."""
    out = np.zeros((packed.shape[0], words * 8), dtype=np.uint8)
    out[:, : packed.shape[1]] = packed
    return out.view("<u8").astype(np.uint64, copy=False)


@lru_cache(maxsize=32)
def _masks(bits: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """XOR masks of every code within ``radius`` of another (0 first, then by weight) and their bit matrix."""
    rows: list[tuple[int, ...]] = [()]
    for weight in range(1, min(radius, bits) + 1):
        rows.extend(combinations(range(bits), weight))
    matrix = np.zeros((len(rows), bits), dtype=np.float32)
    masks = np.zeros(len(rows), dtype=np.uint64)
    for i, flipped in enumerate(rows):
        for j in flipped:
            matrix[i, j] = 1.0
            masks[i] |= np.uint64(1) << np.uint64(j)
    masks.setflags(write=False)
    matrix.setflags(write=False)
    return masks, matrix


class ProbePlan:
    """Which buckets to visit per table: the query's own plus perturbations within ``radius``.

    With ``probes`` set, only that many perturbations per table (the likeliest, by the sum
    of the margins ``|q·h|`` of the flipped hyperplanes) are visited.
    """

    def __init__(self, bits: int, radius: int, probes: int | None):
        self.bits = bits
        self.radius = radius
        masks, matrix = _masks(bits, radius)
        self._masks = masks
        self._others = masks[1:]
        self._matrix = matrix[1:]
        self.probes = None if probes is None or probes >= len(self._others) else probes

    @property
    def per_table(self) -> int:
        """Buckets visited per table and query (the query's own included)."""
        return 1 + (len(self._others) if self.probes is None else self.probes)

    def keys(self, codes: np.ndarray, projections: np.ndarray) -> np.ndarray:
        """Bucket keys to look up: ``(n, tables, per_table)`` uint64, the query's own code first."""
        if self.probes is None:
            every: np.ndarray = codes[:, :, None] ^ self._masks[None, None, :]
            return every
        n, tables, bits = projections.shape
        cost = np.abs(projections).reshape(n * tables, bits) @ self._matrix.T  # margin sum of each perturbation
        chosen = _smallest(cost, self.probes).reshape(n, tables, self.probes)
        keys = np.empty((*codes.shape, 1 + self.probes), dtype=np.uint64)
        keys[:, :, 0] = codes
        keys[:, :, 1:] = codes[:, :, None] ^ self._others[chosen]
        return keys


def _smallest(cost: np.ndarray, count: int) -> np.ndarray:
    """Column indices (ascending) of the ``count`` smallest entries of each row of a non-negative float32 matrix.

    Ties at the cut go to the lower column, so the choice is deterministic. A non-negative
    float32 orders like its bit pattern: one partition of the uint32 view gives each row's
    threshold (several times faster than ``argpartition`` on floats); the entries up to it
    are then read off with one ``flatnonzero``. Rows with several entries equal to their
    threshold (rare with real margins) are trimmed one by one.
    """
    rows, width = cost.shape
    bits = np.ascontiguousarray(cost).view(np.uint32)
    threshold = np.partition(bits, count - 1, axis=1)[:, count - 1 : count]
    chosen = bits <= threshold
    flat = np.flatnonzero(chosen)
    if flat.size != rows * count:  # every row has at least count: some have more
        extra = np.count_nonzero(chosen, axis=1) - count
        for r in np.flatnonzero(extra).tolist():
            at = np.flatnonzero(bits[r] == threshold[r, 0])
            chosen[r, at[at.size - int(extra[r]) :]] = False  # drop the highest columns at the threshold
        flat = np.flatnonzero(chosen)
    columns: np.ndarray = flat.reshape(rows, count) - (np.arange(rows, dtype=np.intp) * width)[:, None]
    return columns
