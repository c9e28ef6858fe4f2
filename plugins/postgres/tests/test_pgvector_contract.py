"""The core's IndexContract for the ``pgvector`` index kind, on a real PostgreSQL.

The index keeps nothing of its own: its records are the store's members of the index. The
contract adds and removes records on the index alone, so the conftest's ``store_fed`` plays the
collection's part: each ``add`` / ``remove`` first commits the records and their membership
to the postgres store (what a collection's batch does before it calls the index), and
``save`` / ``load`` keep the member list beside the index's own file, so loading an older
save brings the store's membership back to it (in a collection the store is the truth and
the catch-up from its log does that).
"""

from __future__ import annotations

from typing import Any

import pytest

from memcore.testing import IndexContract
from memcore_postgres import PgvectorIndexConfig
from memcore_postgres.pgvector import PgvectorIndex


class TestPgvectorHnsw(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgvectorIndex, PgvectorIndexConfig(space="default"))


class TestPgvectorHnswL2(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgvectorIndex, PgvectorIndexConfig(space="default", metric="l2", iterative_scan="strict_order"))


class TestPgvectorIvfflatIp(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgvectorIndex, PgvectorIndexConfig(space="default", metric="ip", method="ivfflat", lists=4, probes=4))
