"""Token sets and vectorised Jaccard similarities: the fallback for records without a vector.

Tokens are the lowercase ``\\w+`` runs of a text (:func:`memcore.retrieval.tokenize`, the
tokens of the builtin ``rerank`` stage); J(A, B) = |A & B| / |A | B| (0 when both are empty).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from memcore.plugin import tokenize as _tokens

__all__ = ["tokenize", "TokenSets"]


def tokenize(text: str | None) -> set[str]:
    """The set of lowercase ``\\w+`` tokens of ``text`` (empty for None)."""
    return set(_tokens(text))


class TokenSets:
    """The token sets of ``n`` texts, stored flat (row, token) so that the Jaccard
    similarities of one set to all ``n`` cost one ``bincount`` (no loop over pairs)."""

    def __init__(self, texts: Sequence[str | None]):
        self.vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for row, text in enumerate(texts):
            ids = sorted({self.vocab.setdefault(t, len(self.vocab)) for t in tokenize(text)})
            rows.extend([row] * len(ids))
            cols.extend(ids)
        self.n = len(texts)
        self._rows = np.asarray(rows, dtype=np.intp)
        self._cols = np.asarray(cols, dtype=np.intp)
        self.sizes = np.bincount(self._rows, minlength=self.n).astype(np.float64)
        self._starts = np.concatenate(([0], np.cumsum(self.sizes).astype(np.intp)))

    def _jaccard(self, token_ids: np.ndarray, size: float) -> np.ndarray:
        member = np.zeros(len(self.vocab), dtype=np.float64)
        member[token_ids] = 1.0
        inter = np.bincount(self._rows, weights=member[self._cols], minlength=self.n)
        union = self.sizes + size - inter
        return np.divide(inter, union, out=np.zeros(self.n), where=union > 0)

    def column(self, row: int) -> np.ndarray:
        """Jaccard similarity of text ``row`` to every text (length ``n``)."""
        ids = self._cols[self._starts[row] : self._starts[row + 1]]
        return self._jaccard(ids, float(self.sizes[row]))

    def to_tokens(self, tokens: Iterable[str]) -> np.ndarray:
        """Jaccard similarity of an outside token set (e.g. the query's) to every text."""
        tokens = set(tokens)
        ids = np.asarray([self.vocab[t] for t in tokens if t in self.vocab], dtype=np.intp)
        return self._jaccard(ids, float(len(tokens)))
