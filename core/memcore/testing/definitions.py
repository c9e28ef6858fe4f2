"""Another process drops, creates or re-creates an index: the checks, for every store a
second process can open at once (the SQLite store read-only, the postgres store).

Each process keeps its own copy of each index and catches it up from the op log before a
search; these checks hold it to the index *definitions* too: an index the writer dropped
is unknown to the other collection at its next search (the :class:`~memcore.NotFoundError`
the writer raises), one it created is searchable there, and one it dropped and created
again under the same name (records deleted and added in between, another kind or other
options) shows the new index's members and scores, as a collection opened afresh does::

    from memcore.testing.definitions import check_drop_seen, check_new_index_seen, check_recreated_seen

    def test_a_dropped_index_is_seen(writer, other):
        check_drop_seen(writer, other)

The writer holds index ``vec`` (``exact`` or any kind over the space
:data:`~memcore.testing.catch_up.SPACE`) with the records of
:data:`~memcore.testing.catch_up.CATCH_UP_STEPS`; ``other`` has the same memory open.
"""

from __future__ import annotations

from typing import Any, Callable

from ..collection._collection import Collection
from ..errors import NotFoundError
from ..model._query import Query
from .catch_up import SPACE, record, unit

__all__ = ["indexed", "check_drop_seen", "check_new_index_seen", "check_recreated_seen", "recreate"]


def indexed(col: Collection, index: str, seed: int, k: int = 5) -> list[tuple[str, float, str]]:
    """What a search of ``index`` for :func:`~memcore.testing.catch_up.unit` ``(seed)`` shows:
    ids, scores and the attached records' texts (a hit of a deleted record fails)."""
    shown = []
    for h in col.retrieve(Query(vectors={SPACE: unit(seed)}, k=k), index=index):
        assert h.record is not None, f"{index}: hit {h.id} has no record (deleted, still in the index)"
        shown.append((h.id, round(h.score, 5), h.record.text))
    return shown


def _definitions(col: Collection) -> dict[str, tuple[str, Any]]:
    return {entry["name"]: (entry["kind"], entry["config"]) for entry in col.list_indexes()}


def check_drop_seen(writer: Collection, other: Collection) -> None:
    """``other`` searched ``vec``; the writer drops it: ``other``'s next search raises the
    writer's :class:`~memcore.NotFoundError`, and its index list no longer names it."""
    assert indexed(other, "vec", 1) == indexed(writer, "vec", 1)
    writer.drop_index("vec")
    for col in (writer, other):
        try:
            indexed(col, "vec", 1)
        except NotFoundError:
            continue
        raise AssertionError("a search of the dropped index 'vec' did not raise NotFoundError")
    assert "vec" not in _definitions(other)


def check_new_index_seen(writer: Collection, other: Collection, open_fresh: Callable[[], Collection]) -> None:
    """The writer creates (and fills) index ``extra``: ``other`` searches it (through its
    reader, as a pipeline's stages do, and through ``retrieve``) as the writer and a fresh
    collection do, and lists it."""
    indexed(other, "vec", 1)
    writer.create_index("extra", "exact", space=SPACE, metric="ip", populate=True)
    staged = other.reader.search_index("extra", Query(vectors={SPACE: unit(2)}, k=5), 5)  # the path a pipeline's stages take
    seen = indexed(other, "extra", 2)
    assert [h.id for h in staged] == [shown[0] for shown in seen]
    fresh = open_fresh()
    try:
        assert seen == indexed(writer, "extra", 2) == indexed(fresh, "extra", 2)
        assert _definitions(other) == _definitions(writer) == _definitions(fresh)
    finally:
        fresh.close()


def recreate(writer: Collection, kind: str, **options: Any) -> None:
    """Drop ``vec``, delete ``r1`` and add ``r50`` while it does not exist, create it again
    (``kind``, ``options``) filled from the store, then insert ``r51``."""
    writer.drop_index("vec")
    writer.delete("r1")
    writer.insert([record(50)])
    writer.create_index("vec", kind, space=SPACE, populate=True, **options)
    writer.insert([record(51)])


def check_recreated_seen(writer: Collection, other: Collection, open_fresh: Callable[[], Collection], kind: str, **options: Any) -> None:
    """``other`` searched ``vec``; the writer re-creates it (:func:`recreate`): ``other``'s
    next searches show no deleted record, the records added meanwhile, the new kind's
    scores and definition -- what the writer and a fresh collection show."""
    indexed(other, "vec", 1)
    recreate(writer, kind, **options)
    fresh = open_fresh()
    try:
        for seed in (1, 50, 51, 7):
            assert indexed(other, "vec", seed) == indexed(writer, "vec", seed) == indexed(fresh, "vec", seed), seed
        assert _definitions(other) == _definitions(writer) == _definitions(fresh)
    finally:
        fresh.close()
