"""The memcore IndexContract on the chroma index: embedded (three metrics) and on a real server."""

from __future__ import annotations

import pytest

from memcore.testing import IndexContract
from memcore_chroma import ChromaIndexConfig
from memcore_chroma.index import ChromaIndex


def maker(**options):
    config = ChromaIndexConfig(**options)
    return lambda context: ChromaIndex(config, context)


class TestEmbedded(IndexContract):
    @pytest.fixture(params=["cosine", "ip", "l2"])
    def make_index(self, request):
        return maker(metric=request.param, ef_search=64)


class TestServer(IndexContract):
    @pytest.fixture
    def make_index(self, chroma_server):
        host, port = chroma_server
        return maker(connection={"mode": "http", "host": host, "port": port})
