"""The core's store contract, run against a real PostgreSQL."""

from __future__ import annotations

import pytest

from memcore.testing import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_store):  # type: ignore[no-untyped-def]
        return pg_store
