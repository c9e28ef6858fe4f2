"""Forgetting (issue 20): the ``graph`` index (record nodes and the entity names extracted from texts). After ``delete(scope=bob)`` and ``close()`` no file under
the memory directory holds bob's canary texts or metadata strings
(:func:`memcore.testing.check_scope_forgotten`), and alice's records are still retrieved."""

from __future__ import annotations

import os

import pytest

import memcore
from memcore.testing import check_scope_forgotten, retrieve_by_index


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


@pytest.mark.parametrize("rounds", [1, 3])
def test_graph_forgets_a_scope(tmp_path, rounds):
    """Bob's canaries include a capitalised and a quoted word: entity nodes of the rule
    extractor, which must go with the last record mentioning them."""
    settings = {"indexes": {"g": {"kind": "graph", "entity_extraction": "rule"}, "vector": {"kind": "exact"}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, retrieve=retrieve_by_index("vector"), rounds=rounds)
