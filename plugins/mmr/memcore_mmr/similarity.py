"""Similarities between candidates, and between the query and candidates.

Cosine of the stored vectors where both sides have one; token Jaccard where a side has no
vector in the space (:mod:`memcore_mmr.tokens`). One column (one candidate against all) is
computed at a time, with matrix operations.
"""

from __future__ import annotations

import numpy as np

from .tokens import TokenSets, tokenize

__all__ = ["CandidateSimilarity", "unit_rows"]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float64); all-zero rows stay zero."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True) if matrix.size else np.zeros((matrix.shape[0], 1))
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


class CandidateSimilarity:
    """Similarity of ``n`` candidates: ``vectors`` (n x d, rows of missing vectors ignored),
    ``present`` (which rows have a vector) and ``tokens`` (needed when some row has none)."""

    def __init__(self, vectors: np.ndarray, present: np.ndarray, tokens: TokenSets | None = None):
        self.present = np.asarray(present, dtype=bool)
        self.n = self.present.shape[0]
        self.unit = unit_rows(vectors) if self.present.any() else np.zeros((self.n, 0))
        self.fallback = ~self.present
        if self.fallback.any() and tokens is None:
            raise ValueError("token sets are needed when some candidate has no vector")
        self.tokens = tokens

    def _token_sets(self) -> TokenSets:
        """The token sets, which ``__init__`` guarantees whenever some candidate has no vector."""
        if self.tokens is None:
            raise ValueError("token sets are needed when some candidate has no vector")
        return self.tokens

    def column(self, j: int) -> np.ndarray:
        """Similarity of candidate ``j`` to every candidate (cosine, or Jaccard where a vector is missing)."""
        if not self.present[j]:
            return self._token_sets().column(j)
        col: np.ndarray = self.unit @ self.unit[j]
        if self.fallback.any():
            col[self.fallback] = self._token_sets().column(j)[self.fallback]
        return col

    def to_query(self, query_vector: np.ndarray | None, query_text: str | None) -> np.ndarray:
        """Relevance of every candidate: cosine to ``query_vector`` where the candidate has a
        vector, Jaccard to the query's tokens where it has none."""
        rel = np.zeros(self.n)
        if self.present.any():
            if query_vector is None:
                raise ValueError("a query vector is needed when some candidate has a vector")
            q = unit_rows(np.asarray(query_vector, dtype=np.float64)[None, :])[0]
            rel[self.present] = self.unit[self.present] @ q
        if self.fallback.any():
            rel[self.fallback] = self._token_sets().to_tokens(tokenize(query_text))[self.fallback]
        return rel
