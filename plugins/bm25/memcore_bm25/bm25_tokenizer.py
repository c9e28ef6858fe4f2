"""Tokenization of the ``bm25`` index: bm25s's tokenizer with a persisted vocabulary.

Documents and queries go through the same :class:`bm25s.tokenization.Tokenizer` (the
regex ``(?u)\\b\\w\\w+\\b``, lowercasing, stopwords removed before stemming, an optional
PyStemmer stemmer), so a query term matches exactly the documents a fresh bm25s index
built with ``bm25s.tokenize(texts, stopwords=..., stemmer=...)`` would match.

Term ids are assigned in first-seen order and never reused; :meth:`BM25Tokenizer.terms`
lists them in id order, which is what the index persists.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from memcore.plugin import ConfigError

__all__ = ["BM25Tokenizer", "STOPWORD_LISTS", "DocTerms", "doc_terms"]

STOPWORD_LISTS = frozenset(
    {
        "en",
        "english",
        "en_plus",
        "english_plus",
        "de",
        "german",
        "nl",
        "dutch",
        "fr",
        "french",
        "es",
        "spanish",
        "pt",
        "portuguese",
        "it",
        "italian",
        "ru",
        "russian",
        "sv",
        "swedish",
        "no",
        "norwegian",
        "zh",
        "chinese",
        "tr",
        "turkish",
        "ko",
        "korean",
        "da",
        "danish",
    }
)
"""Names of the stopword lists bm25s ships (``stopwords = "en"`` ...)."""

_CACHE_LIMIT = 200_000


class DocTerms:
    """One tokenized document: its distinct term ids, their counts, and its length."""

    __slots__ = ("terms", "tfs", "length")

    def __init__(self, terms: np.ndarray, tfs: np.ndarray, length: int | None = None):
        self.terms = terms
        self.tfs = tfs
        self.length = int(tfs.sum()) if length is None else length


def doc_terms(token_ids: Sequence[int] | np.ndarray) -> DocTerms:
    """Count a token-id sequence into distinct terms (ascending) and term frequencies."""
    if len(token_ids) == 0:
        return DocTerms(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))
    terms, tfs = np.unique(np.asarray(token_ids, dtype=np.int32), return_counts=True)
    return DocTerms(terms.astype(np.int32, copy=False), tfs.astype(np.int32, copy=False))


def batch_doc_terms(docs: Sequence[Sequence[int]]) -> list[DocTerms]:
    """:func:`doc_terms` of many documents with one sort: (document, term) pairs are
    counted together, then sliced per document (one ``np.unique`` per document costs
    more than the tokenizing on short texts)."""
    n = len(docs)
    if n == 0:
        return []
    lengths = np.fromiter(map(len, docs), dtype=np.int64, count=n)
    total = int(lengths.sum())
    if total == 0:
        return [doc_terms(()) for _ in range(n)]
    flat = np.fromiter(itertools.chain.from_iterable(docs), dtype=np.int64, count=total)
    width = int(flat.max()) + 1
    keys = np.repeat(np.arange(n, dtype=np.int64), lengths) * width + flat
    pairs, counts = np.unique(keys, return_counts=True)
    owner = pairs // width
    terms = (pairs - owner * width).astype(np.int32)
    counts = counts.astype(np.int32)
    bounds = np.searchsorted(owner, np.arange(n + 1, dtype=np.int64)).tolist()
    sizes = lengths.tolist()
    return [DocTerms(terms[bounds[i] : bounds[i + 1]], counts[bounds[i] : bounds[i + 1]], sizes[i]) for i in range(n)]


class BM25Tokenizer:
    """Text -> term ids, identical for documents and queries.

    ``stopwords``: a bm25s list name (``"en"``...), a list of words, or None;
    ``stemmer``: a PyStemmer algorithm name (``"english"``...) or None.
    """

    def __init__(self, stopwords: str | Sequence[str] | None, stemmer: str | None):
        from bm25s.tokenization import Tokenizer

        stem = None
        if stemmer is not None:
            import Stemmer

            if stemmer not in Stemmer.algorithms():
                raise ConfigError(f"unknown stemmer {stemmer!r}; PyStemmer offers: {', '.join(Stemmer.algorithms())} (or none)")
            stem = Stemmer.Stemmer(stemmer)
        if stopwords is None:
            words: str | list[str] | None = None
        elif isinstance(stopwords, str):
            words = stopwords
        else:
            words = [w.lower() for w in stopwords]
        self._stemmed = stem is not None
        self._tokenizer = Tokenizer(lower=True, stopwords=words, stemmer=stem)

    def _vocab(self) -> dict[str, int]:
        vocab: dict[str, int] = self._tokenizer.get_vocab_dict()
        return vocab

    @property
    def vocab_size(self) -> int:
        """Number of distinct terms seen in documents."""
        return len(self._vocab())

    def vocabulary(self) -> dict[str, int]:
        """A copy of the term -> id mapping."""
        return dict(self._vocab())

    def terms(self) -> list[str]:
        """Every term, in id order (ids are 0..vocab_size-1)."""
        out = [""] * self.vocab_size
        for term, tid in self._vocab().items():
            out[tid] = term
        return out

    def set_terms(self, terms: Sequence[str]) -> None:
        """Replace the vocabulary with ``terms`` (term i gets id i), as :meth:`terms` returned it."""
        vocab = {term: i for i, term in enumerate(terms)}
        if len(vocab) != len(terms):
            raise ValueError("the vocabulary repeats a term")
        self._tokenizer.reset_vocab()
        if self._stemmed:
            self._tokenizer.stem_to_sid = vocab
        else:
            self._tokenizer.word_to_id = vocab

    def documents(self, texts: Sequence[str]) -> list[DocTerms]:
        """Tokenize documents, adding their new terms to the vocabulary."""
        # streaming_tokenize is what Tokenizer.tokenize runs, without its progress-bar wrapper
        stream = self._tokenizer.streaming_tokenize(list(texts), update_vocab=True, allow_empty=False)
        return batch_doc_terms(list(stream))

    def queries(self, texts: Sequence[str]) -> list[list[int]]:
        """Term ids of each query, repeats kept (bm25s counts a repeated query word twice);
        words not in the vocabulary are dropped."""
        ids = list(self._tokenizer.streaming_tokenize(list(texts), update_vocab=False, allow_empty=False))
        self._trim_caches()
        return ids

    def _trim_caches(self) -> None:
        # bm25s caches word -> stem and word -> id for every word it meets, queries
        # included; both are pure caches of ``stem_to_sid`` when stemming, so drop them
        # before a long-running process's stream of query words makes them large.
        tok = self._tokenizer
        if self._stemmed and len(tok.word_to_stem) > _CACHE_LIMIT + 4 * len(tok.stem_to_sid):
            tok.word_to_stem = {}
            tok.word_to_id = {}
