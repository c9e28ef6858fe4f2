"""The vectorized builder produces the arrays ``bm25s.BM25.index`` produces."""

from __future__ import annotations

import numpy as np
import pytest

from memcore_bm25.bm25_build import build_retriever
from memcore_bm25.bm25_scoring import Scorer
from memcore_bm25.bm25_tokenizer import doc_terms


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_same_arrays_as_bm25s_index(method):
    import bm25s

    rng = np.random.default_rng(3)
    n_vocab = 400  # the last 40 ids occur in no document (df = 0)
    p = 1.0 / np.arange(1, n_vocab - 40 + 1) ** 1.1
    p /= p.sum()
    corpus = [rng.choice(n_vocab - 40, size=int(m), p=p).tolist() for m in rng.integers(0, 60, size=300)]
    corpus[7] = []  # a document without terms
    vocabulary = {f"t{i}": i for i in range(n_vocab)}
    scorer = Scorer(method, k1=1.3, b=0.7, delta=0.6)

    expected = bm25s.BM25(k1=1.3, b=0.7, delta=0.6, method=method)
    expected.index((corpus, dict(vocabulary)), create_empty_token=False, show_progress=False)

    docs = [doc_terms(doc) for doc in corpus]
    terms = np.concatenate([d.terms for d in docs]).astype(np.int32)
    tfs = np.concatenate([d.tfs for d in docs]).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum([d.terms.size for d in docs])]).astype(np.int64)
    got, tf_columns = build_retriever(terms, tfs, offsets, vocabulary, scorer)

    for key in ("indices", "indptr"):
        np.testing.assert_array_equal(got.scores[key], expected.scores[key])
    assert got.scores["data"].dtype == expected.scores["data"].dtype == np.float32
    np.testing.assert_allclose(got.scores["data"], expected.scores["data"], rtol=1e-6, atol=1e-7)
    assert got.scores["num_docs"] == expected.scores["num_docs"] == 300
    if expected.nonoccurrence_array is None:
        assert got.nonoccurrence_array is None
    else:
        np.testing.assert_allclose(got.nonoccurrence_array, expected.nonoccurrence_array, rtol=1e-6)
    assert got.vocab_dict == vocabulary
    # tf_columns: the count of each (document, term) entry, in the matrix's order
    rows = np.asarray(got.scores["indices"])
    cols = np.repeat(np.arange(n_vocab), np.diff(got.scores["indptr"]))
    assert [corpus[r].count(c) for r, c in zip(rows.tolist(), cols.tolist())] == tf_columns.astype(int).tolist()
    query = [3, 3, 17, 250, 399]
    np.testing.assert_allclose(got.get_scores_from_ids(query), expected.get_scores_from_ids(query), rtol=1e-5, atol=1e-6)
