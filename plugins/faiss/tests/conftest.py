"""Fixtures of the memcore-faiss tests: index builders and seeded data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_faiss import FaissIndexConfig
from memcore_faiss.index import FaissIndex

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"
"""The shared data folder beside the repository (absent on a bare clone)."""


def context(dim: int, name: str = "vec") -> IndexContext:
    """An IndexContext declaring the space ``default`` of dimension ``dim``."""
    return IndexContext(name=name, spaces={"default": SpaceInfo("default", dim, "test")})


@pytest.fixture
def make():
    """``make(dim, **config) -> FaissIndex``."""

    def build(dim: int = 16, **options) -> FaissIndex:
        return FaissIndex(FaissIndexConfig(**options), context(dim))

    return build


def records(vectors: np.ndarray, start: int = 0, prefix: str = "r") -> list[Record]:
    """One record per row, ids ``r<start>``..."""
    return [Record(id=f"{prefix}{start + i}", text=f"text {start + i}", vectors={"default": v}) for i, v in enumerate(np.asarray(vectors, dtype=np.float32))]


def query(vector: np.ndarray, **extras) -> Query:
    """A query for one vector, with ``extras["faiss"]`` when given."""
    return Query(vectors={"default": vector}, extras={"faiss": extras} if extras else {})


def clustered(n: int, dim: int, clusters: int = 20, seed: int = 0, normalise: bool = True) -> np.ndarray:
    """Gaussian blobs around random centres (more realistic than uniform noise for ANN)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    if normalise:
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def exact_ids(base: np.ndarray, ids: list[str], q: np.ndarray, k: int, metric: str = "cosine") -> list[str]:
    """The true top-k ids by numpy brute force."""
    if metric == "l2":
        scores = -((base - q) ** 2).sum(axis=1)
    else:
        scores = base @ q
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order]


@pytest.fixture
def kit():
    """The helpers above, for test modules (which cannot import conftest under importlib mode)."""
    from types import SimpleNamespace

    return SimpleNamespace(records=records, query=query, clustered=clustered, exact_ids=exact_ids, context=context, shared=SHARED)
