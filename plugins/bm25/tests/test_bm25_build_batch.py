"""Documents are counted in one batch: the same terms, counts and lengths as one by one."""

from __future__ import annotations

import numpy as np

from memcore_bm25.bm25_tokenizer import batch_doc_terms, doc_terms


def test_batch_counting_equals_per_document_counting():
    rng = np.random.default_rng(1)
    docs = [list(rng.integers(0, 50, rng.integers(0, 30))) for _ in range(300)] + [[], [3, 3, 3], [10**6, 0]]
    batch = batch_doc_terms(docs)
    assert len(batch) == len(docs)
    for doc, got in zip(docs, batch):
        want = doc_terms(doc)
        assert got.terms.tolist() == want.terms.tolist()
        assert got.tfs.tolist() == want.tfs.tolist()
        assert got.length == want.length == len(doc)
        assert got.terms.dtype == np.int32 and got.tfs.dtype == np.int32
    assert batch_doc_terms([]) == []
    assert [d.length for d in batch_doc_terms([[], []])] == [0, 0]
