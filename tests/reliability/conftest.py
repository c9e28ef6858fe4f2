"""Shared helpers of the reliability suite: a small memory with vector, text and exact indexes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memcore

DIM = 8


def settings(**indexes: Any) -> dict[str, Any]:
    """Settings of a memory with a caller-vector space ``v`` and the given indexes (default: exact + faiss)."""
    return {
        "spaces": {"v": {"dim": DIM}},
        "indexes": indexes or {"exact": {"kind": "exact", "space": "v"}, "flat": {"kind": "faiss", "space": "v", "factory": "Flat"}},
        "pipeline": [{"kind": "recall", "index": "exact"}, {"kind": "limit"}],
    }


def vec(seed: int) -> np.ndarray:
    """A deterministic unit-ish vector."""
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def snapshot(memory: memcore.Memory) -> tuple[int, list[str], int]:
    """(count, ids, last seq): what must not change when an input is refused."""
    c = memory.collection
    return c.count(), c.ids(), c.store.last_seq()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "memory"
