"""A float16 copy of the mirror's directions that narrows the exact cone, with a certificate.

The exact cone (step 1) is the top ``k`` cosines over every held direction. Scanning the
float32 directions (100k x 64: 25.6 MB) is most of a search. :class:`Fp16Prescan` scans a
float16 copy instead (faiss' ``IndexScalarQuantizer`` ``QT_fp16``, half the bytes, ~40%
less time), keeps the best ``k + margin`` rows by that approximate cosine, and re-scores
only those exactly in float32 (the same faiss kernel as the full scan). The result is the
exact cone, or nothing:

- every direction is a unit float32 vector and float16 keeps 11 significant bits, so a
  row's float16 copy is within ``2^-10`` of it (one unit in the last place, whatever the
  rounding), and ``|q·x - q·x16| <= |x - x16| <= 2^-10`` for a unit query ``q``; with the
  float32 rounding of both sums, :data:`ERROR_BOUND` (``2^-10 + 1e-5``) bounds the error;
- a row the pre-scan did not keep has an approximate cosine of at most the last kept one,
  ``a_last``, so an exact cosine of at most ``a_last + ERROR_BOUND``;
- so when ``a_last + ERROR_BOUND`` is below the ``k``-th exact cosine among the kept rows
  (plus the rows the copy does not hold, scored exactly), no row left out can enter the
  top ``k``: that top ``k`` is the exact cone (**certified**). Otherwise (close scores at
  the border, exact ties) :meth:`Fp16Prescan.cone` returns None and the caller scans
  everything in float32, as before.

The copy is built from the mirror's directions on first use (~60 ms at 100k) and not
rewritten on each write: the mirror reports the rows it writes (:meth:`touch`), those
rows and the rows appended since the build are scored exactly on every search, and the
copy is rebuilt once they exceed :func:`rebuild_limit` (``max(1024, n/32)`` rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Fp16Prescan", "ERROR_BOUND", "MIN_ROWS", "margin", "rebuild_limit"]

ERROR_BOUND = 2.0**-10 + 1e-5
"""Bound on ``|q·x - q·x16|`` for unit float32 ``q``, ``x`` (float16 copy ``x16``), float32 sums."""

MIN_ROWS = 8192
"""Below this many rows the float32 scan is cheap (< ~50 µs): no pre-scan."""


def margin(k: int) -> int:
    """Rows kept by the pre-scan beyond ``k``: ``max(16, k/8)`` (the border's gap at
    cone 50-500 on 100k clustered points is 4-10x the error bound)."""
    return max(16, k // 8)


def rebuild_limit(n: int) -> int:
    """Rows written since the build past which the copy is rebuilt: ``max(1024, n/32)``."""
    return max(1024, n // 32)


class Fp16Prescan:
    """The float16 copy of rows ``[0, built)`` of a mirror's directions, and the rows
    written since (scored exactly until the next build)."""

    def __init__(self, directions: np.ndarray, faiss: Any):
        self._faiss = faiss
        self.built = int(directions.shape[0])
        self.index = faiss.IndexScalarQuantizer(int(directions.shape[1]), faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        self.index.add(np.ascontiguousarray(directions, dtype=np.float32))
        self._dirty: set[int] = set()  # rows < built whose copy no longer matches the mirror
        self.certified = 0  # cones answered from the pre-scan
        self.refused = 0  # cones whose certificate failed (scanned in float32 by the caller)

    def touch(self, row: int) -> None:
        """The mirror wrote (or moved a particle into) ``row``."""
        if row < self.built:
            self._dirty.add(row)

    def stale(self, n: int) -> bool:
        """True when the rows to score exactly (written since the build) call for a rebuild."""
        return len(self._dirty) + max(0, n - self.built) > rebuild_limit(n)

    def cone(self, q: np.ndarray, directions: np.ndarray, k: int, knn: Any) -> np.ndarray | None:
        """The rows of the ``k`` highest cosines to the unit query ``q`` (1, d) among
        ``directions`` (the mirror's (n, d), rows ``[0, built)`` as copied), best first;
        None when the certificate fails (then scan everything exactly)."""
        n = directions.shape[0]
        held = min(self.built, n)
        excluded = len(self._dirty) + (self.built - held)  # rows of the copy to ignore
        want = min(held, k + margin(k) + excluded)
        approx, found = self.index.search(q, want)
        approx, found = approx[0], found[0]
        keep = (found >= 0) & (found < n)
        if self._dirty:
            keep &= ~np.isin(found, np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty)))
        rows = found[keep]
        extra = [np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty))] if self._dirty else []
        if n > self.built:
            extra.append(np.arange(self.built, n, dtype=np.int64))
        if extra:
            rows = np.concatenate([rows, *[e[e < n] for e in extra]])
        kk = min(k, len(rows))
        if kk == 0:
            self.refused += 1
            return None
        exact, picked = knn(q, directions[rows], kk)
        best: np.ndarray = rows[picked[0][picked[0] >= 0]]
        if want < held and (kk < k or not approx[-1] + ERROR_BOUND < exact[0][kk - 1]):
            self.refused += 1
            return None
        self.certified += 1  # (want >= held: the pre-scan returned every held row, nothing was left out)
        return best
