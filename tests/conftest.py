"""Fixtures shared by the core's test modules."""

from __future__ import annotations

from typing import Callable

import pytest

from memcore.embedders._embedder import HashingEmbedder, HashingEmbedderConfig, Space


def _two_spaces() -> dict[str, Space]:
    default = HashingEmbedder()
    small = HashingEmbedder(HashingEmbedderConfig(dim=64))
    return {"default": Space("default", default.dim, default, "hashing"), "small": Space("small", small.dim, small, "hashing")}


@pytest.fixture
def make_spaces() -> Callable[[], dict[str, Space]]:
    """A factory of the two hashing spaces most collection tests use: ``default`` (256
    dimensions) and ``small`` (64). (test_persistence.py keeps its own copy in the helper
    source it shares with the child processes it starts.)"""
    return _two_spaces
