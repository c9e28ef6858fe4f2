"""Forgetting through the ``hybrid`` service (issue 20): after ``delete(scope=...)`` and
``close()`` no file holds the deleted texts -- its BM25 index (``hybrid.bm25``) used to keep
them in ``bm25.json`` -- and the other scope is still retrieved."""

from __future__ import annotations

import pytest

from memcore.testing import check_scope_forgotten

WINDOWED = {
    "kind": "hybrid",
    "indexes": {"bm25": {"kind": "bm25"}},
    "windows": {"size": 2, "indexes": {"bm25": {"kind": "bm25"}}},
    "pipeline": [
        {"kind": "recall", "index": "bm25", "over_fetch": 2.0},
        {"kind": "recall", "index": "window.bm25", "over_fetch": 2.0},
        {"kind": "expand"},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
        {"kind": "limit"},
    ],
}


@pytest.mark.parametrize("rounds", [1, 3])
def test_hybrid_forgets_a_scope(opener, tmp_path, rounds):
    check_scope_forgotten(lambda path: opener(path, {"kind": "hybrid"}), tmp_path, rounds=rounds)


def test_hybrid_with_windows_forgets_a_scope(opener, tmp_path):
    """The windows (records derived from consecutive entries) go with their entries."""
    check_scope_forgotten(lambda path: opener(path, WINDOWED), tmp_path)


DERIVING = {
    # small tiers: pages move to MTM segments, hot segments are promoted (profile, user and
    # assistant knowledge), the coldest are summarised into LTM -- all derived from bob's texts
    "memoryos": {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 1, "heat_threshold": 0.0},
    "vector_hash": {"kind": "vector_hash", "bits": 4, "tables": 4},  # extracted triples
    "hierarchical": {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 1, "mtm": 1}},
    "short_term_archive": {"kind": "short_term_memory", "max_dialog": 2},  # the archived entries go too
}


@pytest.mark.parametrize("name", sorted(DERIVING))
def test_a_deriving_service_forgets_a_scope(opener, tmp_path, name):
    """What a service derived from bob's records (summaries, profiles, facts, triples) and
    its per-scope state leave with him: no canary survives on disk; alice's records stay
    (not all retrievable: these services are capacity-limited, so only ``get`` is checked)."""
    check_scope_forgotten(lambda path: opener(path, DERIVING[name]), tmp_path, retrieve=None)
