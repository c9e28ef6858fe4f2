"""The core's IndexContract for the ``pg_text`` index kind, on a real PostgreSQL.

As for ``pgvector``, the index keeps nothing of its own: its records are the store's members
of the index and their ``tsvector`` a generated column of the store's ``records``. The
contract adds and removes records on the index alone, so the conftest's ``store_fed`` plays the
collection's part: each ``add`` / ``remove`` first commits the records and their membership
to the postgres store, and ``save`` / ``load`` keep the member list beside the index's own
file (in a collection the store is the truth and the catch-up from its log does that).
"""

from __future__ import annotations

from typing import Any

import pytest

from memcore.testing import IndexContract
from memcore_postgres import PgTextIndexConfig
from memcore_postgres.pg_text import PgTextIndex


class TestPgTextBm25(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgTextIndex, PgTextIndexConfig())


class TestPgTextRankCdAll(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgTextIndex, PgTextIndexConfig(scoring="ts_rank_cd", match="all", normalization=1))


class TestPgTextSimpleBm25All(IndexContract):
    @pytest.fixture
    def make_index(self, store_fed: Any) -> Any:
        return store_fed(PgTextIndex, PgTextIndexConfig(language="simple", match="all", k1=0.9, b=0.4))
