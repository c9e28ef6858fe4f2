"""Forgetting (issue 20): the ``faiss`` index (native index files and its id labels). After ``delete(scope=bob)`` and ``close()`` no file under
the memory directory holds bob's canary texts or metadata strings
(:func:`memcore.testing.check_scope_forgotten`), and alice's records are still retrieved."""

from __future__ import annotations

import os

import pytest

import memcore
from memcore.testing import check_scope_forgotten, retrieve_by_index

faiss = pytest.importorskip("faiss")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


@pytest.mark.parametrize("factory", ["Flat", "HNSW32"])
@pytest.mark.parametrize("rounds", [1, 3])
def test_faiss_forgets_a_scope(tmp_path, factory, rounds):
    settings = {"indexes": {"vec": {"kind": "faiss", "factory": factory}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, retrieve=retrieve_by_index("vec"), rounds=rounds)
