"""Forgetting (issue 20): the ``poincare`` index (its Chroma collection, snapshot and mirror files). After ``delete(scope=bob)`` and ``close()`` no file under
the memory directory holds bob's canary texts or metadata strings
(:func:`memcore.testing.check_scope_forgotten`), and alice's records are still retrieved."""

from __future__ import annotations

import os

import pytest

import memcore
from memcore.testing import check_scope_forgotten, retrieve_by_index

pytest.importorskip("chromadb")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


@pytest.mark.parametrize("rounds", [1, 3])
def test_poincare_forgets_a_scope(tmp_path, rounds):
    settings = {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 32}}}, "indexes": {"emo": {"kind": "poincare"}}}
    # its Chroma collection's write-ahead log and its mirror files keep deleted ids: ids
    # are not checked (known gap, issue 20)
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, check_ids=False, retrieve=retrieve_by_index("emo"), rounds=rounds)
