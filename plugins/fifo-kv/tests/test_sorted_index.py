"""The ``sorted`` index on its own: the Index contract, ordering, range and top modes, scores,
value types, missing fields, bad input, persistence, and a model check against plain sorting."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memcore import ConfigError, CorruptError, NotFoundError, Query, Record, ValidationError
from memcore.plugin import IndexContext
from memcore._plugins._host import get_registry
from memcore.testing import IndexContract, examples
from memcore_fifo_kv import SortedIndex, SortedIndexConfig
from memcore_fifo_kv.ordered import OrderedIds


def rec(rid: str, **metadata) -> Record:
    return Record(id=rid, text=f"text of {rid}", metadata=metadata)


def sorted_index(field: str = "ts", missing: str = "error", name: str = "by_ts") -> SortedIndex:
    return SortedIndex(SortedIndexConfig(field=field, missing=missing), IndexContext(name=name))


def ids(hits) -> list[str]:
    return [h.id for h in hits]


def search(index: SortedIndex, k: int = 100, allowed=None, **modes) -> list:
    return index.search(Query(extras={"sorted": modes} if modes else {}), k, allowed)


# -- the contract (generated records carry metadata {"n": position, "parity": "even" | "odd"}) --


class TestSortedContract(IndexContract):
    self_match_ranks_first = False

    @pytest.fixture(params=[("n", "error"), ("parity", "error"), ("n", "skip")])
    def make_index(self, request):
        field, missing = request.param
        return lambda context: SortedIndex(SortedIndexConfig(field=field, missing=missing), context)


class TestSortedRangeContract(IndexContract):
    self_match_ranks_first = False
    query_extras = {"sorted": {"mode": "range", "gte": 3, "lt": 25, "order": "desc"}}

    @pytest.fixture
    def make_index(self):
        return lambda context: SortedIndex(SortedIndexConfig(field="n"), context)


# -- order, modes and scores ---------------------------------------------------------------------


@pytest.fixture
def numbers() -> SortedIndex:
    index = sorted_index()
    index.add([rec("e", ts=5), rec("b", ts=2.5), rec("a", ts=-1), rec("d", ts=4), rec("c", ts=4.0), rec("f", ts=10**12)])
    return index


def test_top_and_default_mode(numbers):
    assert ids(search(numbers)) == ["f", "e", "d", "c", "b", "a"]  # ties (4 and 4.0) by id, descending
    assert ids(numbers.search(Query(text="ignored"), 2)) == ["f", "e"]
    assert ids(search(numbers, 3, mode="top", order="asc")) == ["a", "b", "c"]
    assert ids(search(numbers, 2, order="asc")) == ["a", "b"]  # mode defaults to top
    assert numbers.top(2) == ["f", "e"] and numbers.top(2, "asc") == ["a", "b"]


def test_numeric_scores(numbers):
    hits = search(numbers, 2)
    assert [(h.id, h.score, h.raw, h.source) for h in hits] == [("f", 1e12, 1e12, "by_ts"), ("e", 5.0, 5.0, "by_ts")]
    hits = search(numbers, 2, mode="range", gte=0)
    assert [(h.id, h.score, h.raw) for h in hits] == [("b", -2.5, 2.5), ("c", -4.0, 4.0)]


@pytest.mark.parametrize(
    "bounds, expected",
    [
        ({}, ["a", "b", "c", "d", "e", "f"]),
        ({"gte": 4}, ["c", "d", "e", "f"]),
        ({"gt": 4}, ["e", "f"]),
        ({"lte": 4}, ["a", "b", "c", "d"]),
        ({"lt": 4}, ["a", "b"]),
        ({"gte": 2.5, "lt": 5}, ["b", "c", "d"]),
        ({"gt": 2.5, "lte": 5}, ["c", "d", "e"]),
        ({"gte": 4, "lte": 4}, ["c", "d"]),
        ({"gt": 4, "lt": 4}, []),
        ({"gte": 6, "lte": 3}, []),
        ({"gte": 100, "lte": 10**13}, ["f"]),
        ({"lt": -1}, []),
    ],
)
def test_range_bounds(numbers, bounds, expected):
    assert ids(search(numbers, mode="range", **bounds)) == expected
    assert ids(search(numbers, mode="range", order="desc", **bounds)) == expected[::-1]
    assert ids(search(numbers, 2, mode="range", **bounds)) == expected[:2]
    assert numbers.between(**bounds) == expected
    assert numbers.between(order="desc", limit=1, **bounds) == expected[::-1][:1]


def test_strings_order_and_rank_scores():
    index = sorted_index(field="date")
    index.add([rec("x", date="2024-05-11"), rec("y", date="2024-03-02"), rec("z", date="2024-04-20"), rec("w", date="2024-03-02")])
    assert index.value_type == "string"
    assert ids(search(index)) == ["x", "z", "y", "w"]
    hits = search(index, 2)
    assert [(h.id, h.score, h.raw) for h in hits] == [("x", 3.0, 3.0), ("z", 2.0, 2.0)]  # position in ascending order
    hits = search(index, 10, mode="range", gte="2024-03-15", lt="2024-06")
    assert [(h.id, h.score, h.raw) for h in hits] == [("z", -2.0, 2.0), ("x", -3.0, 3.0)]
    assert index.between(lt="2024-04") == ["w", "y"]
    # scores are positions in the whole index, also when filtered
    assert [(h.id, h.score) for h in search(index, 5, allowed={"z", "w"})] == [("z", 2.0), ("w", 0.0)]


@pytest.mark.parametrize("n_allowed", [1, 3, 50, 400])  # few allowed ids: looked up; many: walked
def test_allowed_in_every_mode(n_allowed):
    index = sorted_index()
    index.add([rec(f"r{i:03d}", ts=(i * 37) % 100) for i in range(400)])
    allowed = {f"r{i:03d}" for i in range(0, 400, 400 // n_allowed)} | {"unknown"}
    values = {f"r{i:03d}": (i * 37) % 100 for i in range(400)}
    held = sorted((values[a], a) for a in allowed if a in values)
    assert ids(search(index, 5, allowed)) == [a for _, a in held[::-1][:5]]
    assert ids(search(index, 5, allowed, order="asc")) == [a for _, a in held[:5]]
    in_range = [a for v, a in held if 20 <= v < 60]
    assert ids(search(index, 7, allowed, mode="range", gte=20, lt=60)) == in_range[:7]
    assert ids(search(index, 7, allowed, mode="range", gte=20, lt=60, order="desc")) == in_range[::-1][:7]
    assert search(index, 5, set()) == [] and search(index, 5, {"unknown"}) == []


def test_duplicates_in_a_batch_last_wins_and_readd_moves():
    index = sorted_index()
    index.add([rec("a", ts=1), rec("b", ts=2), rec("a", ts=3)])
    assert ids(search(index)) == ["a", "b"] and len(index) == 2
    index.add([rec("b", ts=10)])
    assert index.top(1) == ["b"] and index.value_of("b") == 10
    index.remove(["b", "nope"])
    assert index.top(5) == ["a"] and "b" not in index
    with pytest.raises(NotFoundError):
        index.value_of("b")


# -- value types and missing fields -----------------------------------------------------------


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_values_that_cannot_be_ordered(value):
    index = sorted_index()
    with pytest.raises(ValidationError, match="finite numbers or strings"):
        index.validate([rec("a", ts=1), rec("b", ts=value)])
    with pytest.raises(ValidationError):
        index.add([rec("b", ts=value)])
    assert len(index) == 0


def test_mixed_types_are_rejected():
    index = sorted_index()
    with pytest.raises(ValidationError, match="record 'b' has a string value.*record 'a' in this batch has number values"):
        index.validate([rec("a", ts=1), rec("b", ts="2")])
    index.add([rec("a", ts=1)])
    with pytest.raises(ValidationError, match="the index holds number values"):
        index.add([rec("b", ts="x")])
    assert index.value_type == "number" and len(index) == 1
    index.remove(["a"])
    assert index.value_type is None
    index.add([rec("b", ts="x")])  # an empty index takes either type
    assert index.value_type == "string"


def test_missing_field_error_and_skip():
    strict = sorted_index()
    with pytest.raises(ValidationError, match="has no metadata field 'ts'.*missing = \"skip\""):
        strict.validate([rec("a", ts=1), rec("b", other=2)])
    lenient = sorted_index(missing="skip")
    lenient.add([rec("a", ts=1), rec("b", other=2), rec("c", ts=3)])
    assert len(lenient) == 2 and lenient.top(5) == ["c", "a"]
    lenient.add([rec("c", other=3)])  # re-added without the field: no longer held
    assert lenient.top(5) == ["a"]
    lenient.add([rec("b", ts=0)])
    assert lenient.top(5) == ["a", "b"]


@pytest.mark.parametrize(
    "modes, match",
    [
        ({"mode": "bottom"}, "extras.sorted.mode: .*does not match"),
        ({"mode": None}, "extras.sorted.mode: .*does not match"),
        ({"mode": "top", "order": "up"}, "extras.sorted.order: "),
        ({"mode": "top", "gte": 3}, "extras.sorted.gte: Extra inputs"),  # unknown keys inside "sorted" are rejected
        ({"order": "asc", "limit": 3}, "extras.sorted.limit: Extra inputs"),
        ({"mode": "range", "gte": 1, "gt": 2}, "extras.sorted: .*at most one lower bound"),
        ({"mode": "range", "lte": 1, "lt": 2}, "at most one upper bound"),
        ({"mode": "range", "gte": 1, "lte": "9"}, "all be numbers or all be strings"),
        ({"mode": "range", "gte": True}, "finite numbers or strings"),
        ({"mode": "range", "gte": None, "lt": [1]}, "finite numbers or strings"),
        ({"mode": "range", "gte": float("nan")}, "finite numbers or strings"),
        ({"mode": "range", "from": 1}, "extras.sorted.from: Extra inputs"),
        ({"mode": "range", "gte": "2024"}, "bound gte='2024' is a string but the index holds number values"),
        ({"mode": "range", "order": 1}, "extras.sorted.order: "),
    ],
)
def test_bad_extras_raise_validation_error(numbers, modes, match):
    with pytest.raises(ValidationError, match=match):
        numbers.validate_query(Query(extras={"sorted": modes}))
    with pytest.raises(ValidationError, match=match):
        numbers.search(Query(extras={"sorted": modes}), 3)


def test_bad_extras_name_the_fields_allowed_in_the_mode(numbers):
    with pytest.raises(ValidationError, match=r"extras\.sorted\.from: .*; allowed in mode 'range': \['gt', 'gte', 'lt', 'lte', 'mode', 'order'\]"):
        numbers.validate_query(Query(extras={"sorted": {"mode": "range", "from": 1}}))
    with pytest.raises(ValidationError, match=r"extras\.sorted\.mode: .*; allowed mode values: \['range', 'top'\]"):
        numbers.validate_query(Query(extras={"sorted": {"mode": "bottom"}}))
    with pytest.raises(ValidationError, match=r"extras\.sorted must be a dict of query modes \(allowed mode values: \['range', 'top'\]\), got str"):
        numbers.validate_query(Query(extras={"sorted": "top"}))


def test_parsed_modes_are_kept_per_query_and_keep_their_value_types(numbers):
    def mode(**modes):
        return numbers._mode(Query(extras={"sorted": modes}))

    query = Query(extras={"sorted": {"mode": "range", "gte": 1}})
    first = numbers._mode(query)
    assert numbers._mode(query) is first  # the same query again: parsed once (Index.mode)
    assert mode(gte=1, mode="range") == first  # key order does not matter
    as_float = mode(mode="range", gte=1.0)
    assert type(as_float.gte) is float and type(first.gte) is int
    with pytest.raises(ValidationError, match="finite numbers or strings"):
        mode(mode="range", gte=True)  # True == 1, but it is not taken for 1
    assert mode() == mode(mode="top")  # no entry: the default mode
    assert ids(search(numbers, 2, mode="range", gte=1)) == ids(search(numbers, 2, mode="range", gte=1))


def test_foreign_extras_keys_are_ignored(numbers):
    """Only ``extras["sorted"]`` is read: one Query can carry the modes of several indexes."""
    extras = {
        "bm25": {"min_score": 2.5},
        "graph": {"mode": "traverse", "start": ["a"]},
        "fifo": "not a dict, not ours",
        "sorted": {"mode": "range", "gte": 2.5, "lt": 5},
    }
    numbers.validate_query(Query(extras=extras))
    assert ids(numbers.search(Query(extras=extras), 10)) == ["b", "c", "d"]
    # foreign keys alone leave the default mode (top, desc), even top-level mode-like keys
    foreign = {"bm25": {"min_score": 1.0}, "mode": "range", "lt": 0, "order": "asc"}
    numbers.validate_query(Query(extras=foreign))
    assert ids(numbers.search(Query(extras=foreign), 2)) == ["f", "e"]
    assert ids(numbers.search(Query(extras={"sorted": None}), 2)) == ["f", "e"]
    assert ids(numbers.search(Query(extras={"sorted": {}}), 2)) == ["f", "e"]


@pytest.mark.parametrize("value", ["top", ["range"], 3, False, ("mode", "top")])
def test_a_non_dict_sorted_entry_raises_validation_error(numbers, value):
    with pytest.raises(ValidationError, match=r"by_ts.*\(sorted\).*extras\.sorted must be a dict"):
        numbers.validate_query(Query(extras={"sorted": value}))
    with pytest.raises(ValidationError, match=r"extras\.sorted must be a dict"):
        numbers.search(Query(extras={"sorted": value}), 3)


def test_convenience_methods_build_namespaced_modes(numbers):
    assert numbers.between(gte=2.5, lt=5) == ids(search(numbers, mode="range", gte=2.5, lt=5))
    assert numbers.top(3, "asc") == ids(search(numbers, 3, order="asc"))
    with pytest.raises(ValidationError, match="extras.sorted: .*at most one lower bound"):
        numbers.between(gte=1, gt=2)
    with pytest.raises(ValidationError, match="extras.sorted.order"):
        numbers.top(2, "up")  # type: ignore[arg-type]


def test_string_bounds_on_an_empty_index_are_fine():
    index = sorted_index()
    assert search(index, mode="range", gte="a") == []
    assert index.between(gte=1) == [] and index.top(3) == []


@pytest.mark.parametrize("k", [0, -2, 2.0, "1", False])
def test_bad_k(numbers, k):
    with pytest.raises(ValidationError):
        numbers.search(Query(), k)
    with pytest.raises(ValidationError):
        numbers.top(k)


def test_bad_config():
    reg = get_registry().get("indexes", "sorted")
    for bad in ({}, {"field": ""}, {"field": 3}, {"field": "ts", "missing": "ignore"}, {"field": "ts", "key": "x"}):
        with pytest.raises(ConfigError, match="indexes.by_ts"):
            reg.parse_config(bad, "indexes.by_ts")
    assert reg.parse_config({"field": "ts"}, "indexes.by_ts") == SortedIndexConfig(field="ts")


# -- persistence -------------------------------------------------------------------------------


def saved(index: SortedIndex, tmp_path: Path) -> Path:
    directory = tmp_path / "sorted"
    directory.mkdir(exist_ok=True)
    index.save(directory)
    return directory


@pytest.mark.parametrize("values", [[3, 1.5, -2, 3.0, 10**15], ["b", "a", "", "é", "b"]])
def test_save_load_roundtrip(tmp_path, values):
    index = sorted_index()
    index.add([rec(f"r{i}", ts=v) for i, v in enumerate(values)])
    directory = saved(index, tmp_path)
    fresh = sorted_index()
    fresh.load(directory)
    for modes in ({}, {"order": "asc"}, {"mode": "range", "gte": values[1]}, {"mode": "range", "lt": values[0], "order": "desc"}):
        q = Query(extras={"sorted": modes})
        assert [(h.id, h.score, h.raw) for h in fresh.search(q, 10)] == [(h.id, h.score, h.raw) for h in index.search(q, 10)]
    assert [fresh.value_of(f"r{i}") for i in range(len(values))] == values
    assert [type(fresh.value_of(f"r{i}")) for i in range(len(values))] == [type(v) for v in values]
    assert fresh.stats() == index.stats()


def test_saved_file_is_plain_json(tmp_path):
    index = sorted_index()
    index.add([rec("b", ts=2), rec("a", ts=1.5)])
    doc = json.loads((saved(index, tmp_path) / "sorted.json").read_text())
    assert doc == {"kind": "sorted", "format_version": 1, "field": "ts", "value_type": "number", "ids": ["a", "b"], "values": [1.5, 2]}


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: "{",
        lambda d: json.dumps(None),
        lambda d: json.dumps({k: v for k, v in d.items() if k != "ids"}),
        lambda d: json.dumps({**d, "ids": ["a"]}),
        lambda d: json.dumps({**d, "ids": ["a", "a", "b"]}),
        lambda d: json.dumps({**d, "values": [3, 2, 1]}),
        lambda d: json.dumps({**d, "values": [1, "2", 3]}),
        lambda d: json.dumps({**d, "values": [1, True, 3]}),
        lambda d: json.dumps({**d, "value_type": "string"}),
        lambda d: json.dumps({**d, "value_type": None}),
        lambda d: json.dumps({k: v for k, v in d.items() if k != "values"}),
    ],
)
def test_load_rejects_damaged_files(tmp_path, damage):
    index = sorted_index()
    index.add([rec("a", ts=1), rec("b", ts=2), rec("c", ts=3)])
    directory = saved(index, tmp_path)
    path = directory / "sorted.json"
    path.write_text(damage(json.loads(path.read_text())))
    fresh = sorted_index()
    fresh.add([rec("x", ts=0)])
    with pytest.raises(CorruptError, match="sorted index 'by_ts'"):
        fresh.load(directory)
    assert fresh.top(5) == ["x"]


def test_load_of_an_empty_index(tmp_path):
    directory = saved(sorted_index(), tmp_path)
    fresh = sorted_index()
    fresh.load(directory)
    assert len(fresh) == 0 and fresh.value_type is None


# -- model check: the index against plain sorting ------------------------------------------------

_ids = st.sampled_from([f"id{i}" for i in range(12)])
_values = st.one_of(st.integers(-5, 5), st.sampled_from([-0.5, 1.5, 2.0, 1e9]))
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.tuples(_ids, _values), min_size=1, max_size=80)),
        st.tuples(st.just("remove"), st.lists(_ids, max_size=12)),
    ),
    max_size=12,
)
_queries = st.tuples(
    st.sampled_from(["asc", "desc"]),
    st.one_of(st.none(), _values),
    st.booleans(),
    st.one_of(st.none(), _values),
    st.booleans(),
    st.integers(1, 15),
    st.one_of(st.none(), st.sets(_ids, max_size=12)),
)


@settings(max_examples=examples(200), deadline=None)
@given(ops=_ops, queries=st.lists(_queries, min_size=1, max_size=5))
def test_matches_plain_sorting(ops, queries):
    index = sorted_index()
    model: dict[str, float] = {}
    for op, arg in ops:
        if op == "add":
            index.add([rec(rid, ts=v) for rid, v in arg])
            model.update(dict(arg))
        else:
            index.remove(arg)
            for rid in arg:
                model.pop(rid, None)
    assert len(index) == len(model)
    for order, low, low_inclusive, high, high_inclusive, k, allowed in queries:
        bounds = {}
        if low is not None:
            bounds["gte" if low_inclusive else "gt"] = low
        if high is not None:
            bounds["lte" if high_inclusive else "lt"] = high
        expected = sorted(
            (v, rid)
            for rid, v in model.items()
            if (allowed is None or rid in allowed)
            and (low is None or (v >= low if low_inclusive else v > low))
            and (high is None or (v <= high if high_inclusive else v < high))
        )
        if order == "desc":
            expected.reverse()
        hits = index.search(Query(extras={"sorted": {"mode": "range", "order": order, **bounds}}), k, allowed)
        assert [(h.id, h.raw) for h in hits] == [(rid, float(v)) for v, rid in expected[:k]]
        assert all(math.isfinite(h.score) for h in hits)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "discard"]), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 9)), max_size=150)), max_size=10))
def test_ordered_ids_bulk_and_single_paths_agree_with_a_dict(ops):
    ordered = OrderedIds()
    model: dict[str, int] = {}
    for op, pairs in ops:
        if op == "put":
            ordered.put([(f"i{a}", b) for a, b in pairs])
            model.update({f"i{a}": b for a, b in pairs})
        else:
            gone = [f"i{a}" for a, _ in pairs]
            assert ordered.discard(gone) == len({g for g in gone if g in model})
            for g in gone:
                model.pop(g, None)
        assert ordered.entries() == sorted((v, k) for k, v in model.items())
        assert all(ordered.position(rid) == i for i, (_, rid) in enumerate(ordered.entries()))
