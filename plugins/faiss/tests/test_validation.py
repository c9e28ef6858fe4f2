"""Bad input and bad settings are rejected with typed memcore errors, before faiss sees them."""

from __future__ import annotations

import numpy as np
import pytest

from memcore import ConfigError, DimensionError, Query, Record, ValidationError
from memcore_faiss import FaissIndexConfig


@pytest.fixture(params=["Flat", "HNSW32", "IVF4,Flat"])
def filled(request, make, kit):
    ivf = "IVF" in request.param
    index = make(8, factory=request.param, min_train=8 if ivf else None, nprobe=4 if ivf else None)
    index.add(kit.records(kit.clustered(20, 8)))
    return index


def _record(vector, rid="bad"):
    record = Record.create("x", id="ok")
    return Record(id=rid, text="x", vectors={"default": np.asarray(vector, dtype=np.float32)}) if vector is not None else record


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_record_vectors_are_rejected_and_nothing_changes(filled, kit, value):
    before = [h.id for h in filled.search(kit.query(kit.clustered(20, 8)[0]), 5)]
    vector = np.ones(8, dtype=np.float32)
    vector[3] = value
    bad = Record(id="bad", text="x", vectors={"default": vector})
    good = kit.records(np.ones((1, 8)), start=500)
    with pytest.raises(ValidationError, match="NaN or infinite"):
        filled.validate(good + [bad])
    with pytest.raises(ValidationError, match="NaN or infinite"):
        filled.add(good + [bad])
    assert len(filled) == 20
    assert [h.id for h in filled.search(kit.query(kit.clustered(20, 8)[0]), 5)] == before


def test_overflowing_vectors_are_rejected(make, kit):
    index = make(4)
    huge = np.full((1, 4), 3e38, dtype=np.float32)  # finite, but its squared norm is not
    with pytest.raises(ValidationError, match="too large"):
        index.add(kit.records(huge))
    assert len(index) == 0


def test_wrong_or_missing_record_vector_is_a_dimension_error(filled, kit):
    with pytest.raises(DimensionError, match="8-d"):
        filled.add(kit.records(np.ones((1, 9))))
    with pytest.raises(DimensionError, match="no vector"):
        filled.add([Record(id="x", text="x", vectors={"other": np.ones(8, dtype=np.float32)})])
    with pytest.raises(DimensionError):
        filled.add([Record(id="x", text="x", vectors={"default": np.ones((2, 4), dtype=np.float32)})])
    assert len(filled) == 20


def test_query_vector_checks(filled, kit):
    with pytest.raises(DimensionError, match="dimension 8"):
        filled.search(kit.query(np.ones(7)), 3)
    with pytest.raises(DimensionError, match="no vector"):
        filled.search(Query(text="hello"), 3)
    with pytest.raises(DimensionError, match="no vector"):
        filled.validate_query(Query(text="hello"))
    q = kit.query(np.ones(8))
    q.vectors["default"] = np.array([1, np.nan, 0, 0, 0, 0, 0, 0], dtype=np.float32)  # bypasses Query's own check
    with pytest.raises(ValidationError, match="NaN"):
        filled.validate_query(q)
    with pytest.raises(ValidationError, match="NaN"):
        filled.search(q, 3)
    with pytest.raises(ValidationError, match="NaN"):
        filled.search_batch([kit.query(np.ones(8)), q], 3)
    with pytest.raises(DimensionError):
        filled.search_batch([kit.query(np.ones(8)), kit.query(np.ones(5))], 3)


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "3"])
def test_bad_k(filled, kit, k):
    with pytest.raises(ValidationError, match="k must be"):
        filled.search(kit.query(np.ones(8)), k)
    with pytest.raises(ValidationError, match="k must be"):
        filled.search_batch([kit.query(np.ones(8))], k)


def test_huge_k_is_capped_not_allocated(filled, kit):
    hits = filled.search(kit.query(np.ones(8)), 10**12)
    assert len(hits) == 20


@pytest.mark.parametrize(
    "extras, message",
    [
        ({"faiss": {"nprobes": 3}}, "nprobes"),
        ({"faiss": {"ef_search": 0}}, "ef_search"),
        ({"faiss": {"ef_search": 10**9}}, "ef_search"),  # issue 13 item 7: 41 s and 7.7 GB before the bound
        ({"faiss": {"ef_search": 2**40}}, "ef_search"),  # a raw SWIG OverflowError before the bound
        ({"faiss": {"nprobe": 2**40}}, "nprobe"),
        ({"faiss": {"score_threshold": float("nan")}}, "score_threshold"),
        ({"faiss": {"exact": "maybe"}}, "exact"),
        ({"faiss": ["exact"]}, "must be a dict"),
        ({"faiss": {"score_threshold": "high"}}, "score_threshold"),
    ],
)
def test_bad_query_modes(filled, kit, extras, message):
    q = Query(vectors={"default": np.ones(8, dtype=np.float32)}, extras=extras)
    with pytest.raises(ValidationError, match=message):
        filled.validate_query(q)
    with pytest.raises(ValidationError, match=message):
        filled.search(q, 3)


def test_query_mode_must_fit_the_index_family(make, kit):
    flat, hnsw, ivf = make(8), make(8, factory="HNSW32"), make(8, factory="IVF4,Flat", min_train=8)
    ef = kit.query(np.ones(8), ef_search=32)
    probe = kit.query(np.ones(8), nprobe=2)
    hnsw.validate_query(ef)
    ivf.validate_query(probe)
    for index, q in ((flat, ef), (flat, probe), (hnsw, probe), (ivf, ef)):
        with pytest.raises(ValidationError, match="applies to"):
            index.validate_query(q)


def test_other_extras_keys_are_left_to_other_indexes(filled):
    q = Query(vectors={"default": np.ones(8, dtype=np.float32)}, extras={"graph": {"depth": 2}, "mode": "newest"})
    filled.validate_query(q)
    assert len(filled.search(q, 3)) == 3


@pytest.mark.parametrize(
    "options, location, message",
    [
        ({"factory": "PQ3"}, "factory", "divisible by 3"),
        ({"factory": "PCA16,Flat"}, "factory", "cannot raise the dimension"),
        ({"factory": "OPQ3,Flat"}, "factory", "divisible by 3"),
        ({"factory": "IVF8,Flat", "min_train": 4}, "min_train", "below the 8 centroids"),
        ({"factory": "IVF8,PQ4", "min_train": 100}, "min_train", "below the 256 centroids"),
        ({"factory": "Flat", "ef_search": 16}, "ef_search", "HNSW"),
        ({"factory": "Flat", "ef_construction": 16}, "ef_construction", "HNSW"),
        ({"factory": "HNSW32", "nprobe": 4}, "nprobe", "IVF"),
        ({"factory": "HNSW16,PQ4", "metric": "cosine"}, "metric", "L2 metric only"),
        ({"factory": "HNSW32", "params": {"notAParameter": 3}}, "params", "cannot set"),
    ],
)
def test_config_errors_name_the_key(make, options, location, message):
    with pytest.raises(ConfigError, match=message) as info:
        make(8, **options)
    assert info.value.location == f"indexes.vec.{location}"


@pytest.mark.parametrize(
    "options",
    [
        {"factory": "IDMap,Flat"},
        {"factory": ""},
        {"metric": "hamming"},
        {"compact_fraction": 0},
        {"omp_threads": 0},
        {"params": {"a b": 1}},
        {"unknown": 1},
        # issue 13: strings faiss accepts but that abort (HNSW0: SIGABRT on add, HNSW1: SIGSEGV) or fail every search (PQ4x2)
        {"factory": "NotAnIndex"},
        {"factory": "HNSW0"},
        {"factory": "HNSW1"},
        {"factory": "HNSW032"},
        {"factory": "PQ4x2"},
        {"factory": "IVF0,Flat"},
        {"factory": "IVF8"},
        {"factory": "HNSW300"},
        # issue 13 item 7: every numeric option is bounded
        {"factory": "HNSW32", "ef_search": 10**9},
        {"factory": "HNSW32", "ef_search": 2**40},
        {"factory": "HNSW32", "ef_construction": 10**6},
        {"factory": "IVF8,Flat", "nprobe": 10**6},
        {"params": {"efSearch": 1e9}},
        {"params": {"efSearch": float("nan")}},
        {"score_threshold": float("nan")},
        {"min_train": 10**12},
        {"blas_min_queries": 10**12},
        {"exact_filter_below": 10**12},
        {"gather_budget_mb": -1},
        {"gather_budget_mb": float("nan")},
        {"gather_budget_mb": 10**9},
    ],
)
def test_config_model_rejects(options):
    with pytest.raises(Exception) as info:
        FaissIndexConfig(**options)
    assert "validation error" in str(info.value).lower()


def test_default_min_train_follows_faiss_recommendation(make):
    assert make(8, factory="IVF16,Flat").stats()["min_train"] == 39 * 16
    assert make(8, factory="IVF16,PQ4").stats()["min_train"] == 39 * 256
    assert make(8, factory="SQ8").stats()["min_train"] == 1000
    assert make(8, factory="HNSW32").stats()["min_train"] == 0


def test_duplicate_ids_in_a_batch_last_wins(make, kit):
    index = make(4, metric="l2")
    first, second = np.eye(4, dtype=np.float32)[:2]
    index.add(
        [
            Record(id="a", text="1", vectors={"default": first}),
            Record(id="b", text="2", vectors={"default": second}),
            Record(id="a", text="3", vectors={"default": second * 2}),
        ]
    )
    assert len(index) == 2
    hits = index.search(kit.query(second * 2), 2)
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[0].raw == pytest.approx(0.0)
