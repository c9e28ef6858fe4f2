"""BM25 formulas and the corpus statistics of the live documents.

:class:`Scorer` evaluates bm25s's own IDF and term-frequency functions
(``bm25s.scoring``) for one method, so a score computed here equals the number bm25s bakes
into its index for the same statistics. :class:`CorpusStats` keeps those statistics —
document frequency per term, number of documents, total length — for the documents the
index holds now, across both segments, updated on every add and remove.
"""

from __future__ import annotations

from typing import overload

import numpy as np

__all__ = ["Scorer", "CorpusStats", "NONOCCURRENCE_METHODS"]

NONOCCURRENCE_METHODS = frozenset({"bm25l", "bm25+"})
"""Methods whose score gives documents credit for query terms they lack (bm25s adds it at query time)."""


class Scorer:
    """The BM25 formula of one bm25s ``method`` with parameters ``k1``, ``b``, ``delta``."""

    def __init__(self, method: str, k1: float, b: float, delta: float):
        from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

        self.method = method
        self.k1 = k1
        self.b = b
        self.delta = delta
        self._idf = _select_idf_scorer(method)
        self._tfc = _select_tfc_scorer(method)
        self.uses_nonoccurrence = method in NONOCCURRENCE_METHODS

    def idf(self, df: int, n_docs: int) -> float:
        """Inverse document frequency; 0 for a term no document contains (as in bm25s)."""
        return float(self._idf(int(df), N=int(n_docs))) if df > 0 else 0.0

    @overload
    def tfc(self, tf: np.ndarray, lengths: np.ndarray, avgdl: float) -> np.ndarray: ...
    @overload
    def tfc(self, tf: float, lengths: float, avgdl: float) -> float: ...
    def tfc(self, tf: np.ndarray | float, lengths: np.ndarray | float, avgdl: float) -> np.ndarray | float:
        """Term-frequency component for term counts ``tf`` in documents of ``lengths``
        (arrays, or one count and length: then a numpy float)."""
        tfc: np.ndarray | float = self._tfc(tf_array=tf, l_d=lengths, l_avg=avgdl, k1=self.k1, b=self.b, delta=self.delta)
        return tfc

    def nonoccurrence(self, idf: float, avgdl: float) -> float:
        """Score a document gets for a query term it lacks (BM25L/BM25+), else 0."""
        if not self.uses_nonoccurrence:
            return 0.0
        return idf * float(self._tfc(tf_array=0, l_d=avgdl, l_avg=avgdl, k1=self.k1, b=self.b, delta=self.delta))


class CorpusStats:
    """Document frequencies, document count and total length of the live documents."""

    def __init__(self) -> None:
        self.df = np.zeros(0, dtype=np.int64)
        self.n_docs = 0
        self.total_length = 0
        self.version = 0
        """Bumped by every change of the statistics: what is computed from them (a term's
        scores in the fresh segment) is kept while it stays the same."""

    @property
    def avgdl(self) -> float:
        """Average document length (0 when empty)."""
        return self.total_length / self.n_docs if self.n_docs else 0.0

    def grow(self, vocab_size: int) -> None:
        """Make room for term ids below ``vocab_size``."""
        if vocab_size > self.df.shape[0]:
            grown = np.zeros(max(vocab_size, 2 * self.df.shape[0]), dtype=np.int64)
            grown[: self.df.shape[0]] = self.df
            self.df = grown

    def add(self, terms: np.ndarray, length: int) -> None:
        """Count one document with distinct ``terms`` and ``length`` tokens."""
        self.grow(int(terms.max()) + 1 if terms.size else 0)
        self.df[terms] += 1
        self.n_docs += 1
        self.total_length += length
        self.version += 1

    def remove(self, terms: np.ndarray, length: int) -> None:
        """Uncount a document previously added."""
        self.df[terms] -= 1
        self.n_docs -= 1
        self.total_length -= length
        self.version += 1

    def add_many(self, all_terms: np.ndarray, n_docs: int, total_length: int) -> None:
        """Count ``n_docs`` documents whose distinct terms, concatenated, are ``all_terms``."""
        if all_terms.size:
            counts = np.bincount(all_terms, minlength=0)
            self.grow(counts.shape[0])
            self.df[: counts.shape[0]] += counts
        self.n_docs += n_docs
        self.total_length += total_length
        self.version += 1

    def doc_freq(self, term: int) -> int:
        """Live documents containing ``term``."""
        return int(self.df[term]) if term < self.df.shape[0] else 0
