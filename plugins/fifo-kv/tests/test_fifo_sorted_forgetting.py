"""Forgetting (issue 20): the ``fifo`` and ``sorted`` indexes (ids, and for ``sorted`` the metadata values it orders by). After ``delete(scope=bob)`` and ``close()`` no file under
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
def test_fifo_forgets_a_scope(tmp_path, rounds):
    settings = {"indexes": {"stm": {"kind": "fifo", "capacity": 100}, "vector": {"kind": "exact"}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, retrieve=retrieve_by_index("vector"), rounds=rounds)


@pytest.mark.parametrize("rounds", [1, 3])
def test_sorted_on_a_string_field_forgets_a_scope(tmp_path, rounds):
    """``sorted`` saves the values of its field: here bob's metadata strings."""
    settings = {"indexes": {"by_note": {"kind": "sorted", "field": "note"}, "vector": {"kind": "exact"}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, retrieve=retrieve_by_index("vector"), rounds=rounds)
