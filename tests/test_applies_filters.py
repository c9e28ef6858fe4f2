"""``Index.applies_filters``: the collection leaves a query's ``where`` and scope to such an
index (``allowed=None``, the parsed filter on the query) and still resolves a text filter."""

from __future__ import annotations

from typing import Any

from memcore import Collection


def test_where_and_scope_are_left_to_an_index_that_applies_them(tmp_path: Any) -> None:
    c = Collection.create(tmp_path / "c")
    try:
        c.create_index("vec", "exact")
        c.insert([{"id": f"r{i}", "text": f"note {i}", "metadata": {"n": i}} for i in range(10)])
        index = c.index("vec")
        seen: list[Any] = []
        search = index.search

        def spy(query: Any, k: int, allowed: Any = None) -> Any:
            seen.append((query.parsed_where(), allowed))
            return search(query, k, allowed)

        index.search = spy  # type: ignore[method-assign]
        c.retrieve("note", k=5, where={"n": {"$gte": 5}})
        assert seen[-1][1] is not None  # an ordinary index gets the resolved ids
        index.applies_filters = True  # type: ignore[misc]
        c.retrieve("note", k=5, where={"n": {"$gte": 5}})
        assert seen[-1][0] is not None and seen[-1][1] is None  # the filter travels on the query
        c.retrieve("note", k=5, where={"n": {"$gte": 5}}, where_document={"$contains": "note 7"})
        assert seen[-1][1] is not None and set(seen[-1][1]) >= {"r7"}  # a text filter is still resolved
    finally:
        c.close()
