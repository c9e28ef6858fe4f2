"""Model-based test: a SQLite Collection against a plain dict model, with close/reopen.

The model is ``{id: (text, metadata, set of index names)}`` plus the links between
records (``{source: set of targets}``). Every rule performs an
operation on both and checks the outcome (including the errors bad operations must raise
without changing anything); invariants compare counts and memberships after each step.
Retrieval uses two exact cosine indexes ``a`` and ``b`` on the default hashing space and
texts from a small vocabulary, so queries share words with records.
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from memcore import Collection, DuplicateIdError, NotFoundError, ValidationError
from memcore.model._record import content_id
from memcore.testing import examples

INDEXES = ("a", "b")
WORDS = ["cat", "dog", "bird", "fish", "red", "blue", "green", "fast", "slow", "big", "small", "tree"]
POOL = [f"r{i}" for i in range(8)]  # explicit ids: small, so they collide

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
metadatas = st.one_of(
    st.just({}), st.fixed_dictionaries({"n": st.integers(0, 3)}), st.fixed_dictionaries({"n": st.integers(0, 3), "tag": st.sampled_from(["x", "y"])})
)
index_sets = st.one_of(st.none(), st.lists(st.sampled_from(INDEXES), unique=True, max_size=2))

# where filters on the int field "n", with an independent model-side predicate
WHERE = {
    "eq": (lambda v: {"n": v}, lambda m, v: "n" in m and m["n"] == v),
    "ne": (lambda v: {"n": {"$ne": v}}, lambda m, v: m.get("n") != v),
    "gte": (lambda v: {"n": {"$gte": v}}, lambda m, v: "n" in m and m["n"] >= v),
    "lt": (lambda v: {"n": {"$lt": v}}, lambda m, v: "n" in m and m["n"] < v),
    "in": (lambda v: {"n": {"$in": [v, v + 1]}}, lambda m, v: "n" in m and m["n"] in (v, v + 1)),
    "nin": (lambda v: {"n": {"$nin": [v]}}, lambda m, v: m.get("n") != v),
    "or": (lambda v: {"$or": [{"n": v}, {"tag": "x"}]}, lambda m, v: m.get("n") == v or m.get("tag") == "x"),
}


class CollectionMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="memcore-sm-")
        self.coll = Collection.create(self.dir)
        for name in INDEXES:
            self.coll.create_index(name, "exact")
        self.model: dict[str, tuple[str, dict, set[str]]] = {}
        self.links: dict[str, set[str]] = {}

    def teardown(self):
        try:
            self.coll.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------

    def members(self, index: str) -> set[str]:
        return {rid for rid, (_, _, ixs) in self.model.items() if index in ixs}

    def observed(self) -> tuple:
        return (
            sorted(self.coll.ids()),
            {name: sorted(self.coll.ids(index=name)) for name in INDEXES},
            self.coll.store.last_seq(),
        )

    def draw_id(self, data, *, known_only: bool = False) -> str:
        known = sorted(self.model)
        if known_only or (known and data.draw(st.integers(0, 4), label="pick_known") > 0):
            return data.draw(st.sampled_from(known), label="id")
        return data.draw(st.sampled_from(POOL + ["never-inserted"]), label="id")

    # -- writes ------------------------------------------------------------------------

    @rule(data=st.data(), text=texts, metadata=metadatas, indexes=index_sets, explicit=st.booleans())
    def insert(self, data, text, metadata, indexes, explicit):
        rid = data.draw(st.sampled_from(POOL), label="explicit_id") if explicit else content_id(text, metadata)
        item = {"text": text, "metadata": metadata, **({"id": rid} if explicit else {})}
        targets = set(INDEXES if indexes is None else indexes)
        old = self.model.get(rid)
        if old is not None and ((old[0], old[1]) != (text, metadata) or self.links.get(rid)):
            before = self.observed()
            try:
                self.coll.insert([item], indexes=indexes)
            except DuplicateIdError:
                pass
            else:
                raise AssertionError("a different record under an existing id must raise DuplicateIdError")
            assert self.observed() == before
            return
        assert self.coll.insert([item], indexes=indexes) == [rid]
        self.model[rid] = (text, metadata, (old[2] if old else set()) | targets)

    @rule(data=st.data(), items=st.lists(st.tuples(st.sampled_from(POOL), texts, metadatas), min_size=1, max_size=3), indexes=index_sets)
    def insert_batch(self, data, items, indexes):
        batch: dict[str, tuple[str, dict]] = {}
        conflict = False
        for rid, text, meta in items:
            if rid in batch and batch[rid] != (text, meta):
                conflict = True
            batch.setdefault(rid, (text, meta))
            old = self.model.get(rid)
            if old is not None and ((old[0], old[1]) != (text, meta) or self.links.get(rid)):
                conflict = True
        records = [{"id": rid, "text": text, "metadata": meta} for rid, text, meta in items]
        if conflict:
            before = self.observed()
            try:
                self.coll.insert(records, indexes=indexes)
            except DuplicateIdError:
                pass
            else:
                raise AssertionError("conflicting ids in a batch must raise DuplicateIdError")
            assert self.observed() == before
            return
        assert self.coll.insert(records, indexes=indexes) == list(batch)
        targets = set(INDEXES if indexes is None else indexes)
        for rid, (text, meta) in batch.items():
            old = self.model.get(rid)
            self.model[rid] = (text, meta, (old[2] if old else set()) | targets)

    @rule(data=st.data(), index=st.sampled_from(INDEXES))
    def insert_to_index(self, data, index):
        rid = self.draw_id(data)
        if rid not in self.model:
            before = self.observed()
            try:
                self.coll.insert_to_index(index, rid)
            except NotFoundError:
                pass
            else:
                raise AssertionError("insert_to_index of an unknown id must raise NotFoundError")
            assert self.observed() == before
            return
        self.coll.insert_to_index(index, rid)
        self.model[rid][2].add(index)

    @rule(data=st.data(), index=st.sampled_from(INDEXES))
    def remove_from_index(self, data, index):
        rid = self.draw_id(data)
        if rid not in self.model or index not in self.model[rid][2]:
            before = self.observed()
            try:
                self.coll.remove_from_index(index, rid)
            except NotFoundError:
                pass
            else:
                raise AssertionError("remove_from_index of a non-member must raise NotFoundError")
            assert self.observed() == before
            return
        self.coll.remove_from_index(index, rid)
        self.model[rid][2].discard(index)
        assert self.coll.get(rid).text == self.model[rid][0]  # the record stays

    @rule(data=st.data(), n=st.integers(1, 3))
    def delete(self, data, n):
        ids = [self.draw_id(data) for _ in range(n)]
        if any(rid not in self.model for rid in ids):
            before = self.observed()
            try:
                self.coll.delete(ids)
            except NotFoundError:
                pass
            else:
                raise AssertionError("delete of an unknown id must raise NotFoundError")
            assert self.observed() == before
            return
        assert self.coll.delete(ids) == len(set(ids))
        for rid in ids:
            self.model.pop(rid, None)
            self.links.pop(rid, None)
        for targets in self.links.values():
            targets.difference_update(ids)  # links to deleted records go with them

    @rule(data=st.data(), text=st.one_of(st.none(), texts), metadata=st.one_of(st.none(), metadatas))
    def update(self, data, text, metadata):
        rid = self.draw_id(data)
        if rid not in self.model:
            before = self.observed()
            try:
                self.coll.update(rid, text=text, metadata=metadata)
            except NotFoundError:
                pass
            else:
                raise AssertionError("update of an unknown id must raise NotFoundError")
            assert self.observed() == before
            return
        new = self.coll.update(rid, text=text, metadata=metadata)
        old_text, old_meta, ixs = self.model[rid]
        self.model[rid] = (old_text if text is None else text, old_meta if metadata is None else metadata, ixs)
        assert (new.text, new.metadata) == self.model[rid][:2]

    @rule(data=st.data())
    def link(self, data):
        source, target = self.draw_id(data), self.draw_id(data)
        if source not in self.model or target not in self.model or source == target:
            before = self.observed()
            try:
                self.coll.link(source, target)
            except (NotFoundError, ValidationError):
                pass
            else:
                raise AssertionError("a link from/to an unknown record or to itself must fail")
            assert self.observed() == before
            return
        self.coll.link(source, target)
        self.links.setdefault(source, set()).add(target)

    @rule(data=st.data())
    def unlink(self, data):
        source, target = self.draw_id(data), self.draw_id(data)
        if source not in self.model:
            try:
                self.coll.unlink(source, target)
            except NotFoundError:
                return
            raise AssertionError("unlink from an unknown record must raise NotFoundError")
        expected = 1 if target in self.links.get(source, ()) else 0
        assert self.coll.unlink(source, target) == expected
        self.links.get(source, set()).discard(target)

    @rule()
    def reopen(self):
        self.coll.close()
        self.coll = Collection.create(self.dir)
        # after a clean close nothing is missing or corrupt: every index loads, none is rebuilt
        assert all(h.loaded_from_disk for h in self.coll._indexes.values())

    # -- reads -------------------------------------------------------------------------

    @rule(index=st.sampled_from(INDEXES), query=texts, k=st.integers(1, 12), op=st.one_of(st.none(), st.sampled_from(sorted(WHERE))), value=st.integers(0, 3))
    def retrieve(self, index, query, k, op, value):
        candidates = self.members(index)
        where = None
        if op is not None:
            make, pred = WHERE[op]
            where = make(value)
            candidates = {rid for rid in candidates if pred(self.model[rid][1], value)}
        hits = self.coll.retrieve(query, index=index, k=k, where=where)
        got = [h.id for h in hits]
        assert len(got) == len(set(got)) <= k
        assert set(got) <= candidates
        if k >= len(candidates):
            assert set(got) == candidates
        else:
            assert len(got) == k
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        for h in hits:
            assert (h.record.text, h.record.metadata) == self.model[h.id][:2]
            assert -1.0001 <= h.score <= 1.0001

    @rule(data=st.data(), index=st.sampled_from(INDEXES))
    def retrieve_own_text(self, data, index):
        """A member's own text finds it first (ties aside: every hit at the top score)."""
        members = sorted(self.members(index))
        if not members:
            return
        rid = data.draw(st.sampled_from(members), label="member")
        hits = self.coll.retrieve(self.model[rid][0], index=index, k=len(members))
        top = hits[0].score
        assert top > 0.999
        assert rid in [h.id for h in hits if h.score >= top - 1e-5]

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def counts_and_memberships(self):
        assert self.coll.count() == len(self.model)
        assert set(self.coll.ids()) == set(self.model)
        for name in INDEXES:
            members = self.members(name)
            assert self.coll.count(index=name) == len(members)
            assert set(self.coll.ids(index=name)) == members
            assert len(self.coll.index(name)) == len(members)  # the live index agrees with the store

    @invariant()
    def records_match(self):
        ids = sorted(self.model)
        for rec, rid in zip(self.coll.get_many(ids), ids):
            assert rec is not None and (rec.text, rec.metadata) == self.model[rid][:2]
            assert {l.target for l in rec.links} == self.links.get(rid, set())


CollectionMachine.TestCase.settings = settings(max_examples=examples(200), stateful_step_count=20, deadline=None)
TestCollectionStateMachine = CollectionMachine.TestCase
