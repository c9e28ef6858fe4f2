"""The memcore IndexContract and PluginRegistrationContract for memcore-colbert."""

from __future__ import annotations

import pytest

from memcore.testing import IndexContract, PluginRegistrationContract
from memcore_colbert import ColbertIndexConfig, ColbertRemoteConfig, TokenHashingConfig
from memcore_colbert.index import ColbertIndex


def maker(**options):
    config = ColbertIndexConfig(embedder={"kind": "token_hashing", "dim": 32}, **options)
    return lambda context: ColbertIndex(config, context)


class TestUncompressed(IndexContract):
    """Small collections: fp32 token vectors, exhaustive MaxSim."""

    @pytest.fixture
    def make_index(self):
        return maker()


class TestCompressed(IndexContract):
    """Trained at the first add (train_min_tokens 16) and searched with the PLAID stages
    (exhaustive_below 0), nbits 1, 2 and 4."""

    @pytest.fixture(params=[1, 2, 4], ids=["nbits1", "nbits2", "nbits4"])
    def make_index(self, request):
        return maker(nbits=request.param, train_min_tokens=16, exhaustive_below=0, ncentroids=8, ncells=2)


class TestCompressedPca(IndexContract):
    """As TestCompressed, with the pca residual transform."""

    @pytest.fixture(params=[1, 2], ids=["nbits1", "nbits2"])
    def make_index(self, request):
        return maker(nbits=request.param, residual_transform="pca", train_min_tokens=16, exhaustive_below=0, ncentroids=8, ncells=2)


class TestColbertRegistration(PluginRegistrationContract):
    plugin = "colbert"
    other_hooks = ("register_commands",)
    light_imports = ("memcore_colbert:ColbertIndex", "memcore_colbert:ColbertRemoteIndex", "memcore_colbert.cli")
    registers = {
        "indexes": {"colbert": (None, ColbertIndexConfig), "colbert_remote": (None, ColbertRemoteConfig)},
        "embedders": {"token_hashing": (None, TokenHashingConfig)},
    }
