"""The ``bm25`` index passes memcore's IndexContract, in several configurations."""

from __future__ import annotations

import pytest

from memcore.testing import IndexContract

from memcore_bm25.bm25 import BM25Config, BM25Index

CONFIGS = {
    "default": {},
    # a merge every few changes: the contract then runs through merges, tombstones and
    # the rescaled (between-merges) scoring path
    "tiny-merges": {"merge_threshold": 3},
    "bm25plus-no-stem": {"method": "bm25+", "stemmer": "none", "stopwords": "none"},
    "bm25l-merges": {"method": "bm25l", "merge_threshold": 4},
    "robertson": {"method": "robertson", "k1": 1.5, "b": 0.5},
}


class TestBM25IndexContract(IndexContract):
    @pytest.fixture(params=sorted(CONFIGS))
    def make_index(self, request):
        config = BM25Config(**CONFIGS[request.param])
        return lambda context: BM25Index(config, context)
