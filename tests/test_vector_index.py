"""``memcore.VectorIndex``: the checks every vector index shares (records, queries, k), and
``Index.mode``: an index's query mode parsed once per query."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict, Field

import memcore
import memcore.plugin
from memcore.plugin import ComponentConfig, IndexContext, SpaceInfo, VectorIndex
from memcore import DimensionError, Hit, Query, Record, ValidationError
from memcore.testing import IndexContract

DIM = 4


class BruteConfig(ComponentConfig):
    kind: str = "brute"
    space: str = Field("v", description="Space of the indexed vectors.")


class BruteMode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scale: float = Field(1.0, gt=0)


class Brute(VectorIndex):
    """The smallest vector index: a dict of vectors, inner product, ``extras["brute"].scale``."""

    def __init__(self, config: BruteConfig, context: IndexContext):
        super().__init__(config, context)
        self.vectors: dict[str, np.ndarray] = {}
        self.batches: list[int] = []  # sizes of the matrices _search_batch received

    def validate_query(self, query: Query) -> None:
        self.mode(query, BruteMode)
        super().validate_query(query)

    def add(self, records: Sequence[Record]) -> None:
        ids, matrix = self.record_matrix(records, latest=True)
        self.vectors.update(zip(ids, matrix))

    def remove(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self.vectors.pop(rid, None)

    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        mode = self.mode(query, BruteMode) or BruteMode()
        scored = sorted(((-float(v @ vector) * mode.scale, rid) for rid, v in self.vectors.items() if allowed is None or rid in allowed))
        return [Hit(rid, -s, -s, self.name) for s, rid in scored[:k]]

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        self.batches.append(len(matrix))
        return super()._search_batch(queries, matrix, k, allowed)

    def __len__(self) -> int:
        return len(self.vectors)

    def save(self, directory: Path) -> None:
        ids = sorted(self.vectors)
        np.savez(directory / "v.npz", ids=np.array(ids, dtype=str), m=np.array([self.vectors[i] for i in ids]).reshape(-1, self.dim))

    def load(self, directory: Path) -> None:
        with np.load(directory / "v.npz") as data:
            self.vectors = dict(zip(data["ids"].tolist(), data["m"]))


def make(name: str = "b", kind: str = "") -> Brute:
    return Brute(BruteConfig(), IndexContext(name, {"v": SpaceInfo("v", DIM, "none")}, kind=kind))


def rec(rid: str, vector: Any) -> Record:
    return Record(rid, rid, {}, {"v": np.asarray(vector, dtype=np.float32)})


def query(vector: Any, **fields: Any) -> Query:
    return Query(vectors={"v": np.asarray(vector, dtype=np.float32)}, **fields)


def past_checks(vector: Any, **fields: Any) -> Query:
    """A query whose vector is set after Query's own checks (what a caller may do)."""
    q = query(np.ones(DIM), **fields)
    q.vectors["v"] = np.asarray(vector, dtype=np.float32)
    return q


class TestBruteContract(IndexContract):
    space_names = ("v",)
    dim = DIM

    @pytest.fixture
    def make_index(self) -> Any:
        return lambda context: Brute(BruteConfig(), context)


def test_the_base_keeps_name_dim_space_and_mode_key():
    index = make("dense", kind="brute-2")
    assert (index.name, index.dim, index.requires.spaces, index.mode_key) == ("dense", DIM, ("v",), "brute-2")
    assert make().mode_key == "brute"  # built by hand, without a registered kind: the config's kind
    assert "VectorIndex" in memcore.plugin.__all__
    with pytest.raises(memcore.ConfigError, match="not declared"):
        Brute(BruteConfig(space="w"), IndexContext("b", {"v": SpaceInfo("v", DIM, "none")}))


def test_record_matrix_is_float32_and_the_last_of_a_repeated_id_wins_in_place():
    index = make()
    ids, matrix = index.record_matrix([rec("a", [1, 0, 0, 0]), rec("b", [0, 1, 0, 0]), rec("a", [0, 0, 1, 0])], latest=True)
    assert ids == ["a", "b"] and matrix.dtype == np.float32 and matrix.shape == (2, DIM)
    np.testing.assert_array_equal(matrix[0], [0, 0, 1, 0])
    ids, matrix = index.record_matrix([rec("a", [1, 0, 0, 0]), rec("a", [0, 0, 1, 0])])
    assert ids == ["a", "a"] and matrix.shape == (2, DIM)
    ids, matrix = index.record_matrix([])
    assert ids == [] and matrix.shape == (0, DIM)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (Record("x", "x", {}, {}), DimensionError, r"index 'b': record 'x' has no vector in space 'v'"),
        (rec("x", np.ones(DIM + 1)), DimensionError, r"record 'x'.*expected a 4-d vector in space 'v', got shape \(5,\)"),
        (rec("x", np.ones((2, 2))), DimensionError, r"got shape \(2, 2\)"),
    ],
)
def test_bad_record_vectors_name_the_first_bad_record(bad, error, message):
    index = make()
    with pytest.raises(error, match=message):
        index.validate([rec("ok", np.ones(DIM)), bad, Record("y", "y", {}, {})])


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_record_vectors_are_validation_errors(value):
    index = make()
    bad = rec("x", np.ones(DIM))
    bad.vectors["v"] = np.array([1, value, 0, 0], dtype=np.float32)  # past Record's own check
    with pytest.raises(ValidationError, match=r"record 'x' contains NaN or infinite values") as caught:
        index.add([rec("ok", np.ones(DIM)), bad])
    assert not isinstance(caught.value, DimensionError) and len(index) == 0


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy's float32 dot product says so
def test_finite_vectors_whose_squares_overflow_are_left_to_the_subclass():
    index = make()
    index.validate([rec("big", np.full(DIM, 3e38))])
    index.validate_query(past_checks(np.full(DIM, 3e38)))


def test_query_vector_checks():
    index = make()
    index.add([rec("a", [1, 0, 0, 0])])
    with pytest.raises(DimensionError, match=r"index 'b': the query has no vector in space 'v'"):
        index.search(Query(text="words"), 1)
    with pytest.raises(DimensionError, match=r"query vector of shape \(3,\), expected dimension 4"):
        index.validate_query(query(np.ones(3)))
    with pytest.raises(ValidationError, match="NaN or infinite"):
        index.search(past_checks([1, np.nan, 0, 0]), 1)
    with pytest.raises(ValidationError, match="k must be a positive integer"):
        index.search(query(np.ones(DIM)), 0)
    assert [h.id for h in index.search(query([1, 0, 0, 0]), 3)] == ["a"]


def test_a_batch_is_checked_in_one_pass_and_raises_the_error_of_its_first_bad_query():
    index = make()
    index.add([rec("a", [1, 0, 0, 0]), rec("b", [0, 1, 0, 0])])
    good, nan, wide = query(np.ones(DIM)), past_checks([np.nan, 0, 0, 0]), query(np.ones(DIM + 1))
    with pytest.raises(ValidationError, match="NaN") as caught:
        index.search_batch([good, nan, wide], 1)
    assert not isinstance(caught.value, DimensionError)
    with pytest.raises(DimensionError):
        index.search_batch([good, wide, nan], 1)
    with pytest.raises(ValidationError, match="k must be"):
        index.search_batch([], -1)
    assert index.search_batch([], 1) == [] and index.batches == []
    hits = index.search_batch([query([1, 0, 0, 0]), query([0, 1, 0, 0])], 1)
    assert [[h.id for h in row] for row in hits] == [["a"], ["b"]] and index.batches == [2]


def test_mode_is_parsed_once_per_query_and_shared_by_validate_query_and_search(monkeypatch):
    import memcore.indexes._index as index_module

    calls = []
    real = index_module.query_mode

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(index_module, "query_mode", counting)
    index = make(kind="brute")
    index.add([rec("a", [1, 0, 0, 0]), rec("b", [0, 1, 0, 0])])
    q = query([1, 0, 0, 0], extras={"brute": {"scale": 2.0}, "other": {"x": 1}})
    index.validate_query(q)
    assert index.search(q, 1)[0].score == pytest.approx(2.0)
    assert calls == ["brute"]
    index.search(q.evolve(scope=None), 1)  # a copy with the same extras keeps the parsed modes
    assert calls == ["brute"]
    index.search(q.evolve(extras={"brute": {"scale": 3.0}}), 1)
    assert calls == ["brute", "brute"]
    index.search(query([1, 0, 0, 0]), 1)  # no extras: nothing parsed
    assert len(calls) == 2


def test_mode_errors_are_those_of_query_mode_and_never_cached():
    index = make(kind="brute")
    index.add([rec("a", [1, 0, 0, 0])])
    bad = query([1, 0, 0, 0], extras={"brute": {"scale": -1}})
    for _ in range(2):
        with pytest.raises(ValidationError, match=r"index 'b' \(brute\): bad query extras: extras\.brute\.scale"):
            index.validate_query(bad)
    with pytest.raises(ValidationError, match=r"extras\.brute\.scal:"):
        index.search(query([1, 0, 0, 0], extras={"brute": {"scal": 2}}), 1)


def test_mode_with_defaults_gives_the_default_mode_without_extras():
    index = make(kind="brute")
    assert index.mode(query(np.ones(DIM)), BruteMode) is None
    assert index.mode(query(np.ones(DIM)), BruteMode, defaults={}) == BruteMode()
    assert index.mode(query(np.ones(DIM), extras={"brute": {"scale": 4}}), BruteMode, defaults={}) == BruteMode(scale=4.0)


def test_two_indexes_of_two_kinds_read_their_own_modes_from_one_query():
    first, second = make("one", kind="brute"), make("two", kind="brute-b")
    q = query(np.ones(DIM), extras={"brute": {"scale": 2}, "brute-b": {"scale": 5}})
    assert first.mode(q, BruteMode).scale == 2.0 and second.mode(q, BruteMode).scale == 5.0
    assert first.mode(q, BruteMode).scale == 2.0


def test_a_query_vector_is_checked_once_per_query_and_again_when_replaced():
    index = make()
    index.add([rec("a", [1, 0, 0, 0])])
    q = query([1, 0, 0, 0])
    index.validate_query(q)
    assert q._checked == {"v": q.vectors["v"]}  # search finds it checked: no second check
    assert [h.id for h in index.search(q, 1)] == ["a"]
    q.vectors["v"] = np.array([np.nan, 0, 0, 0], dtype=np.float32)  # another vector: checked again
    with pytest.raises(ValidationError, match="NaN"):
        index.search(q, 1)
    q.vectors["v"] = np.ones(DIM + 1, dtype=np.float32)
    with pytest.raises(DimensionError):
        index.search(q, 1)
