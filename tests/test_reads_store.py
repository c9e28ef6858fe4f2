"""``Index.reads_store``: on a shared store, the collection does not read the op log to catch
such an index up before a search (it reads the store's current data itself), while an
ordinary index still catches up."""

from __future__ import annotations

from typing import Any

from memcore import Collection


def test_an_index_that_reads_the_store_is_not_caught_up_from_the_log(tmp_path: Any) -> None:
    c = Collection.create(tmp_path / "c")
    try:
        c.create_index("vec", "exact")
        c.insert([{"id": f"r{i}", "text": f"note {i}"} for i in range(5)])
        store = c._store  # noqa: SLF001 - the test watches the store's log reads
        reads: list[str] = []
        read_tail = store.read_tail

        def spy(since: Any) -> Any:  # the catch-up's read of the log (every index it asks for)
            reads.extend(since)
            return read_tail(since)

        store.read_tail = spy  # type: ignore[method-assign]
        store.shared = True  # as a store shared between processes declares itself
        c.retrieve("note", k=3)
        assert "vec" in reads  # an ordinary index catches up before the search
        index = c.index("vec")
        index.reads_store = True  # type: ignore[misc]
        reads.clear()
        c.retrieve("note", k=3)
        c.insert([{"id": "r9", "text": "note 9"}])  # its own writes are applied directly
        assert reads == []
        assert len(c.retrieve("note 9", k=6)) == 6
    finally:
        c.close()
