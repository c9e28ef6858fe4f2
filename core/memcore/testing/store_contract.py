"""``StoreContract``: the behaviour every :class:`memcore.Store` must have."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ..errors import ConfigError, NotFoundError
from ..model._document import parse_where_document
from ..model._filters import parse_filter
from ..model._record import Link, Record, Scope
from ..stores._store import Applied, Op, OpKind, Store, Version, WriteBatch, plan_ops

__all__ = ["StoreContract"]


def _rec(
    rid: str,
    text: str | None = None,
    *,
    metadata: dict[str, Any] | None = None,
    vectors: dict[str, Any] | None = None,
    links: tuple[Link, ...] = (),
    scope: Scope | None = None,
    created_at: float = 1000.0,
    updated_at: float | None = None,
) -> Record:
    return Record(
        id=rid,
        text=text if text is not None else f"text of {rid}",
        metadata=dict(metadata or {}),
        vectors={k: np.asarray(v, dtype=np.float32) for k, v in (vectors or {}).items()},
        links=tuple(links),
        scope=scope,
        created_at=created_at,
        updated_at=created_at if updated_at is None else updated_at,
    )


def _present(records: list[Record | None]) -> list[Record]:
    """``records`` with each one checked present (a store's ``get`` gives None for a missing id)."""
    assert all(r is not None for r in records), records
    return [r for r in records if r is not None]


FILTER_RECORDS: list[tuple[str, dict[str, Any]]] = [
    ("f1", {"n": 1, "tag": "a", "flag": True}),
    ("f2", {"n": 2, "tag": "b", "flag": False, "z": None}),
    ("f3", {"n": 3, "tag": "a", "my-field": "x"}),
    ("f4", {"n": 4.5, "tag": "c", "flag": True}),
    ("f5", {"tag": "b"}),
    ("f6", {"n": "3"}),
]
"""Metadata of the records the filter tests insert, in insertion order."""

FILTER_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"tag": "a"}, ["f1", "f3"]),
    ({"tag": {"$eq": "b"}}, ["f2", "f5"]),
    ({"tag": {"$ne": "a"}}, ["f2", "f4", "f5", "f6"]),
    ({"n": 3}, ["f3"]),
    ({"n": "3"}, ["f6"]),
    ({"n": 2.0}, ["f2"]),
    ({"n": {"$gt": 2}}, ["f3", "f4"]),
    ({"n": {"$gte": 2}}, ["f2", "f3", "f4"]),
    ({"n": {"$lt": 3}}, ["f1", "f2"]),
    ({"n": {"$lte": 3}}, ["f1", "f2", "f3"]),
    ({"n": {"$gt": 1, "$lt": 4}}, ["f2", "f3"]),
    ({"tag": {"$gte": "b"}}, ["f2", "f4", "f5"]),
    ({"tag": {"$in": ["a", "c"]}}, ["f1", "f3", "f4"]),
    ({"n": {"$in": [1, 4.5]}}, ["f1", "f4"]),
    ({"tag": {"$nin": ["a", "c"]}}, ["f2", "f5", "f6"]),
    ({"flag": True}, ["f1", "f4"]),
    ({"flag": {"$ne": True}}, ["f2", "f3", "f5", "f6"]),
    ({"n": True}, []),
    ({"tag": "zzz"}, []),
    ({"flag": {"$in": [True]}}, ["f1", "f4"]),
    ({"n": {"$in": [True, 3]}}, ["f3"]),
    ({"tag": {"$in": []}}, []),
    ({"tag": {"$nin": []}}, ["f1", "f2", "f3", "f4", "f5", "f6"]),
    ({"z": None}, ["f2"]),
    ({"z": {"$ne": None}}, ["f1", "f3", "f4", "f5", "f6"]),
    ({"my-field": "x"}, ["f3"]),
    ({"tag": "a", "n": {"$lte": 1}}, ["f1"]),
    ({"$and": [{"tag": "a"}, {"n": {"$gt": 1}}]}, ["f3"]),
    ({"$or": [{"tag": "c"}, {"n": {"$lt": 2}}]}, ["f1", "f4"]),
    ({"$and": [{"$or": [{"tag": "a"}, {"tag": "b"}]}, {"n": {"$gte": 2}}]}, ["f2", "f3"]),
]
"""(where, expected ids in insertion order) over :data:`FILTER_RECORDS`."""

TEXT_RECORDS: list[tuple[str, str, dict[str, Any]]] = [
    ("t1", "Alice travelled to Paris in May", {"tag": "a"}),
    ("t2", "Bob cooks pasta", {"tag": "b"}),
    ("t3", "paris is lowercase here; PARIS upper", {"tag": "a"}),
    ("t4", "Paris again, and pasta", {"tag": "b"}),
    ("t5", "ünïcödé text: naïve café", {"tag": "c"}),
    ("t6", "100% sure_thing [x] *", {"tag": "c"}),
]
"""(id, text, metadata) of the records the text filter tests insert, in insertion order."""

TEXT_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"$contains": "Paris"}, ["t1", "t4"]),
    ({"$contains": "paris"}, ["t3"]),
    ({"$not_contains": "Paris"}, ["t2", "t3", "t5", "t6"]),
    ({"$contains": "café"}, ["t5"]),
    ({"$contains": "100%"}, ["t6"]),
    ({"$contains": "_thing"}, ["t6"]),
    ({"$contains": "[x] *"}, ["t6"]),
    ({"$contains": "%"}, ["t6"]),
    ({"$contains": "nowhere"}, []),
    ({"$and": [{"$contains": "Paris"}, {"$contains": "pasta"}]}, ["t4"]),
    ({"$or": [{"$contains": "Bob"}, {"$contains": "May"}]}, ["t1", "t2"]),
    ({"$and": [{"$contains": "a"}, {"$not_contains": "Paris"}]}, ["t2", "t3", "t5"]),
    ({"$or": [{"$and": [{"$contains": "Paris"}, {"$not_contains": "May"}]}, {"$contains": "Bob"}]}, ["t2", "t4"]),
]
"""(where_document, expected ids in insertion order) over :data:`TEXT_RECORDS`: case-sensitive
substrings, no wildcard (``%``, ``_``, ``*`` are plain characters)."""


class StoreContract:
    """Contract tests for a store. Subclass it and provide ONE fixture, ``store``: a fresh,
    empty, writable :class:`memcore.Store` (close it after the test)::

        from memcore.testing import StoreContract

        class TestMyStore(StoreContract):
            @pytest.fixture
            def store(self, tmp_path):
                s = MyStore(tmp_path)
                yield s
                s.close()

    The suite writes only through :meth:`Store.apply` and checks records, vectors, links,
    scopes, membership, the operation log (ops exactly as :func:`memcore.stores._store.plan_ops`
    plans them), state, filters and atomicity. ``close()`` must be idempotent.
    """

    @pytest.fixture
    def store(self) -> Store:
        """Override: return (or yield) a fresh, empty, writable store."""
        pytest.fail(f"{type(self).__name__} must define the fixture 'store' (see StoreContract)")

    # -- helpers ---------------------------------------------------------------------------

    def expected_ops(self, store: Store, batch: WriteBatch) -> list[tuple[str, str, OpKind]]:
        """The ops ``batch`` must log on ``store``, planned from the store's current content."""
        deleted = set(batch.deletes)
        link_sources = {r.id for chunk in store.iter_records() for r in chunk if any(link.target in deleted for link in r.links)}
        involved = set(batch.deletes) | {r.id for r in batch.upserts} | link_sources
        for group in (batch.add_membership, batch.remove_membership):
            for rids in group.values():
                involved.update(rids)
        return plan_ops(batch, store.memberships(sorted(involved)), link_sources)

    def apply_checked(self, store: Store, batch: WriteBatch) -> Applied:
        """Apply ``batch`` and check its seq and logged ops."""
        expected = self.expected_ops(store, batch)
        before = store.last_seq()
        applied = store.apply(batch)
        assert isinstance(applied, Applied)
        assert applied.seq == before + 1 == store.last_seq()
        assert [(op.index, op.record_id, op.op) for op in applied.ops] == expected
        assert all(isinstance(op, Op) and op.seq == applied.seq for op in applied.ops)
        for index in {op.index for op in applied.ops}:
            assert store.ops_since(before, index) == [op for op in applied.ops if op.index == index]
        return applied

    def snapshot(self, store: Store) -> dict[str, Any]:
        """Everything observable, to check that a failed batch changed nothing."""
        ids = store.ids()
        records = store.get(ids)
        return {
            "seq": store.last_seq(),
            "count": store.count(),
            "ids": ids,
            "records": [r.to_dict(with_vectors=True) for r in records if r is not None],
            "members": {rid: sorted(ixs) for rid, ixs in store.memberships(ids).items()},
            "log": {ix: store.ops_since(0, ix) for ix in ("ix", "iy")},
            "state": store.state_items("ns"),
        }

    def seed_graph(self, store: Store) -> None:
        """a <- b, a <- c, b -> c; a in ix; b in ix and iy; c in no index; d alone."""
        self.apply_checked(store, WriteBatch(upserts=[_rec("a"), _rec("d")]))
        self.apply_checked(store, WriteBatch(upserts=[_rec("c", links=(Link("a", "about"),))]))
        self.apply_checked(
            store,
            WriteBatch(
                upserts=[_rec("b", links=(Link("a", "cites", 0.5), Link("c", "next")), vectors={"dense": [1, 0, 0]})],
                add_membership={"ix": ["a", "b"], "iy": ["b"]},
            ),
        )

    # -- empty store -------------------------------------------------------------------------

    def test_empty_store(self, store: Store) -> None:
        assert store.last_seq() == 0
        assert store.count() == 0
        assert store.ids() == []
        assert store.get(["nope"]) == [None]
        assert store.memberships(["nope"]) == {}
        assert store.log_start() == 0
        assert store.ops_since(0, "ix") == []
        assert store.get_state("ns", "k") is None
        assert store.get_state("ns", "k", 5) == 5
        assert store.state_items("ns") == {}

    # -- records -------------------------------------------------------------------------------

    def test_apply_get_roundtrip(self, store: Store) -> None:
        meta = {"speaker": "Alice", "n": 3, "x": 1.5, "ok": True, "none": None, "tags": ["a", "b"], "nested": {"k": [1, {"z": "q"}]}}
        a = _rec(
            "a",
            "first text",
            metadata=meta,
            vectors={"dense": [0.1, 0.2, 0.3], "other": [1.0, -1.0]},
            scope=Scope(user_id="u1", agent_id="ag", run_id="r9"),
            created_at=111.5,
            updated_at=222.25,
        )
        b = _rec("b", "second text — ünïcode ✓", links=(Link("a", "cites", 0.5), Link("a", "about", 2.0)), scope=Scope(user_id="u2"))
        self.apply_checked(store, WriteBatch(upserts=[a, b]))
        got_b, missing, got_a = store.get(["b", "missing", "a"])
        assert missing is None
        assert got_a is not None and got_b is not None
        assert got_a.id == "a" and got_a.text == "first text"
        assert got_a.metadata == meta
        assert got_a.scope == Scope(user_id="u1", agent_id="ag", run_id="r9")
        assert (got_a.created_at, got_a.updated_at) == (111.5, 222.25)
        assert set(got_a.vectors) == {"dense", "other"}
        for space in ("dense", "other"):
            assert got_a.vectors[space].dtype == np.float32
            np.testing.assert_array_equal(got_a.vectors[space], a.vectors[space])
        assert got_a.links == ()
        assert got_b.text == "second text — ünïcode ✓"
        assert set(got_b.links) == {Link("a", "cites", 0.5), Link("a", "about", 2.0)}
        assert got_b.scope == Scope(user_id="u2")
        assert got_b.vectors == {}
        assert _present(store.get(["a"], with_vectors=False))[0].vectors == {}
        assert store.count() == 2
        assert store.ids() == ["a", "b"]

    def test_texts_in_the_order_asked_and_after_updates_and_deletes(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", "alpha"), _rec("b", "beta — ü"), _rec("c", "gamma")]))
        assert store.texts(["c", "missing", "a", "b", "a"]) == ["gamma", None, "alpha", "beta — ü", "alpha"]
        assert store.texts([]) == []
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", "alpha two")], deletes=["c"]))
        assert store.texts(["a", "c"]) == ["alpha two", None]
        assert store.texts(["a", "b"]) == [r.text for r in _present(store.get(["a", "b"], with_vectors=False))]

    def test_record_without_scope_reads_back_none_or_empty(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a")]))
        scope = _present(store.get(["a"]))[0].scope
        assert scope is None or scope.is_empty()

    def test_returned_records_are_copies(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", metadata={"k": 1}, vectors={"dense": [1, 2]})]))
        got = _present(store.get(["a"]))[0]
        got.metadata["k"] = 99
        got.vectors["dense"][0] = 42
        again = _present(store.get(["a"]))[0]
        assert again.metadata == {"k": 1}
        assert again.vectors["dense"][0] == 1

    def test_upsert_keeps_created_at_and_insertion_order(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", created_at=100.0), _rec("b", created_at=101.0), _rec("c", created_at=102.0)]))
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", "new text", metadata={"v": 2}, created_at=500.0, updated_at=600.0)]))
        got = _present(store.get(["a"]))[0]
        assert got.text == "new text" and got.metadata == {"v": 2}
        assert got.created_at == 100.0
        assert got.updated_at == 600.0
        assert store.ids() == ["a", "b", "c"]
        assert store.count() == 3

    def test_upsert_replaces_vectors_and_links(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("t1"), _rec("t2")]))
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", vectors={"dense": [1, 2], "other": [3]}, links=(Link("t1"),))]))
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", vectors={"dense": [5, 6]}, links=(Link("t2", "x"),))]))
        got = _present(store.get(["a"]))[0]
        assert set(got.vectors) == {"dense"}
        np.testing.assert_array_equal(got.vectors["dense"], [5, 6])
        assert got.links == (Link("t2", "x"),)
        assert not store.vectors(["a"], "other")[1][0]

    def test_missing_vectors_names_ids_without_a_vector_of_the_space(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a", vectors={"dense": [1, 2]}), _rec("b", vectors={"other": [3]}), _rec("c")]))
        assert store.missing_vectors(["c", "a", "zz", "b"], "dense") == ["c", "zz", "b"]  # in the order asked, unknown ids too
        assert store.missing_vectors(["a", "b"], "other") == ["a"]
        assert store.missing_vectors(["a", "b"], "no-such-space") == ["a", "b"]
        assert store.missing_vectors([], "dense") == []
        self.apply_checked(store, WriteBatch(deletes=["a"]))
        assert store.missing_vectors(["a"], "dense") == ["a"]

    def test_upsert_of_member_logs_update(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a"), _rec("b")], add_membership={"ix": ["a", "b"], "iy": ["a"]}))
        applied = self.apply_checked(store, WriteBatch(upserts=[_rec("a", "changed")]))
        assert {(op.index, op.record_id, op.op) for op in applied.ops} == {("ix", "a", "update"), ("iy", "a", "update")}

    def test_delete_record_vectors_memberships_and_links(self, store: Store) -> None:
        self.seed_graph(store)
        before = store.last_seq()
        applied = self.apply_checked(store, WriteBatch(deletes=["a"]))
        assert sorted((op.index, op.record_id, op.op) for op in applied.ops) == [
            ("ix", "a", "remove"),
            ("ix", "b", "update"),
            ("iy", "b", "update"),
        ]
        assert store.get(["a"]) == [None]
        assert store.ids() == ["d", "c", "b"]
        assert "a" not in store.memberships(["a"])
        assert store.ids(index="ix") == ["b"]
        b, c = _present(store.get(["b", "c"]))
        assert b.links == (Link("c", "next"),)
        assert c.links == ()
        assert store.ops_since(before, "ix") == [op for op in applied.ops if op.index == "ix"]
        # a re-created "a" starts clean: no vectors, links or memberships left behind
        self.apply_checked(store, WriteBatch(upserts=[_rec("a")]))
        assert store.memberships(["a"]) == {"a": set()}
        assert store.ids() == ["d", "c", "b", "a"]
        assert not store.vectors(["a"], "dense")[1][0]
        assert all(link.target != "a" for r in _present(store.get(store.ids())) for link in r.links)

    def test_delete_removes_outgoing_links_and_vectors(self, store: Store) -> None:
        self.seed_graph(store)
        self.apply_checked(store, WriteBatch(deletes=["b"]))
        assert store.get(["b"]) == [None]
        matrix, present = store.vectors(["b"], "dense")
        assert not present[0]
        assert store.memberships(["a", "b"]) == {"a": {"ix"}}
        assert store.ids(index="iy") == []
        # a still exists and can be deleted with nobody linking to it any more but c
        applied = self.apply_checked(store, WriteBatch(deletes=["a"]))
        assert [(op.index, op.record_id, op.op) for op in applied.ops] == [("ix", "a", "remove")]
        assert _present(store.get(["c"]))[0].links == ()

    def test_delete_and_upsert_in_one_batch(self, store: Store) -> None:
        self.seed_graph(store)
        applied = self.apply_checked(store, WriteBatch(deletes=["c"], upserts=[_rec("e", links=(Link("d"),))], add_membership={"ix": ["e"]}))
        assert ("ix", "e", "add") in [(op.index, op.record_id, op.op) for op in applied.ops]
        assert store.get(["c"]) == [None]
        assert _present(store.get(["b"]))[0].links == (Link("a", "cites", 0.5),)
        assert store.ids(index="ix") == ["a", "b", "e"]

    # -- membership --------------------------------------------------------------------------

    def test_membership_add_remove_logged(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a"), _rec("b"), _rec("c")]))
        applied = self.apply_checked(store, WriteBatch(add_membership={"ix": ["b", "a"], "iy": ["c"]}))
        assert [(op.index, op.record_id, op.op) for op in applied.ops] == [("ix", "b", "add"), ("ix", "a", "add"), ("iy", "c", "add")]
        assert store.memberships(["a", "b", "c", "zz"]) == {"a": {"ix"}, "b": {"ix"}, "c": {"iy"}}
        assert store.ids(index="ix") == ["a", "b"]  # insertion order of the records, not of membership
        assert store.count(index="ix") == 2
        # adding a member again logs nothing
        again = self.apply_checked(store, WriteBatch(add_membership={"ix": ["a"]}))
        assert again.ops == ()
        removed = self.apply_checked(store, WriteBatch(remove_membership={"ix": ["a", "c"]}))
        assert [(op.index, op.record_id, op.op) for op in removed.ops] == [("ix", "a", "remove")]
        assert store.ids(index="ix") == ["b"]
        assert store.get(["a"])[0] is not None
        log = [(op.index, op.record_id, op.op) for op in store.ops_since(0, "ix")]
        assert log == [("ix", "b", "add"), ("ix", "a", "add"), ("ix", "a", "remove")]

    def test_membership_for_record_in_same_batch(self, store: Store) -> None:
        applied = self.apply_checked(store, WriteBatch(upserts=[_rec("n1"), _rec("n2", links=(Link("n1"),))], add_membership={"ix": ["n1", "n2"]}))
        assert [(op.index, op.record_id, op.op) for op in applied.ops] == [("ix", "n1", "add"), ("ix", "n2", "add")]
        assert store.ids(index="ix") == ["n1", "n2"]

    # -- atomicity -----------------------------------------------------------------------------

    def test_membership_for_missing_id_changes_nothing(self, store: Store) -> None:
        self.seed_graph(store)
        self.apply_checked(store, WriteBatch(state={("ns", "k"): 1}))
        before = self.snapshot(store)
        batch = WriteBatch(
            upserts=[_rec("new"), _rec("a", "changed")],
            deletes=["d"],
            add_membership={"ix": ["new", "missing"]},
            remove_membership={"iy": ["b"]},
            state={("ns", "k"): 2, ("ns", "k2"): 3},
        )
        with pytest.raises(NotFoundError):
            store.apply(batch)
        assert self.snapshot(store) == before
        assert store.get(["new"]) == [None]

    def test_link_to_missing_target_changes_nothing(self, store: Store) -> None:
        self.seed_graph(store)
        before = self.snapshot(store)
        batch = WriteBatch(upserts=[_rec("new", links=(Link("missing"),)), _rec("a", "changed")], add_membership={"ix": ["new"]}, state={("ns", "k"): 2})
        with pytest.raises(NotFoundError):
            store.apply(batch)
        assert self.snapshot(store) == before
        # a link to a record deleted by the same batch is a link to a missing target too
        with pytest.raises(NotFoundError):
            store.apply(WriteBatch(deletes=["d"], upserts=[_rec("new", links=(Link("d"),))]))
        assert self.snapshot(store) == before

    # -- reads: filters, scopes, indexes ---------------------------------------------------------

    def insert_filter_records(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec(rid, metadata=meta) for rid, meta in FILTER_RECORDS]))

    @pytest.mark.parametrize("where, expected", FILTER_CASES, ids=[str(w) for w, _ in FILTER_CASES])
    def test_filters(self, store: Store, where: dict[str, Any], expected: list[str]) -> None:
        self.insert_filter_records(store)
        node = parse_filter(where)
        assert store.ids(where=node) == expected
        assert store.count(where=node) == len(expected)

    def insert_text_records(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec(rid, text, metadata=meta) for rid, text, meta in TEXT_RECORDS]))

    @pytest.mark.parametrize("where_document, expected", TEXT_CASES, ids=[str(w) for w, _ in TEXT_CASES])
    def test_text_filters(self, store: Store, where_document: dict[str, Any], expected: list[str]) -> None:
        self.insert_text_records(store)
        node = parse_where_document(where_document)
        assert store.find_ids(where_document=node) == expected
        assert store.find_count(where_document=node) == len(expected)
        assert store.find_ids(where_document=node, offset=1, limit=1) == expected[1:2]

    def test_text_filters_with_where_scope_index(self, store: Store) -> None:
        self.apply_checked(
            store,
            WriteBatch(
                upserts=[_rec(rid, text, metadata=meta, scope=Scope(user_id="u1" if rid in ("t1", "t2", "t4") else "u2")) for rid, text, meta in TEXT_RECORDS],
                add_membership={"ix": ["t4", "t2"]},
            ),
        )
        paris = parse_where_document({"$contains": "Paris"})
        assert store.find_ids(where=parse_filter({"tag": "b"}), where_document=paris) == ["t4"]
        assert store.find_count(where=parse_filter({"tag": "a"}), where_document=paris) == 1
        assert store.find_ids(where_document=paris, scope=Scope(user_id="u2")) == []
        assert store.find_ids(where_document=parse_where_document({"$contains": "a"}), scope=Scope(user_id="u1"), index="ix") == ["t2", "t4"]
        assert store.find_count(where_document=paris, index="ix") == 1

    def test_pages(self, store: Store) -> None:
        self.insert_filter_records(store)
        every = [rid for rid, _ in FILTER_RECORDS]
        assert store.find_ids() == every
        pages = [store.find_ids(offset=start, limit=2) for start in range(0, 8, 2)]
        assert pages == [every[0:2], every[2:4], every[4:6], []]
        assert store.find_ids(offset=4) == every[4:]
        assert store.find_ids(limit=0) == []
        assert store.find_ids(where=parse_filter({"tag": {"$ne": "a"}}), offset=1, limit=2) == ["f4", "f5"]

    # -- record history (stores that keep it) ----------------------------------------------

    def test_history(self, store: Store) -> None:
        if not store.keeps_history:
            pytest.skip(f"{type(store).__name__} keeps no history")
        assert store.history("h1") == []
        alice = Scope(user_id="alice")
        first = self.apply_checked(store, WriteBatch(upserts=[_rec("h1", "one", metadata={"v": 1}, scope=alice), _rec("h2", "other")]))
        second = self.apply_checked(store, WriteBatch(upserts=[_rec("h1", "two", metadata={"v": 2}, scope=alice, updated_at=2000.0)]))
        self.apply_checked(
            store, WriteBatch(upserts=[_rec("h1", "two", metadata={"v": 2}, scope=alice, vectors={"s": [1.0, 0.0]})])
        )  # vectors only: no version
        versions = store.history("h1")
        assert [(v.seq, v.op, v.text, v.metadata, v.scope) for v in versions] == [
            (first.seq, "insert", "one", {"v": 1}, alice),
            (second.seq, "update", "two", {"v": 2}, alice),
        ]
        assert versions[1].at == 2000.0 and all(v.record_id == "h1" for v in versions)
        third = self.apply_checked(store, WriteBatch(deletes=["h1"]))  # erases the versions' texts and metadata
        assert [(v.seq, v.op, v.text, v.metadata, v.scope) for v in store.history("h1")] == [
            (first.seq, "insert", None, None, alice),
            (second.seq, "update", None, None, alice),
            (third.seq, "delete", None, None, alice),
        ]
        assert [v.op for v in store.history("h2")] == ["insert"]
        # forgetting a scope erases its versions, deleted records' included; others stay
        self.apply_checked(store, WriteBatch(forget_scopes=[alice]))
        assert store.history("h1") == []
        assert [v.op for v in store.history("h2")] == ["insert"]

    def test_history_copied_in_with_import_history(self, store: Store) -> None:
        """What ``memcore migrate`` reads (:meth:`Store.history_ids`, :meth:`Store.history`)
        and writes (:meth:`Store.import_history`); a store keeping no history refuses both."""
        if not store.keeps_history:
            with pytest.raises(ConfigError):
                store.history_ids()
            with pytest.raises(ConfigError):
                store.import_history([])
            return
        alice = Scope(user_id="alice")
        self.apply_checked(store, WriteBatch(upserts=[_rec("h1", "one", scope=alice), _rec("h2", "other")]))
        self.apply_checked(store, WriteBatch(upserts=[_rec("h1", "two", metadata={"v": 2}, scope=alice)], deletes=["h2"]))
        assert store.history_ids() == ["h1", "h2"]
        copied = [Version(7, "h1", "insert", "zero", {"v": 0}, alice, 10.0), Version(9, "h1", "update", "two", {"v": 2}, alice, 20.0)]
        store.import_history(copied)
        assert store.history("h1") == copied
        gone = [Version(3, "gone", "insert", None, None, None, 5.0), Version(4, "gone", "delete", None, None, None, 6.0)]
        store.import_history(gone)
        assert store.history("gone") == gone
        assert [v.op for v in store.history("h2")] == ["insert", "delete"]  # untouched
        assert set(store.history_ids()) == {"h1", "h2", "gone"}

    def test_no_filter_and_limit(self, store: Store) -> None:
        self.insert_filter_records(store)
        assert store.ids(where=None) == [rid for rid, _ in FILTER_RECORDS]
        assert store.ids(limit=2) == ["f1", "f2"]
        assert store.ids(where=parse_filter({"tag": {"$ne": "zzz"}}), limit=3) == ["f1", "f2", "f3"]

    def test_scope_filtering(self, store: Store) -> None:
        self.apply_checked(
            store,
            WriteBatch(
                upserts=[
                    _rec("s1", scope=Scope(user_id="u1", agent_id="a1"), metadata={"k": 1}),
                    _rec("s2", scope=Scope(user_id="u1"), metadata={"k": 2}),
                    _rec("s3", scope=Scope(user_id="u2", agent_id="a1", run_id="r1"), metadata={"k": 1}),
                    _rec("s4", metadata={"k": 1}),
                ]
            ),
        )
        cases = [
            (Scope(user_id="u1"), ["s1", "s2"]),
            (Scope(agent_id="a1"), ["s1", "s3"]),
            (Scope(user_id="u1", agent_id="a1"), ["s1"]),
            (Scope(run_id="r1"), ["s3"]),
            (Scope(user_id="nobody"), []),
            (None, ["s1", "s2", "s3", "s4"]),
        ]
        for scope, expected in cases:
            assert store.ids(scope=scope) == expected, scope
            assert store.count(scope=scope) == len(expected), scope
        k1 = parse_filter({"k": 1})
        assert store.ids(where=k1, scope=Scope(user_id="u1")) == ["s1"]
        assert store.count(where=k1, scope=Scope(agent_id="a1")) == 2

    def test_index_filtering(self, store: Store) -> None:
        self.insert_filter_records(store)
        self.apply_checked(store, WriteBatch(add_membership={"ix": ["f4", "f1", "f3"], "iy": ["f2"]}))
        assert store.ids(index="ix") == ["f1", "f3", "f4"]
        assert store.count(index="ix") == 3
        assert store.ids(index="iy") == ["f2"]
        assert store.ids(index="unknown-index") == []
        assert store.count(index="unknown-index") == 0
        tag_a = parse_filter({"tag": "a"})
        assert store.ids(where=tag_a, index="ix") == ["f1", "f3"]
        assert store.count(where=tag_a, index="iy") == 0
        assert store.ids(index="ix", limit=1) == ["f1"]
        batches = list(store.iter_records(index="ix", batch_size=2))
        assert [[r.id for r in chunk] for chunk in batches] == [["f1", "f3"], ["f4"]]

    def test_vectors_with_present_mask(self, store: Store) -> None:
        self.apply_checked(
            store,
            WriteBatch(upserts=[_rec("v1", vectors={"a": [1, 2, 3, 4], "b": [1, 1, 1]}), _rec("v2", vectors={"a": [5, 6, 7, 8]}), _rec("v3")]),
        )
        matrix, present = store.vectors(["v2", "missing", "v1", "v3"], "a")
        assert matrix.shape == (4, 4)
        assert matrix.dtype == np.float32
        assert present.dtype == bool
        assert present.tolist() == [True, False, True, False]
        np.testing.assert_array_equal(matrix[0], [5, 6, 7, 8])
        np.testing.assert_array_equal(matrix[2], [1, 2, 3, 4])
        assert not matrix[1].any() and not matrix[3].any()
        matrix, present = store.vectors(["v2"], "b")
        assert matrix.shape[0] == 1 and present.tolist() == [False]
        matrix, present = store.vectors([], "a")
        assert matrix.shape[0] == 0 and present.shape == (0,)

    # -- state, sequence numbers, log ------------------------------------------------------------

    def test_state_namespaces_lists_those_holding_keys(self, store: Store) -> None:
        before = set(store.state_namespaces())
        self.apply_checked(store, WriteBatch(state={("ns@scope:{}", "a"): 1, ("other", "a"): 2}))
        assert set(store.state_namespaces()) - before == {"ns@scope:{}", "other"}
        self.apply_checked(store, WriteBatch(state={("other", "a"): None}))
        assert set(store.state_namespaces()) - before == {"ns@scope:{}"}

    def test_state_set_get_delete(self, store: Store) -> None:
        value = {"tiers": ["stm", "ltm"], "heat": {"x": 1.5}, "ok": True, "none": None}
        self.apply_checked(store, WriteBatch(state={("ns", "a"): value, ("ns", "b"): 3, ("other", "a"): "o"}))
        assert store.get_state("ns", "a") == value
        assert store.get_state("ns", "b") == 3
        assert store.get_state("other", "a") == "o"
        assert store.state_items("ns") == {"a": value, "b": 3}
        self.apply_checked(store, WriteBatch(state={("ns", "a"): None, ("ns", "b"): [1, 2]}))
        assert store.get_state("ns", "a") is None
        assert store.get_state("ns", "a", "dflt") == "dflt"
        assert store.state_items("ns") == {"b": [1, 2]}
        assert store.state_items("other") == {"a": "o"}
        got = store.get_state("ns", "b")
        got.append(3)
        assert store.get_state("ns", "b") == [1, 2]

    def test_last_seq_increments_per_batch(self, store: Store) -> None:
        assert store.last_seq() == 0
        seqs = [
            store.apply(WriteBatch(upserts=[_rec("a")])).seq,
            store.apply(WriteBatch(state={("ns", "k"): 1})).seq,
            store.apply(WriteBatch(add_membership={"ix": ["a"]})).seq,
            store.apply(WriteBatch(deletes=["a"])).seq,
        ]
        assert seqs == [1, 2, 3, 4]
        assert store.last_seq() == 4

    def test_ops_since_prune_log_and_log_start(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a"), _rec("b"), _rec("c")]))  # seq 1, no ops
        self.apply_checked(store, WriteBatch(add_membership={"ix": ["a"]}))  # seq 2
        self.apply_checked(store, WriteBatch(add_membership={"ix": ["b"], "iy": ["b"]}))  # seq 3
        self.apply_checked(store, WriteBatch(remove_membership={"ix": ["a"]}))  # seq 4
        assert [(op.seq, op.record_id, op.op) for op in store.ops_since(0, "ix")] == [(2, "a", "add"), (3, "b", "add"), (4, "a", "remove")]
        assert [(op.seq, op.record_id) for op in store.ops_since(2, "ix")] == [(3, "b"), (4, "a")]
        assert store.ops_since(4, "ix") == []
        assert [op.index for op in store.ops_since(0, "iy")] == ["iy"]
        store.prune_log(3)
        assert store.log_start() == 3
        assert [(op.seq, op.record_id) for op in store.ops_since(0, "ix")] == [(4, "a")]
        assert store.ops_since(0, "iy") == []
        store.prune_log(1)  # never moves back
        assert store.log_start() == 3
        assert store.last_seq() == 4
        self.apply_checked(store, WriteBatch(add_membership={"iy": ["c"]}))
        assert [(op.seq, op.record_id, op.op) for op in store.ops_since(0, "iy")] == [(5, "c", "add")]

    def test_read_log_is_one_consistent_read(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a"), _rec("b")], add_membership={"ix": ["a"]}))  # seq 1
        self.apply_checked(store, WriteBatch(add_membership={"ix": ["b"]}))  # seq 2
        store.prune_log(1)
        read = store.read_log(0, "ix")
        assert (read.start, read.last) == (store.log_start(), store.last_seq()) == (1, 2)
        assert [(op.seq, op.record_id) for op in read.ops] == [(2, "b")]

    def test_drop_indexes(self, store: Store) -> None:
        self.seed_graph(store)
        applied = self.apply_checked(store, WriteBatch(drop_indexes=["ix"], state={("indexes", "ix"): None}))
        assert all(op.index != "ix" for op in applied.ops)
        assert store.ids(index="ix") == []
        assert store.count(index="ix") == 0
        assert store.ops_since(0, "ix") == []
        assert store.memberships(["a", "b"]) == {"a": set(), "b": {"iy"}}
        assert store.ids(index="iy") == ["b"]
        assert [op.record_id for op in store.ops_since(0, "iy")] == ["b"]
        assert store.count() == 4
        # the index name can be used again from scratch
        readd = self.apply_checked(store, WriteBatch(add_membership={"ix": ["d"]}))
        assert [(op.index, op.record_id, op.op) for op in readd.ops] == [("ix", "d", "add")]
        assert store.ids(index="ix") == ["d"]

    def test_drop_with_membership_in_same_batch_logs_nothing_for_it(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a")], add_membership={"ix": ["a"]}))
        applied = self.apply_checked(store, WriteBatch(upserts=[_rec("a", "changed")], drop_indexes=["ix"]))
        assert applied.ops == ()
        assert store.ids(index="ix") == []

    def test_read_tail_reports_the_last_change_of_an_index_definition(self, store: Store) -> None:
        """:attr:`LogTail.definitions`: None (the store does not say), or the sequence number
        of the last batch that wrote an index definition or dropped an index, read with the
        logs (an empty ``since`` reads it alone)."""
        first = store.read_tail({}).definitions
        if first is None:
            return  # the store does not say: the collection reads the definitions at each catch-up
        assert first == 0
        self.apply_checked(store, WriteBatch(upserts=[_rec("a")], add_membership={"ix": ["a"]}, state={("service", "k"): 1}))
        assert store.read_tail({"ix": 0}).definitions == 0  # records, membership and other state are no definition change
        created = self.apply_checked(store, WriteBatch(state={("indexes", "ix"): {"kind": "exact", "config": {}, "generation": "g1"}}))
        assert store.read_tail({"ix": 0}).definitions == store.read_tail({}).definitions == created.seq
        self.apply_checked(store, WriteBatch(upserts=[_rec("b")], add_membership={"ix": ["b"]}))
        tail = store.read_tail({"ix": created.seq})
        assert tail.definitions == created.seq and [op.record_id for op in tail.logs["ix"].ops] == ["b"]
        dropped = self.apply_checked(store, WriteBatch(drop_indexes=["ix"], state={("indexes", "ix"): None}))
        assert store.read_tail({"ix": created.seq}).definitions == dropped.seq
        recreated = self.apply_checked(store, WriteBatch(state={("indexes", "ix"): {"kind": "exact", "config": {}, "generation": "g2"}}))
        assert store.read_tail({}).definitions == recreated.seq
        alone = self.apply_checked(store, WriteBatch(drop_indexes=["iy"]))  # a drop without a definition counts too
        assert store.read_tail({"ix": 0}).definitions == alone.seq
        assert WriteBatch(state={("indexes", "x"): None}).changes_definitions() and not WriteBatch(state={("x", "y"): 1}).changes_definitions()

    def test_close_is_idempotent(self, store: Store) -> None:
        self.apply_checked(store, WriteBatch(upserts=[_rec("a")]))
        store.close()
        store.close()
