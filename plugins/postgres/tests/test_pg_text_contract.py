"""The core's IndexContract for the ``pg_text`` index kind, on a real PostgreSQL.

As for ``pgvector``, the index keeps nothing of its own: its records are the store's members
of the index and their ``tsvector`` a generated column of the store's ``records``. The
contract adds and removes records on the index alone, so :class:`StoreFed` plays the
collection's part: each ``add`` / ``remove`` first commits the records and their membership
to the postgres store, and ``save`` / ``load`` keep the member list beside the index's own
file (in a collection the store is the truth and the catch-up from its log does that).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

import pytest

from memcore.plugin import Record, VectorReader, WriteBatch
from memcore.testing import IndexContract
from memcore_postgres import PgTextIndexConfig
from memcore_postgres.pg_text import PgTextIndex

MEMBERS = "members.json"


class StoreFed(PgTextIndex):
    """A pg_text index whose add/remove/load also move the store's records and membership (test only)."""

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
    def make(context: Any) -> PgTextIndex:
        context = dataclasses.replace(context, vectors=VectorReader(store, context.name))
        return StoreFed(PgTextIndexConfig(**settings), context)

    return make


class TestPgTextBm25(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store)


class TestPgTextRankCdAll(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store, scoring="ts_rank_cd", match="all", normalization=1)


class TestPgTextSimpleBm25All(IndexContract):
    @pytest.fixture
    def make_index(self, pg_store: Any) -> Any:
        return _maker(pg_store, language="simple", match="all", k1=0.9, b=0.4)
