"""Issue 13 item 4: a reader never misses writes when the writer prunes the log mid catch-up.

The forced interleaving: the reader reads where the log starts, then -- before it reads
the ops -- the writer saves its indexes and prunes the log. Reading both in one snapshot
(and rebuilding on a gap) keeps the reader's index complete: count 20, index 20.
"""

from __future__ import annotations

import memcore

from .conftest import settings, vec


class _Interleave:
    """Delegates to a sqlite3 connection; runs ``action`` once right after the log-start read."""

    def __init__(self, db, action):
        self._db = db
        self._action = action

    def execute(self, sql, *args):
        cursor = self._db.execute(sql, *args)
        if "log_start" in sql and "SELECT" in sql.upper() and self._action is not None:
            rows = cursor.fetchall()
            action, self._action = self._action, None
            action()
            return _Rows(rows)
        return cursor

    def __getattr__(self, name):
        return getattr(self._db, name)


class _Rows:
    def __init__(self, rows):
        self._rows = rows

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return self._rows

    def __iter__(self):
        return iter(self._rows)


def test_prune_between_log_start_and_ops_does_not_lose_writes(directory):
    writer = memcore.open(settings(exact={"kind": "exact", "space": "v"}), path=directory)
    try:
        writer.collection.insert([{"id": f"a{i}", "text": f"a{i}", "vectors": {"v": vec(i)}} for i in range(10)])
        writer.collection.flush()
        reader = memcore.open({**settings(exact={"kind": "exact", "space": "v"}), "store": {"read_only": True}}, path=directory)
        try:
            assert len(reader.collection.index("exact")) == 10
            writer.collection.insert([{"id": f"b{i}", "text": f"b{i}", "vectors": {"v": vec(100 + i)}} for i in range(10)])
            store = reader.collection.store
            store.db = _Interleave(store.db, writer.collection.flush)  # saves the index and prunes the log
            hits = reader.collection.retrieve({"vectors": {"v": vec(105)}}, index="exact", k=1)
            assert store.db._action is None, "the interleaving did not happen"
            assert hits[0].id == "b5"
            assert reader.collection.count() == 20
            assert len(reader.collection.index("exact")) == 20
        finally:
            reader.close()
    finally:
        writer.close()


def test_a_reader_behind_the_pruned_log_rebuilds(directory):
    writer = memcore.open(settings(exact={"kind": "exact", "space": "v"}), path=directory)
    try:
        writer.collection.insert([{"id": "a", "text": "a", "vectors": {"v": vec(1)}}])
        writer.collection.flush()
        reader = memcore.open({**settings(exact={"kind": "exact", "space": "v"}), "store": {"read_only": True}}, path=directory)
        try:
            writer.collection.insert([{"id": "b", "text": "b", "vectors": {"v": vec(2)}}])
            writer.collection.flush()  # prunes past what the reader applied
            assert {h.id for h in reader.collection.retrieve({"vectors": {"v": vec(2)}}, index="exact", k=5)} == {"a", "b"}
        finally:
            reader.close()
    finally:
        writer.close()
