"""The memcore IndexContract applied to the faiss index, one class per family of factory."""

from __future__ import annotations

import pytest

from memcore.testing import IndexContract
from memcore_faiss import FaissIndexConfig
from memcore_faiss.index import FaissIndex


def maker(**options):
    config = FaissIndexConfig(**options)
    return lambda context: FaissIndex(config, context)


class TestFlat(IndexContract):
    """Exact search in all three metrics; allowed sets both scored exactly and pushed down."""

    @pytest.fixture(
        params=[
            {"metric": "cosine"},
            {"metric": "ip"},
            {"metric": "l2"},
            {"metric": "cosine", "exact_filter_below": 0},
            {"metric": "l2", "exact_filter_below": 0, "omp_threads": 1, "blas_min_queries": 2},
        ],
        ids=["cosine", "ip", "l2", "cosine-selector", "l2-selector-1thread-blas"],
    )
    def make_index(self, request):
        return maker(factory="Flat", **request.param)


class TestHNSW(IndexContract):
    """HNSW: no remove_ids in faiss, so removal goes through tombstones and compaction."""

    @pytest.fixture(
        params=[
            {"metric": "cosine"},
            {"metric": "l2", "ef_search": 64, "ef_construction": 80},
            {"metric": "ip", "exact_filter_below": 0, "compact_fraction": 1.0},
        ],
        ids=["cosine", "l2-ef64", "ip-selector-no-compaction"],
    )
    def make_index(self, request):
        return maker(factory="HNSW32", **request.param)


class TestIVF(IndexContract):
    """IVF4,Flat trains inside the tests (min_train 20 of the 30 records); nprobe 4 = all lists.

    Tests that add 10 records or fewer stay on the exact buffer, the others cross the
    training threshold in their first add.
    """

    @pytest.fixture(
        params=[
            {"metric": "cosine"},
            {"metric": "l2", "exact_filter_below": 0},
        ],
        ids=["cosine", "l2-selector"],
    )
    def make_index(self, request):
        return maker(factory="IVF4,Flat", min_train=20, nprobe=4, **request.param)


class TestIVFPQ(IndexContract):
    """IVF4,PQ4x4 (4 sub-quantizers of 16 centroids) on 16-d vectors, trained on 20 vectors."""

    @pytest.fixture
    def make_index(self):
        return maker(factory="IVF4,PQ4x4", min_train=20, nprobe=4, metric="l2")


class TestHNSWScalarQuantizer(IndexContract):
    """HNSW over 8-bit scalar-quantized storage: trainable and without remove_ids."""

    @pytest.fixture
    def make_index(self):
        return maker(factory="HNSW16_SQ8", min_train=20)


class TestPQ(IndexContract):
    """IndexPQ takes no SearchParameters: allowed sets fall back to over-fetch and filter."""

    @pytest.fixture
    def make_index(self):
        return maker(factory="PQ4x4", min_train=20, metric="ip", exact_filter_below=0)
