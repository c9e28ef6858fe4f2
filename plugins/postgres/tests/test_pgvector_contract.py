"""The core's IndexContract for the ``pgvector`` index kind, on a real PostgreSQL.

The index keeps nothing of its own: its records are the store's members of the index. The
contract adds and removes records on the index alone, so :class:`StoreFed` plays the
collection's part: each ``add`` / ``remove`` first commits the records and their membership
to the postgres store (what a collection's batch does before it calls the index), and
``save`` / ``load`` keep the member list beside the index's own file, so loading an older
save brings the store's membership back to it (in a collection the store is the truth and
the catch-up from its log does that).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

import pytest

from memcore.plugin import Record, VectorReader, WriteBatch
from memcore.testing import IndexContract
from memcore_postgres import PgvectorIndexConfig
from memcore_postgres.pgvector import PgvectorIndex

MEMBERS = "members.json"


class StoreFed(PgvectorIndex):
    """A pgvector index whose add/remove/load also move the store's records and membership (test only)."""

    def add(self, records: Sequence[Record]) -> None:
        self.validate(records)
        last = {r.id: r for r in records}
        if last:
            self.store.apply(WriteBatch(upserts=list(last.values()), add_membership={self.name: list(last)}))
        super().add(records)

    def remove(self, ids: Sequence[str]) -> None:
        held = set(self.store.ids(index=self.name))
        gone = [i for i in dict.fromkeys(ids) if i in held]
        if gone:
            self.store.apply(WriteBatch(remove_membership={self.name: gone}))
        super().remove(ids)

    def save(self, directory: Path) -> None:
        super().save(directory)
        (Path(directory) / MEMBERS).write_text(json.dumps(self.store.ids(index=self.name)))

    def load(self, directory: Path) -> None:
        saved = json.loads((Path(directory) / MEMBERS).read_text())
        held = self.store.ids(index=self.name)
        batch = WriteBatch(remove_membership={self.name: [i for i in held if i not in set(saved)]}, add_membership={self.name: saved})
        self.store.apply(batch)
        super().load(directory)


def _maker(store: Any, **settings: Any) -> Any:
    def make(context: Any) -> PgvectorIndex:
        context = dataclasses.replace(context, vectors=VectorReader(store, context.name))
        return StoreFed(PgvectorIndexConfig(space="default", **settings), context)

    return make


class TestPgvectorHnsw(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store)


class TestPgvectorHnswL2(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store, metric="l2", iterative_scan="strict_order")


class TestPgvectorIvfflatIp(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store, metric="ip", method="ivfflat", lists=4, probes=4)
