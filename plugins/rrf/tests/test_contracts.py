"""Every fusion of the plugin passes memcore's FusionContract, built directly and through the registry."""

from __future__ import annotations

import json

import pytest
from memcore import Collection
from memcore.testing import FusionContract, StageContract, build_stage

from memcore_rrf import (
    DBSFConfig,
    DistributionBasedFusion,
    ReciprocalRankFusion,
    RRFConfig,
    UnionConfig,
    UnionFusion,
    WeightedConfig,
    WeightedFusion,
)

WEIGHTED_OPTIONS = [
    {},
    {"normalization": "zscore"},
    {"normalization": "dbsf"},
    {"normalization": "none"},
    {"normalization": "minmax", "weights": {"dense": 3.0, "sparse": 0.5}},
    {"normalization": "zscore", "std": "sample", "normalize_weights": False, "weights": {"graph": 0.0}},
]
DBSF_OPTIONS = [{}, {"std": "sample"}, {"clip": True, "weights": {"dense": 2.0}}, {"normalize_weights": True}]
UNION_OPTIONS = [{}, {"normalization": "none"}, {"normalization": "dbsf"}, {"normalization": "zscore", "weights": {"sparse": 2.0}}]


class TestRRF(FusionContract):
    @pytest.fixture(params=[{}, {"k": 1.0, "weights": {"dense": 2.0, "sparse": 0.5}}], ids=["default", "weighted"])
    def fusion(self, request):
        return ReciprocalRankFusion(RRFConfig(**request.param))


class TestWeighted(FusionContract):
    @pytest.fixture(params=WEIGHTED_OPTIONS, ids=lambda p: json.dumps(p, sort_keys=True))
    def fusion(self, request):
        return WeightedFusion(WeightedConfig(**request.param))


class TestDBSF(FusionContract):
    @pytest.fixture(params=DBSF_OPTIONS, ids=lambda p: json.dumps(p, sort_keys=True))
    def fusion(self, request):
        return DistributionBasedFusion(DBSFConfig(**request.param))


class TestUnion(FusionContract):
    @pytest.fixture(params=UNION_OPTIONS, ids=lambda p: json.dumps(p, sort_keys=True))
    def fusion(self, request):
        return UnionFusion(UnionConfig(**request.param))


class TestRegisteredFusions(FusionContract):
    """The same strategies built through the registry, as settings and the fuse stage build them."""

    @pytest.fixture(
        params=["rrf", "weighted", "dbsf", "union", {"kind": "weighted", "normalization": "dbsf", "weights": {"sparse": 2}}],
        ids=lambda p: json.dumps(p, sort_keys=True),
    )
    def fusion(self, request):
        collection = Collection.create()
        try:
            return collection.build_fusion(request.param)
        finally:
            collection.close()


class TestFuseStageWithPluginFusions(StageContract):
    """The builtin ``fuse`` stage with this plugin's fusions, built as settings build it."""

    @pytest.fixture(
        params=[
            {},
            {"fusion": {"kind": "rrf", "k": 10}, "lists": ["seed_vector_l2"]},
            {"fusion": "weighted"},
            {"fusion": {"kind": "dbsf"}},
            {"fusion": {"kind": "union", "normalization": "none"}, "k": 4},
            {"fusion": {"kind": "weighted", "normalization": "zscore", "weights": {"seed_vector": 2.0}}, "lists": ["seed_vector", "seed_vector_l2"]},
        ],
        ids=lambda p: json.dumps(p, sort_keys=True),
    )
    def stage(self, request):
        return build_stage("fuse", **request.param)
