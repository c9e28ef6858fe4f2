"""Fixtures of the memcore-colbert tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from memcore.plugin import IndexContext
from memcore import Query, Record
from memcore.testing import make_texts

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"


@pytest.fixture
def kit():
    """Helpers for test modules (which cannot import conftest under importlib mode)."""
    from types import SimpleNamespace

    from memcore_colbert import ColbertIndexConfig
    from memcore_colbert.index import ColbertIndex

    def make(name: str = "cb", **options) -> ColbertIndex:
        options.setdefault("embedder", {"kind": "token_hashing", "dim": 32})
        options.setdefault("defer_training", False)  # train at the add that crosses train_min_tokens (test_deferred_training: the default)
        return ColbertIndex(ColbertIndexConfig(**options), IndexContext(name))

    def records(texts, start: int = 0, prefix: str = "r"):
        return [Record(id=f"{prefix}{start + i}", text=t) for i, t in enumerate(texts)]

    def query(text: str, **mode) -> Query:
        return Query(text=text, extras={"colbert": mode} if mode else {})

    return SimpleNamespace(make=make, records=records, query=query, texts=make_texts, shared=SHARED)
