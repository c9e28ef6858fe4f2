"""Fixtures of the llm plugin's tests: a real local OpenAI-compatible server
(:class:`memcore.testing.FakeOpenAIServer`, see there for its scripted failures)."""

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
