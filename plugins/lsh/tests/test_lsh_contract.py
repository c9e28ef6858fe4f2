"""The ``lsh`` index passes memcore's IndexContract, in several configurations."""

from __future__ import annotations

import pytest

from memcore.testing import IndexContract
from memcore_lsh import LSHIndex, LSHIndexConfig

CONFIGS = {
    "default": {},
    "buckets-only": {"exact_filter_below": 0},
    "one-table-no-probe": {"tables": 1, "bits": 4, "multi_probe": 0, "exact_filter_below": 0},
    "probes-capped": {"bits": 8, "multi_probe": 2, "probes": 5, "max_candidates": 12, "exact_filter_below": 0},
    "fallback": {"bits": 16, "multi_probe": 0, "fallback_exact": True, "exact_filter_below": 0},
}


class TestLSHIndex(IndexContract):
    @pytest.fixture(params=sorted(CONFIGS))
    def make_index(self, request):
        config = LSHIndexConfig(**CONFIGS[request.param])
        return lambda context: LSHIndex(config, context)


class TestLSHIndexHamming(IndexContract):
    """Without re-ranking (and without stored vectors): scores are the SimHash estimate.

    The self match still ranks first: its code equals the query's (Hamming distance 0) and
    the 30 random 16-d records of the suite have distinct 64-bit codes.
    """

    @pytest.fixture(params=[True, False], ids=["vectors", "codes-only"])
    def make_index(self, request):
        config = LSHIndexConfig(rerank=False, store_vectors=request.param, bits=16, tables=4, exact_filter_below=0)
        return lambda context: LSHIndex(config, context)


class TestLSHIndexQueryMode(IndexContract):
    """Every query carries a mode in ``extras["lsh"]``."""

    query_extras = {"lsh": {"multi_probe": 2, "probes": 3, "fallback_exact": True}}
    dim = 24
    space_names = ("dense",)

    @pytest.fixture
    def make_index(self):
        config = LSHIndexConfig(space="dense", bits=10, multi_probe=0, exact_filter_below=0)
        return lambda context: LSHIndex(config, context)
