"""The exact index's add: vectors written straight into its spare rows, checked before
anything held changes; re-added ids replaced; repeated ids in a batch (the last wins)."""

from __future__ import annotations

import numpy as np
import pytest

from memcore.errors import DimensionError, ValidationError
from memcore.plugin import IndexContext, SpaceInfo
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore import Query, Record

DIM = 6


def make(metric: str = "cosine") -> ExactIndex:
    return ExactIndex(ExactIndexConfig(space="v", metric=metric), IndexContext("e", {"v": SpaceInfo("v", DIM, "none")}))


def rec(rid: str, seed: int) -> Record:
    return Record(rid, rid, {}, {"v": np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)})


def expected(records: dict[str, Record], metric: str) -> dict[str, np.ndarray]:
    out = {}
    for rid, r in records.items():
        v = r.vectors["v"]
        out[rid] = v / np.linalg.norm(v) if metric == "cosine" else v
    return out


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_re_added_and_repeated_ids_hold_the_last_vector(metric):
    index = make(metric)
    first = [rec(f"r{i}", i) for i in range(5)]
    index.add(first)
    again = [rec("r1", 101), rec("n1", 102), rec("r3", 103), rec("n1", 104)]  # r1, r3 replaced; n1 twice
    index.add(again)
    held = {r.id: r for r in first} | {r.id: r for r in again}
    assert len(index) == 6 and sorted(index._ids[: index._n]) == sorted(held)
    want = expected(held, metric)
    for rid, row in index._rows.items():
        np.testing.assert_allclose(index._matrix[row], want[rid], rtol=1e-6)
    q = np.random.default_rng(7).standard_normal(DIM).astype(np.float32)
    hits = index.search(Query(vectors={"v": q}, k=6), 6)
    assert {h.id for h in hits} == set(held)


def test_a_refused_batch_leaves_the_index_as_it_was():
    index = make()
    index.add([rec(f"r{i}", i) for i in range(3)])
    before = (list(index._ids), dict(index._rows), index._matrix[: index._n].copy())
    bad = rec("r1", 50)
    bad.vectors["v"] = np.full(DIM, 1e20, dtype=np.float32)  # bypasses Record validation
    with pytest.raises(ValidationError):
        index.add([rec("n", 9), bad])
    short = rec("m", 10)
    short.vectors["v"] = short.vectors["v"][:-1]
    with pytest.raises(DimensionError, match="'m'"):
        index.add([rec("n", 9), short])
    with pytest.raises(DimensionError, match="'x'"):
        index.add([Record("x", "x", {}, {})])
    assert (list(index._ids), dict(index._rows)) == before[:2]
    np.testing.assert_array_equal(index._matrix[: index._n], before[2])


def test_validate_names_the_first_bad_record():
    index = make()
    good = rec("g", 1)
    index.validate([good])
    with pytest.raises(DimensionError, match="'b'"):
        index.validate([good, Record("b", "b", {}, {})])


def test_a_matrix_without_c_order_still_gets_normalised_rows():
    index = make()
    index.add([rec(f"r{i}", i) for i in range(3)])
    index._matrix = np.asfortranarray(np.zeros((10, DIM), dtype=np.float32))  # spare room, Fortran order
    index._n, index._rows, index._ids = 0, {}, []
    records = [rec(f"s{i}", 20 + i) for i in range(4)]
    index.add(records)
    want = expected({r.id: r for r in records}, "cosine")
    for rid, row in index._rows.items():
        np.testing.assert_allclose(index._matrix[row], want[rid], rtol=1e-6)
