"""Building a bm25s index from term counts, vectorized.

``bm25s.BM25.index`` counts tokens and scores documents in Python loops (about 2.5 s for
100,000 documents of 70 words here), which a merge of the ``bm25`` index would pay on the
search that triggers it. :func:`build_retriever` computes the very same arrays with numpy —
IDF per term and term-frequency component per entry with bm25s's own scoring functions, in
the same dtypes, the same column-major layout as bm25s's numpy CSC backend — and puts them
into a ``bm25s.BM25`` object, which then searches, saves and loads as any bm25s index.
``tests/test_bm25_build.py`` checks the arrays against ``BM25.index`` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np
import numpy.typing as npt

from .bm25_scoring import Scorer

if TYPE_CHECKING:
    import bm25s

__all__ = ["build_retriever", "doc_lengths"]


def doc_lengths(tfs: np.ndarray, offsets: np.ndarray) -> npt.NDArray[np.int64]:
    """Tokens per document of a CSR of term counts (``offsets`` has one entry more than documents)."""
    cumulative = np.concatenate([[0], np.cumsum(tfs, dtype=np.int64)])
    lengths: npt.NDArray[np.int64] = cumulative[offsets[1:]] - cumulative[offsets[:-1]]
    return lengths


def build_retriever(terms: np.ndarray, tfs: np.ndarray, offsets: np.ndarray, vocabulary: Mapping[str, int], scorer: Scorer) -> tuple[bm25s.BM25, np.ndarray]:
    """A ``bm25s.BM25`` over documents given as distinct term ids ``terms`` with counts
    ``tfs`` (document ``i`` owns entries ``offsets[i]:offsets[i+1]``), term ids from
    ``vocabulary`` (0..V-1). Returns ``(retriever, tf_columns)``: the term frequency of each
    entry of the retriever's sparse columns, aligned with ``scores["indices"]``.
    """
    import bm25s

    n_docs, n_vocab = offsets.shape[0] - 1, len(vocabulary)
    lengths = doc_lengths(tfs, offsets)
    avgdl = lengths.mean() if n_docs else np.float64(0.0)  # a numpy float64, as in bm25s
    df = np.bincount(terms, minlength=n_vocab)[:n_vocab]

    # IDF in float64 (what bm25s's non-occurrence array uses) and rounded to float32 (its idf_array)
    values, inverse = np.unique(df, return_inverse=True)
    idf64 = np.array([scorer.idf(int(v), n_docs) for v in values.tolist()], dtype=np.float64)[inverse.reshape(-1)]
    idf32 = idf64.astype(np.float32)

    order = np.argsort(terms, kind="stable")  # column-major; rows ascend within a column
    rows = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(offsets))[order]
    cols = terms[order]
    tf_columns = tfs[order].astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 when no document has a term
        tfc = scorer.tfc(tf_columns, lengths[rows].astype(np.float64), avgdl)
        values64 = idf32[cols] * tfc
        nonocc = None
        if scorer.uses_nonoccurrence:
            nonocc = (idf64 * float(scorer.tfc(0, avgdl, avgdl))).astype(np.float32)
            nonocc[df == 0] = 0.0
            values64 = values64 - nonocc[cols]
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=n_vocab), out=indptr[1:])

    retriever = bm25s.BM25(k1=scorer.k1, b=scorer.b, delta=scorer.delta, method=scorer.method)
    retriever.scores = {"data": values64.astype(np.float32), "indices": rows, "indptr": indptr, "num_docs": n_docs}
    retriever.vocab_dict = dict(vocabulary)
    retriever.unique_token_ids_set = set(retriever.vocab_dict.values())
    retriever.nonoccurrence_array = nonocc
    return retriever, tf_columns
