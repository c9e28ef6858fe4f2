"""The core's store contract, run against a real PostgreSQL."""

from __future__ import annotations

from typing import Iterator

import pytest

from memcore.testing import StoreContract
from memcore_postgres import PostgresStore, PostgresStoreConfig


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_url: str, schema: str) -> Iterator[PostgresStore]:
        # log_retention_s 0: prune_log goes as far as asked, as the contract checks (the
        # retention the store keeps by default is tested in test_log_retention.py)
        store = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema, log_retention_s=0))
        yield store
        store.close()
