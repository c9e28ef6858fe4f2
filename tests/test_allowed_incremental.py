"""Allowed sets follow writes incrementally (issue 14): a cached set changed by a write is
derived from the old one and inherits its memos, and the ``exact`` index brings its
translation (rows) up to date from them instead of translating every id again. The answers
stay those of a plain ``frozenset`` (no memo at all)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memcore.plugin import AllowedIds, merge_sorted
from memcore import Collection, Query
from memcore.indexes._allowed import INHERIT_MAX


class Owner:
    """A memo owner (held weakly by the memos)."""


def test_derive_inherits_memos_with_the_changed_ids():
    base = AllowedIds(["a", "b", "c"])
    owner = Owner()
    assert base.memo(owner, "t", 1, lambda: "v1") == "v1"
    child = base.derive(["d"], ["a"])
    assert child == frozenset({"b", "c", "d"})
    calls = []

    def update(value, version, changed):
        calls.append((value, version, changed))
        return value + "+"

    assert child.memo(owner, "t", 2, lambda: "fresh", update) == "v1+"
    assert calls == [("v1", 1, frozenset({"a", "d"}))]
    assert child.memo(owner, "t", 2, lambda: "fresh", update) == "v1+"  # memoized now
    # a derived set that never computed passes its inheritance on, with both changes
    grandchild = child.derive(["e"], []).derive([], ["b"])
    calls.clear()
    assert grandchild.memo(owner, "t", 3, lambda: "fresh", update) == "v1++"
    assert calls == [("v1+", 2, frozenset({"e", "b"}))]
    # the same set, the owner changed: update sees no changed id
    calls.clear()
    assert grandchild.memo(owner, "t", 4, lambda: "fresh", update) == "v1+++"
    assert calls == [("v1++", 3, frozenset())]
    # update may refuse: compute runs
    assert grandchild.memo(owner, "t", 5, lambda: "fresh", lambda *a: None) == "fresh"
    # without update, an inherited memo is not used
    assert base.derive(["x"], []).memo(owner, "t", 1, lambda: "fresh") == "fresh"
    # another owner never sees it
    assert base.derive(["x"], []).memo(Owner(), "t", 1, lambda: "other", update) == "other"


def test_derive_drops_inheritance_past_the_limit():
    base = AllowedIds(["a"])
    owner = Owner()
    base.memo(owner, "t", 1, lambda: 1)
    big = base.derive([f"n{i}" for i in range(INHERIT_MAX + 1)], [])
    assert big.memo(owner, "t", 1, lambda: "fresh", lambda *a: "updated") == "fresh"


def test_merge_sorted():
    values = np.array([1, 4, 7, 9], dtype=np.int64)
    assert merge_sorted(values, [], [12, 10]).tolist() == [1, 4, 7, 9, 10, 12]
    assert merge_sorted(values, [4, 5], [2, 7, 8]).tolist() == [1, 2, 7, 8, 9]
    assert merge_sorted(np.zeros(0, dtype=np.int64), [], [3, 3]).tolist() == [3]
    assert merge_sorted(values, [1, 4, 7, 9], []).tolist() == []


@pytest.fixture
def col(tmp_path):
    c = Collection.create(tmp_path / "c")
    c.create_index("vec", "exact", metric="cosine")
    c.create_index("other", "exact")
    rng = np.random.default_rng(0)
    c.insert(
        [
            {"id": f"r{i}", "text": f"doc {i}", "vectors": {"default": rng.standard_normal(c.spaces["default"].dim)}, "metadata": {"u": f"u{i % 7}"}}
            for i in range(300)
        ]
    )
    yield c
    c.close()


def test_after_an_insert_the_rows_are_updated_not_translated_again(col, monkeypatch):
    index = col._indexes["vec"].index
    calls = []
    translate = index._allowed_rows
    monkeypatch.setattr(index, "_allowed_rows", lambda allowed: calls.append(len(allowed)) or translate(allowed))
    q = Query(text="doc", k=5, where={"u": "u3"})
    col.search_index("vec", q, 5)
    assert len(calls) == 1
    for i in range(5):
        col.insert([{"id": f"w{i}", "text": f"doc new {i}", "metadata": {"u": "u3"}}], indexes=["vec"])
        hits = col.search_index("vec", Query(text=f"doc new {i}", k=50, where={"u": "u3"}), 50)
        assert f"w{i}" in {h.id for h in hits}
    assert len(calls) == 1  # every later query updated the memo


def test_random_writes_keep_filtered_answers_exact(col):
    rng = random.Random(5)
    vecs = np.random.default_rng(5)
    dim = col.spaces["default"].dim
    filters = [{"u": "u1"}, {"u": {"$in": ["u2", "u5"]}}, {"u": {"$ne": "u0"}}]
    live = {f"r{i}" for i in range(300)}
    for step in range(60):
        action = rng.choice(["insert", "insert", "update", "delete", "insert_other"])
        if action.startswith("insert"):
            rid = f"n{step}"
            record = {"id": rid, "text": f"doc {step}", "vectors": {"default": vecs.standard_normal(dim)}, "metadata": {"u": f"u{rng.randrange(7)}"}}
            col.insert([record], indexes=["other"] if action == "insert_other" else ["vec", "other"])
            live.add(rid)
        elif action == "update":
            rid = rng.choice(sorted(live))
            col.update(rid, metadata={"u": f"u{rng.randrange(7)}"})
        else:
            rid = rng.choice(sorted(live))
            col.delete([rid])
            live.discard(rid)
        if step % 4 == 0 and action != "delete":  # a record of the other index joins vec
            extra = sorted(set(col.ids(index="other")) - set(col.ids(index="vec")))
            if extra:
                col.insert_to_index("vec", extra[:2])
        q = Query(vectors={"default": vecs.standard_normal(dim).astype(np.float32)}, k=20)
        for where in filters:
            fq = Query(vectors=q.vectors, k=20, where=where)
            got = [(h.id, round(h.score, 5)) for h in col.search_index("vec", fq, 20)]
            plain = frozenset(col.ids(where=where))  # a plain set: no memo, translated afresh
            want = [(h.id, round(h.score, 5)) for h in col._indexes["vec"].index.search(fq, 20, plain)]
            assert got == want, (step, action, where)


def test_a_derived_set_drops_and_adds_held_rows(col):
    index = col._indexes["vec"].index
    base = AllowedIds(col.ids(where={"u": "u1"}))
    q = Query(vectors={"default": np.ones(col.spaces["default"].dim, dtype=np.float32)}, k=400)
    first = index.search(q, 400, base)
    gone, joined = sorted(base)[:3], ["r0", "r2"]  # held rows leave and enter, the index unchanged
    derived = base.derive(joined, gone)
    got = index.search(q, 400, derived)
    assert [h.id for h in got] == [h.id for h in index.search(q, 400, frozenset(derived))]
    assert not set(gone) & {h.id for h in got} and set(joined) <= {h.id for h in got}
    assert len(got) == len(first) - 1
