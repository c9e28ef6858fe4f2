"""Bad input raises the right typed MemcoreError and leaves the store exactly as it was.

"Unchanged" is checked on everything observable: the records (text, metadata, scope,
links), each index's members and the store's operation sequence number.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import pytest

import memcore
from memcore import (
    Collection,
    ConfigError,
    DimensionError,
    DuplicateIdError,
    FilterError,
    MemcoreError,
    NotFoundError,
    Query,
    Record,
    Scope,
    UnknownComponentError,
    ValidationError,
)
from memcore._plugins._host import PluginHost
from memcore.model._checks import MAX_TEXT_CHARS
from memcore.testing import fused

DIM = 256


@pytest.fixture(autouse=True)
def _no_memcore_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


@pytest.fixture(params=["memory", "sqlite"])
def coll(request, tmp_path, make_spaces):
    path = None if request.param == "memory" else tmp_path / "coll"
    c = Collection.create(path, spaces=make_spaces())
    c.create_index("a", "exact")
    c.create_index("b", "exact", space="small", metric="l2")
    c.insert([{"id": "r1", "text": "the cat sat on the mat", "metadata": {"n": 1}}, {"id": "r2", "text": "dogs bark", "metadata": {"n": 2}}])
    c.insert([{"id": "r3", "text": "only in a", "scope": {"user_id": "u"}}], indexes="a")
    c.link("r1", "r2")
    yield c
    c.close()


def state(c: Collection) -> tuple:
    ids = c.ids()
    records = [(r.id, r.text, r.metadata, r.scope, tuple(r.links), {k: v.tobytes() for k, v in r.vectors.items()}) for r in c.get_many(ids)]
    listed = c.list_indexes()
    members = {i["name"]: c.ids(index=i["name"]) for i in listed}
    sizes = {i["name"]: i["size"] for i in listed}
    return c.count(), ids, records, members, sizes, c.store.last_seq()


@contextlib.contextmanager
def rejected(c: Collection, error: type[MemcoreError], match: str | None = None):
    """Expect ``error`` (a MemcoreError subclass) and no change at all to the collection."""
    assert issubclass(error, MemcoreError)
    before = state(c)
    with pytest.raises(error, match=match) as info:
        yield info
    assert isinstance(info.value, MemcoreError)
    assert state(c) == before


def vec(value: float, dim: int = DIM) -> np.ndarray:
    v = np.ones(dim, dtype=np.float64)
    v[dim // 2] = value
    return v


# -- vectors ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_record_vectors(coll, bad):
    with rejected(coll, ValidationError, "NaN or infinite"):
        coll.insert([{"text": "bad vector", "vectors": {"default": vec(bad)}}])
    with rejected(coll, ValidationError):
        coll.upsert([{"id": "r1", "text": "the cat sat on the mat", "vectors": {"default": vec(bad)}}])
    with rejected(coll, ValidationError):
        coll.update("r1", vectors={"default": vec(bad)})
    with rejected(coll, ValidationError):
        coll.insert([Record.create("fine", id="ok"), {"text": "bad", "vectors": {"small": vec(bad, 64)}}])


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_non_finite_query_vectors(coll, bad):
    with rejected(coll, ValidationError, "NaN or infinite"):
        coll.retrieve({"vectors": {"default": vec(bad)}}, index="a")
    with rejected(coll, ValidationError):
        fused(coll, ["a"], {"vectors": {"default": vec(bad)}})
    with pytest.raises(ValidationError):
        Query(vectors={"default": vec(bad)})


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_vector_overflowing_float32_is_rejected(coll):
    with rejected(coll, ValidationError):
        coll.insert([{"text": "huge", "vectors": {"default": np.full(DIM, 1e300)}}])


@pytest.mark.parametrize(
    "bad",
    [np.ones(DIM - 1), np.ones(DIM + 1), np.ones(64), np.ones((2, DIM)), np.ones(0), np.float32(1.0)],
    ids=["short", "long", "other-space-dim", "2d", "empty", "scalar"],
)
def test_wrong_dimension_record_vectors(coll, bad):
    with rejected(coll, DimensionError):
        coll.insert([{"text": "wrong dim", "vectors": {"default": bad}}])
    with rejected(coll, DimensionError):
        coll.update("r1", vectors={"default": bad})


@pytest.mark.parametrize("bad", [np.ones(DIM - 1), np.ones(64), np.ones((1, DIM))], ids=["short", "other-space-dim", "2d"])
def test_wrong_dimension_query_vectors(coll, bad):
    with rejected(coll, DimensionError):
        coll.retrieve({"vectors": {"default": bad}}, index="a")
    with rejected(coll, DimensionError):
        coll.retrieve(Query(text="cat", vectors={"default": bad}), index="a")
    # a vector for a space the searched index does not use is still checked
    with rejected(coll, DimensionError):
        coll.retrieve({"text": "cat", "vectors": {"small": np.ones(DIM)}}, index="a")


def test_non_numeric_and_complex_vectors(coll):
    for bad in ("abc", ["x"] * DIM, {"a": 1}, np.ones(DIM) * 1j, None):
        with rejected(coll, ValidationError):
            coll.insert([{"text": "strange vector", "vectors": {"default": bad}}])
    with rejected(coll, ValidationError):
        coll.insert([{"text": "vectors not a dict", "vectors": [1.0] * DIM}])
    with rejected(coll, ValidationError):
        coll.retrieve({"text": "cat", "vectors": [1.0] * DIM}, index="a")


def test_vector_for_undeclared_space(coll):
    with rejected(coll, ValidationError, "undeclared space"):
        coll.insert([{"text": "what space", "vectors": {"dense": np.ones(DIM)}}])
    with rejected(coll, ValidationError, "undeclared space"):
        coll.upsert([{"id": "r1", "text": "the cat sat on the mat", "vectors": {"dense": np.ones(DIM)}}])
    with rejected(coll, ValidationError, "undeclared space"):
        coll.retrieve({"text": "cat", "vectors": {"defualt": np.ones(DIM)}}, index="a")
    with rejected(coll, ValidationError, "undeclared space"):
        coll.retrieve({"vectors": {"dense": np.ones(DIM)}}, index="a")


# -- texts -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", " ", "\n\t  \r\n", "\u3000"], ids=["empty", "space", "whitespace", "ideographic-space"])
def test_empty_and_whitespace_text(coll, bad):
    with rejected(coll, ValidationError, "empty"):
        coll.insert([bad])
    with rejected(coll, ValidationError, "empty"):
        coll.insert([{"id": "new", "text": bad}])
    with rejected(coll, ValidationError, "empty"):
        coll.insert(["fine", bad])
    with rejected(coll, ValidationError, "empty"):
        coll.upsert([{"id": "r1", "text": bad}])
    with rejected(coll, ValidationError, "empty"):
        coll.update("r1", text=bad)
    with rejected(coll, ValidationError):
        coll.retrieve(bad, index="a")
    with rejected(coll, ValidationError):
        fused(coll, ["a", "b"], bad)


def test_text_over_the_limit(coll):
    too_long = "x" * (MAX_TEXT_CHARS + 1)
    with rejected(coll, ValidationError, "limit"):
        coll.insert([too_long])
    with rejected(coll, ValidationError, "limit"):
        coll.insert([{"id": "long", "text": too_long}])
    with rejected(coll, ValidationError, "limit"):
        coll.update("r1", text=too_long)
    with rejected(coll, ValidationError, "limit"):
        coll.retrieve(too_long, index="a")
    # exactly at the limit is accepted
    (rid,) = coll.insert(["x" * MAX_TEXT_CHARS], indexes=[])
    assert len(coll.get(rid).text) == MAX_TEXT_CHARS


def test_text_not_a_string_or_not_unicode(coll):
    for bad in (b"bytes", 42, None, ["a list"]):
        with rejected(coll, ValidationError):
            coll.insert([{"text": bad}])
    with rejected(coll, ValidationError):
        coll.insert([b"bytes"])
    with rejected(coll, ValidationError, "Unicode"):
        coll.insert(["lone \ud800 surrogate"])
    with rejected(coll, ValidationError, "Unicode"):
        coll.insert([{"id": "\udcff", "text": "bad id"}])
    with rejected(coll, ValidationError, "Unicode"):
        coll.insert([{"text": "bad metadata", "metadata": {"k": "\ud800"}}])
    with rejected(coll, ValidationError, "Unicode"):
        coll.insert(["bad scope"], scope={"user_id": "\ud800"})
    with rejected(coll, ValidationError, "Unicode"):
        coll.retrieve("lone \ud800 surrogate", index="a")
    with rejected(coll, FilterError, "Unicode"):
        coll.retrieve("cat", index="a", where={"k": "\ud800"})


# -- indexes and ids -------------------------------------------------------------------


def test_unknown_index_name(coll):
    with rejected(coll, NotFoundError, "no index named 'nope'"):
        coll.insert(["new record"], indexes=["nope"])
    with rejected(coll, NotFoundError):
        coll.insert(["new record"], indexes=["a", "nope"])
    with rejected(coll, NotFoundError):
        coll.upsert(["new record"], indexes="nope")
    with rejected(coll, NotFoundError):
        coll.retrieve("cat", index="nope")
    with rejected(coll, NotFoundError):
        fused(coll, ["a", "nope"], "cat")
    with rejected(coll, NotFoundError):
        coll.insert_to_index("nope", "r1")
    with rejected(coll, NotFoundError):
        coll.remove_from_index("nope", "r1")
    with rejected(coll, NotFoundError):
        coll.drop_index("nope")
    with rejected(coll, NotFoundError):
        coll.rebuild_index("nope")
    with rejected(coll, NotFoundError):
        coll.count(index="nope")


def test_unknown_record_ids(coll):
    with rejected(coll, NotFoundError):
        coll.insert_to_index("b", ["r3", "missing"])
    with rejected(coll, NotFoundError):
        coll.remove_from_index("a", ["r1", "missing"])
    with rejected(coll, NotFoundError):
        coll.remove_from_index("b", "r3")  # exists, but not a member of b
    with rejected(coll, NotFoundError):
        coll.delete(["r1", "missing"])
    with rejected(coll, NotFoundError):
        coll.delete(["r1", "r3"], scope={"user_id": "someone else"})
    with rejected(coll, NotFoundError):
        coll.update("missing", text="new text")
    with rejected(coll, NotFoundError):
        coll.get("missing")


def test_duplicate_ids_with_different_content(coll):
    with rejected(coll, DuplicateIdError, "one batch"):
        coll.insert([{"id": "d", "text": "one"}, {"id": "d", "text": "two"}])
    with rejected(coll, DuplicateIdError, "one batch"):
        coll.insert([{"id": "d", "text": "one"}, {"id": "d", "text": "one", "metadata": {"x": 1}}])
    with rejected(coll, DuplicateIdError, "one batch"):
        coll.upsert([{"id": "d", "text": "one"}, {"id": "d", "text": "two"}])
    with rejected(coll, DuplicateIdError, "one batch"):
        coll.insert([{"id": "d", "text": "one", "vectors": {"default": np.ones(DIM)}}, {"id": "d", "text": "one", "vectors": {"default": np.zeros(DIM)}}])
    with rejected(coll, DuplicateIdError, "already exists"):
        coll.insert([{"id": "r1", "text": "a different text"}])
    with rejected(coll, DuplicateIdError, "already exists"):
        coll.insert([{"id": "r1", "text": "the cat sat on the mat", "metadata": {"n": 1}, "scope": {"user_id": "x"}}])
    # identical duplicates in one batch are one record
    before = coll.count()
    assert coll.insert([{"id": "d", "text": "one"}, {"id": "d", "text": "one"}]) == ["d"]
    assert coll.count() == before + 1


def test_bad_ids(coll):
    for bad in ("", 7, "x" * 513):
        with rejected(coll, ValidationError):
            coll.insert([{"id": bad, "text": "bad id"}])


# -- k ---------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1.5, 2.0, "3", True, False, [1]], ids=repr)
def test_bad_k(coll, k):
    with rejected(coll, ValidationError, "k must be a positive integer"):
        coll.retrieve("cat", index="a", k=k)
    with rejected(coll, ValidationError, "k must be a positive integer"):
        coll.retrieve({"text": "cat", "k": k}, index="a")
    with rejected(coll, ValidationError, "k must be a positive integer"):
        fused(coll, ["a"], "cat", k=k)
    with pytest.raises(ValidationError):
        Query(text="cat", k=k)


def test_numpy_integer_k_is_accepted(coll):
    assert len(coll.retrieve("cat", index="a", k=np.int64(2))) == 2


# -- filters ---------------------------------------------------------------------------

BAD_FILTERS = [
    {"n": {"$regex": "^a"}},
    {"$xor": [{"n": 1}, {"n": 2}]},
    {"$not": {"n": 1}},
    {"$and": {"n": 1}},
    {"$and": []},
    {"$and": [{}]},
    {"$and": ["n"]},
    {"$or": "n"},
    {"$or": [{"n": {"$bad": 1}}]},
    {"n": {}},
    {"n": {"$in": "abc"}},
    {"n": {"$in": [[1]]}},
    {"n": {"$eq": [1, 2]}},
    {"n": {"$eq": {"nested": 1}}},
    {"n": {"$gt": True}},
    {"n": {"$gt": None}},
    {"n": {"$gt": [1]}},
    {"n": {"$gt": math.nan}},
    {"n": {"$in": [math.nan]}},
    {"n": 2**64},
    {"n": [1, 2]},
]
BAD_FIELDS = ["a.b", "a b", "1abc", "", "na'me", 'q"uote', "é", 3, None]


@pytest.mark.parametrize("where", BAD_FILTERS, ids=[repr(f) for f in BAD_FILTERS])
def test_bad_filter(coll, where):
    with rejected(coll, FilterError):
        coll.retrieve("cat", index="a", where=where)
    with rejected(coll, FilterError):
        fused(coll, ["a"], "cat", where=where)
    with rejected(coll, FilterError):
        coll.count(where=where)
    with rejected(coll, FilterError):
        coll.ids(where=where)


@pytest.mark.parametrize("field", BAD_FIELDS, ids=repr)
def test_bad_field_name(coll, field):
    with rejected(coll, FilterError, "field name"):
        coll.retrieve("cat", index="a", where={field: 1})
    with rejected(coll, FilterError, "field name"):
        coll.count(where={"$or": [{"n": 1}, {field: {"$gt": 1}}]})


def test_where_not_a_dict(coll):
    for bad in (["n", 1], "n = 1", 5):
        with rejected(coll, FilterError):
            coll.retrieve("cat", index="a", where=bad)


# -- metadata, scope, links ------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        {"s": {1, 2}},
        {"f": math.nan},
        {"f": math.inf},
        {"f": -math.inf},
        {"o": object()},
        {"b": b"bytes"},
        {"np": np.float32(1)},
        {"nested": {"f": math.nan}},
        {"": 1},
        ["not", "a", "dict"],
        "text",
        {"big": 2**70},
    ],
    ids=["set", "nan", "inf", "-inf", "object", "bytes", "numpy", "nested-nan", "empty-key", "list", "str", "big-int"],
)
def test_metadata_not_json_safe(coll, metadata):
    with rejected(coll, ValidationError):
        coll.insert([{"text": "bad metadata", "metadata": metadata}])
    with rejected(coll, ValidationError):
        coll.update("r1", metadata=metadata)
    with rejected(coll, ValidationError):
        coll.upsert([{"id": "r2", "text": "dogs bark", "metadata": metadata}])


def test_bad_scope(coll):
    for scope in ({"user": "x"}, {"user_id": 3}, "alice", ["alice"], Scope):
        with rejected(coll, ValidationError):
            coll.insert(["scoped"], scope=scope)
        with rejected(coll, ValidationError):
            coll.retrieve("cat", index="a", scope=scope)
        with rejected(coll, ValidationError):
            coll.delete("r1", scope=scope)
    with pytest.raises(ValidationError):
        Scope(user_id=3)


def test_link_to_missing_record(coll):
    with rejected(coll, NotFoundError):
        coll.link("r1", "missing")
    with rejected(coll, NotFoundError):
        coll.link("missing", "r1")
    with rejected(coll, NotFoundError, "link target"):
        coll.insert([{"text": "dangling link", "links": ["missing"]}])
    with rejected(coll, NotFoundError, "link target"):
        coll.upsert([{"id": "r2", "text": "dogs bark", "links": ["missing"]}])
    with rejected(coll, NotFoundError):
        coll.update("r2", links=["missing"])


def test_bad_links(coll):
    bad_links = [
        ["r1"],  # to itself (the record is r1)
        [{"target": "r2", "weight": math.nan}],
        [{"target": "r2", "weight": "heavy"}],
        [{"target": "r2", "relation": ""}],
        [{"target": ""}],
        [{"target": "r2", "kind": "x"}],
        [3],
        "r2",
        5,
    ]
    for links in bad_links:
        with rejected(coll, ValidationError):
            coll.upsert([{"id": "r1", "text": "the cat sat on the mat", "links": links}])
    with rejected(coll, ValidationError):
        coll.link("r1", "r1")


# -- records of other shapes -----------------------------------------------------------


def test_bad_record_shapes(coll):
    with rejected(coll, ValidationError, "unknown record fields"):
        coll.insert([{"text": "x", "meta": {}}])
    with rejected(coll, ValidationError, "needs a 'text'"):
        coll.insert([{"id": "x"}])
    with rejected(coll, ValidationError):
        coll.insert([])
    with rejected(coll, ValidationError):
        coll.insert([3.5])
    with rejected(coll, ValidationError, "unknown query fields"):
        coll.retrieve({"text": "cat", "top_k": 3}, index="a")
    with rejected(coll, ValidationError):
        coll.retrieve(42, index="a")


def test_closed_collection(coll):
    coll.close()
    with pytest.raises(ValidationError, match="closed"):
        coll.insert(["after close"])


# -- bad config ------------------------------------------------------------------------


@pytest.fixture
def core_registry():
    """Only memcore's builtins: what a fresh `pip install memcore` has."""
    return PluginHost(load_entry_points=False).registry


def test_unknown_index_kind_names_installed_and_closest(coll):
    installed = coll.registry.names("indexes")
    with rejected(coll, UnknownComponentError) as info:
        coll.create_index("c", "exatc")
    err = info.value
    assert isinstance(err, ConfigError)
    assert err.name == "exatc" and err.closest == "exact"
    assert err.installed == installed
    message = str(err)
    assert "unknown index kind 'exatc'" in message
    for name in installed:
        assert name in message
    assert "Did you mean 'exact'?" in message


def test_unknown_index_kind_faiss_hints_the_extra(tmp_path, core_registry):
    c = Collection.create(tmp_path / "c", registry=core_registry)
    try:
        c.create_index("a", "exact")
        before = state(c)
        for kind in ("faiss", "fais"):
            with pytest.raises(UnknownComponentError) as info:
                c.create_index("vector", kind)
            message = str(info.value)
            assert "Installed: exact." in message
            # memcore-faiss is installed, only not loaded into this registry: no pip hint
            assert "memcore-faiss, which provides 'faiss', is installed but did not register it" in message
            assert "pip install" not in message
            assert info.value.extra == "faiss"
        assert "Did you mean 'faiss'?" in str(info.value)  # for the typo "fais"
        with pytest.raises(UnknownComponentError, match=r"memcore-bm25, which provides 'bm25', is installed"):
            c.create_index("kv", "bm25")
        assert state(c) == before
    finally:
        c.close()


def test_unknown_kind_through_open(tmp_path):
    with pytest.raises(UnknownComponentError) as info:
        memcore.open({"store": "memory", "indexes": {"vector": {"kind": "exatc"}}})
    assert info.value.location == "indexes.vector.kind"
    assert "Did you mean 'exact'?" in str(info.value)
    with pytest.raises(UnknownComponentError) as info:
        memcore.open({"store": "memroy"})
    assert info.value.location == "store.kind"
    assert not any(tmp_path.iterdir())


def test_unknown_option_has_location(tmp_path, coll):
    with pytest.raises(ConfigError) as info:
        memcore.open({"store": "memory", "indexes": {"vector": {"kind": "exact", "metrc": "ip"}}})
    assert not isinstance(info.value, UnknownComponentError)
    assert info.value.location == "indexes.vector.metrc"
    assert str(info.value).startswith("indexes.vector.metrc:")
    with pytest.raises(ConfigError) as info:
        memcore.open({"store": "memory", "indexes": {"vector": {"kind": "exact", "metric": "hamming"}}})
    assert info.value.location == "indexes.vector.metric"
    # the same through create_index, with nothing changed
    with rejected(coll, ConfigError) as info:
        coll.create_index("c", "exact", metrc="ip")
    assert info.value.location == "indexes.c.metrc"
    with rejected(coll, ConfigError) as info:
        coll.create_index("c", "exact", space="nope")
    assert "not declared" in str(info.value)


def test_failed_open_leaves_no_collection(tmp_path):
    path = tmp_path / "mem"
    with pytest.raises(ConfigError):
        memcore.open({"indexes": {"vector": {"kind": "exact"}, "broken": {"kind": "exact", "metrc": "ip"}}}, path=path)
    # nothing was created, and the directory is not locked: a good open works
    with memcore.open({"indexes": {"vector": {"kind": "exact"}}}, path=path) as mem:
        assert [i["name"] for i in mem.collection.list_indexes()] == ["vector"]


@pytest.mark.parametrize("bad", [["a", "b"], ("a",), 7, None, b"a"])
def test_get_takes_one_string_id(coll, bad):
    coll.insert([{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}])
    with pytest.raises(ValidationError, match="one record id"):
        coll.get(bad)
    assert coll.get("a").text == "alpha"
