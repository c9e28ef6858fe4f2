"""Collection.insert_columns / Memory.insert_columns: a batch given as columns is stored
exactly as ``insert`` stores the same records given as dicts, validated exactly like it (the
same typed error, nothing written), and committed as one atomic batch."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memcore
from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.collection import _columns
from memcore.embedders._embedder import Space
from memcore.errors import DimensionError, DuplicateIdError, ScopeError, ValidationError
from memcore.model._checks import MAX_ID_CHARS, MAX_TEXT_CHARS
from memcore.model._record_rows import RecordRows
from memcore.stores._sqlite import SQLiteStore
from memcore.stores._sqlite_schema import json_text

DIM = 6


def open_collection(path: Path) -> Collection:
    col = Collection(SQLiteStore(path), {"dense": Space("dense", DIM), "small": Space("small", 3)}, get_registry(), path)
    if not col.has_index("exact"):
        col.create_index("exact", "exact", space="dense")
    return col


def matrix(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def columns(n: int = 5) -> dict[str, Any]:
    return {
        "texts": [f'text {i} ünïcode ✓ "q"' if i % 2 else f"text {i}" for i in range(n)],
        "ids": [f"r{i}" for i in range(n)],
        "metadata": {
            "z": np.arange(n),  # a numpy column: Python ints
            "s": [f"é{i}\\ \n" if i % 2 else "plain" for i in range(n)],
            "f": [0.1, 1e300, -0.0, 1e-7, 2.5][:n] + [1.0] * max(0, n - 5),
            "b": [i % 2 == 0 for i in range(n)],
            "mixed": [None, 1, "x", 2.5, True][:n] + [None] * max(0, n - 5),
        },
        "vectors": {"dense": matrix(n)},
    }


def as_dicts(cols: dict[str, Any]) -> list[dict[str, Any]]:
    n = len(cols["texts"])
    items = []
    for i in range(n):
        item: dict[str, Any] = {"text": cols["texts"][i]}
        if cols.get("ids") is not None:
            item["id"] = cols["ids"][i]
        meta = cols.get("metadata") or {}
        item["metadata"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)[i] for k, v in meta.items()}
        if cols.get("vectors"):
            item["vectors"] = {k: np.asarray(v)[i] for k, v in cols["vectors"].items()}
        items.append(item)
    return items


def stored_rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path / "store.sqlite3") as db:
        return db.execute("SELECT id, text, metadata, user_id, member_of FROM records ORDER BY rowid").fetchall()


def snapshot(col: Collection) -> Any:
    return [(r.id, r.text, r.metadata, list(r.metadata), {k: v.tolist() for k, v in r.vectors.items()}, r.scope) for r in col.get_many(col.ids())]


def test_columns_store_what_dicts_store(tmp_path):
    cols = columns()
    a, b = open_collection(tmp_path / "a"), open_collection(tmp_path / "b")
    assert a.insert_columns(**cols) == b.insert(as_dicts(cols)) == cols["ids"]
    assert snapshot(a) == snapshot(b)
    q = Query(vectors={"dense": cols["vectors"]["dense"][3]}, k=3, where={"b": False})
    assert [(h.id, h.score) for h in a.search_index("exact", q, 3)] == [(h.id, h.score) for h in b.search_index("exact", q, 3)]
    a.close(), b.close()
    assert stored_rows(tmp_path / "a") == stored_rows(tmp_path / "b")  # the metadata JSON text included
    again = open_collection(tmp_path / "a")  # durable: reopened from disk
    assert again.get("r1").metadata == {"b": False, "f": 1e300, "mixed": 1, "s": "é1\\ \n", "z": 1}
    again.close()


def test_the_column_path_is_taken_and_keeps_the_matrix():
    cols = columns()
    records = _columns.coerce_columns(cols["texts"], cols["ids"], cols["metadata"], cols["vectors"], None, {"dense": Space("dense", DIM)})
    assert type(records) is RecordRows
    kept = records.matrix(records, "dense")
    assert kept is not None and np.array_equal(kept, cols["vectors"]["dense"]) and not kept.flags.writeable
    assert kept is not cols["vectors"]["dense"]  # a copy: the caller's array may change afterwards
    assert records.metadata_json(records) == [json_text(r.metadata) for r in records]
    records[0].vectors["dense"] = np.zeros(DIM, dtype=np.float32)  # a replaced vector: the matrix is not handed out
    assert records.matrix(records, "dense") is None and records.matrix(list(records)[::-1], "dense") is None


@pytest.mark.parametrize(
    "values",
    [
        ["a", "é", "\u2028", '"', "\\", "\x01", "日本"],
        [0, -1, 2**63 - 1, -(2**63)],
        [0.1, -0.0, 1e300, 1e-300, 3.0, float(2**60)],
        [True, False, None, 1, "x", 1.5],
    ],
)
def test_metadata_json_is_json_dumps(values):
    built = _columns._metadata({"k": values, "a": list(range(len(values)))}, len(values))
    assert built is not None
    dicts, texts = built
    assert texts == [json_text(d) for d in dicts] == [json.dumps(dict(sorted({"k": v, "a": i}.items()))) for i, v in enumerate(values)]


def test_content_ids_when_none_are_given(tmp_path):
    cols = columns()
    cols["ids"] = None
    a, b = open_collection(tmp_path / "a"), open_collection(tmp_path / "b")
    assert a.insert_columns(**cols) == b.insert(as_dicts(cols))
    assert snapshot(a) == snapshot(b)


def test_a_repeated_id_collapses_or_clashes_as_in_insert(tmp_path):
    col = open_collection(tmp_path)
    same = np.stack([matrix(1)[0]] * 2)
    assert col.insert_columns(["t", "t"], ids=["x", "x"], vectors={"dense": same}) == ["x"]  # identical: one record
    with pytest.raises(DuplicateIdError):
        col.insert_columns(["t", "u"], ids=["y", "y"], vectors={"dense": matrix(2)})
    with pytest.raises(DuplicateIdError):  # stored already, with other content
        col.insert_columns(["other"], ids=["x"], vectors={"dense": same[:1]})
    assert col.insert_columns(["t"], ids=["x"], vectors={"dense": same[:1]}) == ["x"]  # identical re-insert: a no-op
    assert col.count() == 1


def bad_cases() -> list[tuple[str, dict[str, Any], type[Exception]]]:
    nan = matrix(3)
    nan[1, 2] = np.nan
    inf = matrix(3)
    inf[2, 0] = np.inf
    huge = matrix(3)
    huge[0] *= 1e30
    base: dict[str, Any] = {"texts": ["a", "b", "c"], "ids": ["i0", "i1", "i2"], "vectors": {"dense": matrix(3)}}

    def case(**changes: Any) -> dict[str, Any]:
        return {**base, **changes}

    return [
        ("nan", case(vectors={"dense": nan}), ValidationError),
        ("inf", case(vectors={"dense": inf}), ValidationError),
        ("norm", case(vectors={"dense": huge}), ValidationError),
        ("dim", case(vectors={"dense": matrix(3, DIM + 1)}), DimensionError),
        ("1-d", case(vectors={"dense": matrix(3)[0]}), DimensionError),
        ("rows", case(vectors={"dense": matrix(2)}), ValidationError),
        ("space", case(vectors={"nope": matrix(3)}), ValidationError),
        ("not numeric", case(vectors={"dense": [["a"] * DIM] * 3}), ValidationError),
        ("complex", case(vectors={"dense": matrix(3).astype(np.complex64)}), ValidationError),
        ("vectors not a dict", case(vectors=matrix(3)), ValidationError),
        ("ids length", case(ids=["i0", "i1"]), ValidationError),
        ("metadata length", case(metadata={"g": [1, 2]}), ValidationError),
        ("metadata not a dict", case(metadata=[1, 2, 3]), ValidationError),
        ("metadata 2-d", case(metadata={"g": np.zeros((3, 2))}), ValidationError),
        ("texts a string", case(texts="abc"), ValidationError),
        ("empty", case(texts=[], ids=[], vectors={"dense": matrix(0)}), ValidationError),
        ("empty id", case(ids=["i0", "", "i2"]), ValidationError),
        ("int id", case(ids=["i0", 1, "i2"]), ValidationError),
        ("long id", case(ids=["i0", "x" * (MAX_ID_CHARS + 1), "i2"]), ValidationError),
        ("surrogate id", case(ids=["i0", "\ud800", "i2"]), ValidationError),
        ("empty text", case(texts=["a", "", "c"]), ValidationError),
        ("blank text", case(texts=["a", " \n", "c"]), ValidationError),
        ("text not str", case(texts=["a", None, "c"]), ValidationError),
        ("huge text", case(texts=["a", "x" * (MAX_TEXT_CHARS + 1), "c"]), ValidationError),
        ("surrogate text", case(texts=["a", "\udfff", "c"]), ValidationError),
        ("nan metadata", case(metadata={"f": [1.0, float("nan"), 2.0]}), ValidationError),
        ("big int metadata", case(metadata={"g": [1, 2**63, 2]}), ValidationError),
        ("NUL metadata", case(metadata={"s": ["a", "b\x00", "c"]}), ValidationError),
        ("object metadata", case(metadata={"o": [1, object(), 2]}), ValidationError),
        ("empty key", case(metadata={"": [1, 2, 3]}), ValidationError),
        ("duplicate", case(ids=["i0", "i0", "i2"]), DuplicateIdError),
        ("stored", case(ids=["stored", "i1", "i2"]), DuplicateIdError),
    ]


@pytest.mark.parametrize("name,cols,error", bad_cases(), ids=[c[0] for c in bad_cases()])
def test_bad_columns_raise_the_typed_error_and_write_nothing(tmp_path, name, cols, error):
    col = open_collection(tmp_path)
    col.insert([{"id": "stored", "text": "kept", "vectors": {"dense": matrix(1, seed=9)[0]}}])
    before = (stored_rows(tmp_path), col.count(index="exact"), col.store.last_seq())
    files = {p.name: p.stat().st_size for p in (tmp_path / "vectors").glob("*")}
    assert files  # the space's file exists: its length is compared
    with pytest.raises(error):
        col.insert_columns(**cols)
    assert (stored_rows(tmp_path), col.count(index="exact"), col.store.last_seq()) == before
    assert {p.name: p.stat().st_size for p in (tmp_path / "vectors").glob("*")} == files
    assert [h.id for h in col.search_index("exact", Query(vectors={"dense": matrix(1, seed=9)[0]}, k=5), 5)] == ["stored"]
    if name in ("metadata 2-d", "texts a string"):  # column shapes only: as dicts they are other, valid records
        return
    try:  # the same records given as dicts: insert raises the same kind of error
        dicts = as_dicts(cols)
    except Exception:  # columns that cannot even be read as records (wrong lengths, not a dict...)
        return
    if dicts:
        with pytest.raises(error):
            col.insert(dicts)


def test_the_caller_can_change_its_arrays_afterwards(tmp_path):
    col = open_collection(tmp_path)
    x = matrix(3)
    keep = x.copy()
    col.insert_columns(["a", "b", "c"], ids=["a", "b", "c"], vectors={"dense": x})
    x[:] = 0
    assert np.array_equal(np.stack([col.get(i).vectors["dense"] for i in "abc"]), keep)


def test_memmapped_rows_and_two_spaces(tmp_path):
    np.save(tmp_path / "x.npy", matrix(4))
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    col = open_collection(tmp_path / "c")
    col.create_index("small", "exact", space="small")
    small = matrix(4, 3, seed=5)
    col.insert_columns(["a", "b", "c", "d"], ids=list("abcd"), vectors={"dense": x, "small": small})
    assert np.array_equal(col.get("c").vectors["dense"], x[2]) and np.array_equal(col.get("c").vectors["small"], small[2])
    assert [h.id for h in col.search_index("small", Query(vectors={"small": small[1]}, k=1), 1)] == ["b"]


def test_memory_insert_columns_through_the_service_and_its_scope(tmp_path):
    memory = memcore.open({"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 16}}}}, path=tmp_path)
    try:
        ids = memory.insert_columns(["alpha beta", "gamma delta"], ids=["a", "b"], metadata={"g": [1, 2]})
        assert ids == ["a", "b"]
        assert memory.get("b").metadata == {"g": 2}
        assert [h["id"] for h in memory.retrieve("gamma delta", k=1)] == ["b"]
        assert memory.insert_columns(["only mine"], ids=["m"], scope={"user_id": "u1"}) == ["m"]
        assert memory.collection.get("m").scope.user_id == "u1"
        with memory.collection.scoped({"user_id": "u1"}), pytest.raises(ScopeError):
            memory.collection.insert_columns(["not mine"], ids=["n"], scope={"user_id": "u2"})
        with pytest.raises(ValidationError):
            memory.insert_columns(["x", "y"], ids=["only one"])
        with pytest.raises(DimensionError):
            memory.insert_columns(["x"], ids=["v"], vectors=np.zeros((1, 3), dtype=np.float32))  # one matrix: the only space's
        assert memory.collection.count() == 3
    finally:
        memory.close()


def test_async_memory_insert_columns(tmp_path):
    import asyncio

    async def main() -> tuple[list[str], int]:
        memory = await memcore.open_async({"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 16}}}}, path=tmp_path)
        try:
            ids = await memory.insert_columns(["one", "two"], ids=["a", "b"], metadata={"n": [1, 2]})
            return ids, await memory.count()
        finally:
            await memory.aclose()

    assert asyncio.run(main()) == (["a", "b"], 2)


def test_a_service_without_a_column_path_gets_dicts(tmp_path):
    pytest.importorskip("memcore_services")
    settings = {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 16}}}, "service": {"kind": "short_term_memory"}}
    with memcore.open(settings, path=tmp_path) as memory:
        assert memory.insert_columns(["a b", "c d"], ids=["x", "y"], metadata={"g": [1, 2]}) == ["x", "y"]  # Service.insert_columns -> insert_many
        assert memory.collection.get("y").metadata == {"g": 2}
        with pytest.raises(ValidationError, match="one value per record"):
            memory.insert_columns(["a", "b"], ids=["z"])
        assert memory.collection.count() == 2
