"""coerce_records: the column-by-column path for common batches builds exactly what the
per-record path (Record.create for each item) builds, and refuses nothing on its own: any
item it does not accept goes through the per-record path, which raises the typed error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memcore.collection import _input as record_input
from memcore.errors import DimensionError, DuplicateIdError, MemcoreError, ValidationError
from memcore.collection._input import coerce_records
from memcore.embedders._embedder import Space

DIM = 8
SPACES = {"a": Space("a", DIM), "b": Space("b", 3)}


def vec(i: int, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(dim).astype(np.float32)


def good(n: int = 6) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i}",
            "text": f"text {i} ünïcode ✓" if i % 2 else f"text {i}",
            "metadata": {"z": i, "a": "x", "f": 0.5, "ok": True, "none": None} if i % 3 else None,
            "vectors": {"a": vec(i), "b": vec(100 + i, 3)} if i % 2 else {"a": vec(i)},
        }
        for i in range(n)
    ]


def per_record(items: Any, scope: Any = None) -> Any:
    """The per-record path alone (the column path switched off)."""
    saved = record_input._column_batch
    record_input._column_batch = lambda *a: None  # type: ignore[assignment]
    try:
        return coerce_records(items, scope, SPACES)
    finally:
        record_input._column_batch = saved  # type: ignore[assignment]


def fields(records: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (r.id, r.text, r.metadata, list(r.metadata), {k: v.tolist() for k, v in r.vectors.items()}, r.links, r.scope, r.created_at == r.updated_at)
        for r in records
    ]


@pytest.mark.parametrize("scope", [None, {"user_id": "u"}, {}])
def test_column_path_builds_what_the_per_record_path_builds(scope):
    items = good()
    assert record_input._column_batch(items, record_input.Scope.coerce(scope), SPACES) is not None  # the column path is taken
    fast = coerce_records(items, scope, SPACES)
    assert fields(fast) == fields(per_record(items, scope))
    assert list(fast[1].metadata) == sorted(fast[1].metadata)  # keys sorted, as the JSON round trip gave them
    fast[0].vectors["x"] = vec(0)  # the record's own dict: the caller's is untouched
    assert "x" not in items[0]["vectors"]


def _nan() -> np.ndarray:
    v = vec(1)
    v[2] = np.nan
    return v


BAD: dict[str, tuple[str, Any, type[MemcoreError]]] = {
    "nan vector": ("vectors", {"a": _nan()}, ValidationError),
    "inf vector": ("vectors", {"a": np.full(DIM, np.inf, dtype=np.float32)}, ValidationError),
    "huge vector": ("vectors", {"a": np.full(DIM, 1e30, dtype=np.float32)}, ValidationError),
    "tiny vector": ("vectors", {"a": np.full(DIM, 1e-30, dtype=np.float32)}, ValidationError),
    "wrong dimension": ("vectors", {"a": vec(1, DIM + 1)}, DimensionError),
    "2-d vector": ("vectors", {"a": vec(1).reshape(2, -1)}, DimensionError),
    "undeclared space": ("vectors", {"c": vec(1)}, ValidationError),
    "vectors not a dict": ("vectors", [vec(1)], ValidationError),
    "string vector": ("vectors", {"a": "abc"}, ValidationError),
    "empty text": ("text", "", ValidationError),
    "blank text": ("text", " \n\t", ValidationError),
    "text not a string": ("text", b"bytes", ValidationError),
    "lone surrogate in text": ("text", "bad \ud800 text", ValidationError),
    "empty id": ("id", "", ValidationError),
    "long id": ("id", "x" * 513, ValidationError),
    "id not a string": ("id", 7, ValidationError),
    "lone surrogate in id": ("id", "r\udfff", ValidationError),
    "NUL in metadata": ("metadata", {"k": "a\x00b"}, ValidationError),
    "65-bit int metadata": ("metadata", {"k": 2**64}, ValidationError),
    "nan metadata": ("metadata", {"k": float("nan")}, ValidationError),
    "empty metadata key": ("metadata", {"": 1}, ValidationError),
    "metadata not a dict": ("metadata", ["a"], ValidationError),
    "unknown field": ("colour", "red", ValidationError),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("position", [0, 3, 5])
def test_a_bad_item_in_a_batch_raises_what_the_per_record_path_raises(case, position):
    key, value, error = BAD[case]
    items = good()
    items[position] = {**items[position], key: value}
    with pytest.raises(error) as per:
        per_record(items)
    with pytest.raises(error) as column:
        coerce_records(items, None, SPACES)
    assert str(column.value) == str(per.value)


def test_the_first_bad_item_is_named_whatever_the_kinds():
    items = good()
    items[1] = {**items[1], "vectors": {"a": _nan()}}
    items[4] = {**items[4], "text": ""}
    with pytest.raises(ValidationError, match="'r1'"):
        coerce_records(items, None, SPACES)


def test_uncommon_but_valid_shapes_take_the_per_record_path():
    items = good()
    items[2] = {**items[2], "vectors": {"a": vec(2).astype(np.float64)}}  # converted to float32
    items[3] = {**items[3], "metadata": {"nested": {"deep": [1, 2]}}}
    items[4] = {**items[4], "vectors": {"a": np.zeros(DIM, dtype=np.float32)}}  # a zero vector is allowed
    assert record_input._column_batch(items, None, SPACES) is None
    records = coerce_records(items, None, SPACES)
    assert fields(records) == fields(per_record(items))
    assert records[2].vectors["a"].dtype == np.float32


def test_repeated_ids_collapse_or_clash_as_before():
    items = good(3)
    same = coerce_records([*items, dict(items[1])], None, SPACES)
    assert [r.id for r in same] == ["r0", "r1", "r2"]
    with pytest.raises(DuplicateIdError):
        coerce_records([*items, {**items[1], "text": "other"}], None, SPACES)


def test_links_and_own_scopes_go_through_the_per_record_path():
    items = good(3)
    items[2] = {**items[2], "links": ["r0"], "scope": {"user_id": "v"}}
    records = coerce_records(items, {"user_id": "u"}, SPACES)
    assert records[2].links[0].target == "r0" and records[2].scope.user_id == "v" and records[0].scope.user_id == "u"


@pytest.mark.parametrize("shape", ["one space", "no vectors", "one without"])
def test_column_path_with_one_space_or_none(shape):
    items = good()
    for i, item in enumerate(items):
        if shape == "no vectors":
            item.pop("vectors")
        else:
            item["vectors"] = {"a": vec(i)}
    if shape == "one without":
        items[3].pop("vectors")
    assert record_input._column_batch(items, None, SPACES) is not None
    fast = coerce_records(items, None, SPACES)
    assert fields(fast) == fields(per_record(items))
    if shape != "no vectors":
        fast[0].vectors["b"] = vec(0, 3)
        assert "b" not in items[0]["vectors"]  # the record's own dict


def uniform(n: int = 6) -> list[dict[str, Any]]:
    """A batch whose metadata dicts all have the same keys (checked column by column)."""
    items = good(n)
    for i, item in enumerate(items):
        item["metadata"] = {
            "z": i,
            "a": "x" if i % 2 else "ü ✓",
            "f": 0.5 * i,
            "ok": bool(i % 2),
            "none": None,
            "mixed": [1, "s", None, 2.5, True, -(2**63)][i % 6],
        }
    return items


def test_metadata_checked_column_by_column_builds_what_the_per_record_path_builds():
    items = uniform()
    assert record_input._metadata_column([item["metadata"] for item in items]) is not None
    fast = coerce_records(items, None, SPACES)
    assert fields(fast) == fields(per_record(items))
    assert all(list(r.metadata) == sorted(r.metadata) for r in fast)
    fast[0].metadata["new"] = 1  # a copy: the caller's dict is untouched
    assert "new" not in items[0]["metadata"]
    one_key = [{**item, "metadata": {"k": i}} for i, item in enumerate(items)]
    assert fields(coerce_records(one_key, None, SPACES)) == fields(per_record(one_key))


@pytest.mark.parametrize(
    "key, value",
    [("a", "a\x00b"), ("a", "bad \ud800"), ("z", 2**63), ("z", -(2**63) - 1), ("f", float("inf")), ("f", float("nan")), ("none", [1]), ("none", b"x")],
)
@pytest.mark.parametrize("position", [0, 5])
def test_a_bad_metadata_value_in_a_uniform_batch_raises_what_the_per_record_path_raises(key, value, position):
    items = uniform()
    items[position]["metadata"][key] = value
    assert record_input._metadata_column([item["metadata"] for item in items]) is None
    if key == "none" and value == [1]:  # valid JSON: the per-value path accepts it
        assert fields(coerce_records(items, None, SPACES)) == fields(per_record(items))
        return
    with pytest.raises(ValidationError) as per:
        per_record(items)
    with pytest.raises(ValidationError) as column:
        coerce_records(items, None, SPACES)
    assert str(column.value) == str(per.value)


def test_bad_metadata_keys_in_a_uniform_batch_are_refused():
    for key in ("", "k\x00", "k\udfff"):
        items = [{**item, "metadata": {key: 1}} for item in good()]
        assert record_input._metadata_column([item["metadata"] for item in items]) is None
        with pytest.raises(ValidationError):
            coerce_records(items, None, SPACES)


def test_rows_of_a_memory_mapped_matrix_take_the_column_path(tmp_path):
    """The rows of ``np.load(..., mmap_mode="r")`` (``np.memmap``, an ndarray subclass) are
    checked as one matrix; the records hold plain float32 rows, as the per-record path makes."""
    np.save(tmp_path / "a.npy", np.stack([vec(i) for i in range(6)]))
    np.save(tmp_path / "b.npy", np.stack([vec(100 + i, 3) for i in range(6)]))
    a, b = np.load(tmp_path / "a.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r")
    assert type(a[0]) is np.memmap
    items = good()
    for i, item in enumerate(items):
        item["vectors"] = {"a": a[i], "b": b[i]} if i % 2 else {"a": a[i]}
    assert record_input._column_batch(items, None, SPACES) is not None
    fast = coerce_records(items, None, SPACES)
    assert fields(fast) == fields(per_record(items))
    assert {type(v) for r in fast for v in r.vectors.values()} == {np.ndarray}
    assert all(type(item["vectors"]["a"]) is np.memmap for item in items)  # the caller's dicts untouched
    bad = np.load(tmp_path / "a.npy", mmap_mode="r+")
    bad[3, 2] = np.nan
    items[3]["vectors"]["a"] = bad[3]
    with pytest.raises(ValidationError, match="'r3'"):
        coerce_records(items, None, SPACES)
