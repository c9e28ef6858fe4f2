"""Fixtures of the memcore-poincare tests; ``chroma_server`` (a real ``chroma run`` on a free port)
comes from memcore-chroma-support."""

from __future__ import annotations

import time

import numpy as np
import pytest

from memcore_chroma_support.testing import chroma_server  # noqa: F401  (a pytest fixture)
from memcore_poincare import HyperAmyRetrieval, HyperAmyStorage, ParticleProjector, Point


@pytest.fixture
def storage(tmp_path):
    """An embedded HyperAmyStorage in a temp folder."""
    return HyperAmyStorage(tmp_path / "db", collection_name="particles")


@pytest.fixture
def retrieval(storage):
    return HyperAmyRetrieval(storage, ParticleProjector(curvature=1.0, scaling_factor=2.0))


@pytest.fixture
def abc():
    """The design's scenario: A (anger, strong) links B (anger, weak) and C (happy)."""
    now = time.time()
    anger, happy = np.array([0.9, 0.1, 0.0]), np.array([0.0, 0.1, 0.9])
    return (
        now,
        anger,
        happy,
        [
            Point("A", anger, 0.9, 0.5, now, links=["B", "C"]),
            Point("B", anger, 0.2, 0.5, now),
            Point("C", happy, 0.5, 0.5, now),
        ],
    )
