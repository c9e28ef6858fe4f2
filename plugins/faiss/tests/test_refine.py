"""The refine step (``refine_k_factor``): PQ candidates re-scored with the store's vectors.

Counted recall on a set where PQ codes alone are poor, no timing; every collection here is
a real SQLite store, whose vector file the refine step reads in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, ConfigError, Query, Record, Scope, ValidationError
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.stores._sqlite import SQLiteStore
from memcore_faiss import FaissIndexConfig
from memcore_faiss.rows import StoreRows

DIM = 32
N = 600
K = 10
# 4 sub-quantizers of 16 centroids for 32 dimensions: codes this coarse rank poorly on their own
PQ = {"factory": "IVF4,PQ4x4", "min_train": 256, "nprobe": 4}


def clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """Unit vectors in Gaussian blobs around random centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def open_collection(path: Path) -> Collection:
    return Collection(SQLiteStore(path), {"dense": Space("dense", DIM)}, get_registry(), path)


def filled(path: Path, n: int = N, **options) -> tuple[Collection, np.ndarray]:
    """A collection with one faiss index ``vec`` over ``n`` clustered unit vectors
    (metadata ``g`` = i % 4, scope user ``a`` for even rows, ``b`` for odd ones)."""
    x = clustered(n, DIM, clusters=12, seed=3)
    col = open_collection(path)
    col.create_index("vec", "faiss", space="dense", **{**PQ, **options})
    for user in ("a", "b"):
        rows = range(0 if user == "a" else 1, n, 2)
        col.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"dense": x[i]}, "metadata": {"g": i % 4}} for i in rows], scope={"user_id": user})
    return col, x


def queries(x: np.ndarray, count: int = 30, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = x[rng.integers(0, len(x), count)] + 0.3 * rng.standard_normal((count, DIM)).astype(np.float32) / np.sqrt(DIM)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def truth(x: np.ndarray, q: np.ndarray, keep: np.ndarray | None = None) -> list[set[str]]:
    scores = q @ x.T
    if keep is not None:
        scores[:, ~keep] = -np.inf
    return [{f"r{i}" for i in np.argsort(-row, kind="stable")[:K]} for row in scores]


def search(col: Collection, q: np.ndarray, **kwargs) -> list:
    extras = kwargs.pop("extras", None)
    return col.search_index("vec", Query(vectors={"dense": q}, k=K, extras={"faiss": extras} if extras else {}, **kwargs), K)


def recall(col: Collection, x: np.ndarray, qs: np.ndarray, keep: np.ndarray | None = None, **kwargs) -> float:
    want = truth(x, qs, keep)
    found = [{h.id for h in search(col, q, **kwargs)} for q in qs]
    return float(np.mean([len(f & t) / K for f, t in zip(found, want)]))


def assert_exact_scores(hits: list, x: np.ndarray, q: np.ndarray) -> None:
    scores = [float(h.score) for h in hits]
    expected = [float(x[int(h.id[1:])] @ q) for h in hits]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert scores == sorted(scores, reverse=True)


def test_refine_raises_recall_where_pq_alone_is_poor(tmp_path):
    col, x = filled(tmp_path, refine_k_factor=8)
    qs = queries(x)
    index = col.index("vec")
    assert index.trained
    pq_only = recall(col, x, qs, extras={"refine_k_factor": 0})
    refined = recall(col, x, qs)
    assert pq_only < 0.75, pq_only  # the set is one where the codes alone are poor
    assert refined >= 0.95 and refined >= pq_only + 0.2, (pq_only, refined)
    for q in qs[:5]:
        assert_exact_scores(search(col, q), x, q)
    assert index.cosine_space == "dense"  # refined hits carry exact cosines: relevance need not re-read them
    col.close()


def test_default_factor_refines(tmp_path):
    col, x = filled(tmp_path)
    assert FaissIndexConfig().refine_k_factor > 0
    assert col.index("vec").stats()["refine_k_factor"] == FaissIndexConfig().refine_k_factor
    qs = queries(x)
    assert recall(col, x, qs) > recall(col, x, qs, extras={"refine_k_factor": 0})
    col.close()


@pytest.mark.parametrize("thresholds", [{}, {"exact_filter_below": 0, "exact_filter_fraction": 0.0}], ids=["exact-path", "pushdown"])
def test_filters_and_scopes_still_apply(tmp_path, thresholds):
    col, x = filled(tmp_path, refine_k_factor=8, **thresholds)
    qs = queries(x, 12)
    n = len(x)
    g = np.arange(n) % 4
    for q in qs:
        hits = search(col, q, where={"g": 1})
        assert len(hits) == K and all(int(h.id[1:]) % 4 == 1 for h in hits)
        assert_exact_scores(hits, x, q)
        scoped = search(col, q, scope=Scope(user_id="b"))
        assert len(scoped) == K and all(int(h.id[1:]) % 2 == 1 for h in scoped)
        assert_exact_scores(scoped, x, q)
    assert recall(col, x, qs, keep=g == 1, where={"g": 1}) >= 0.95
    col.close()


def test_rows_stay_right_when_the_store_reuses_them(tmp_path):
    """Deleted records free their rows; new records reuse them: refined scores follow."""
    col, x = filled(tmp_path, refine_k_factor=8)
    gone = [f"r{i}" for i in range(0, 200, 2)]
    col.delete(gone)
    rng = np.random.default_rng(9)
    fresh = clustered(100, DIM, clusters=12, seed=11)
    col.insert([{"id": f"n{i}", "text": "n", "vectors": {"dense": fresh[i]}, "metadata": {"g": 0}} for i in range(100)], scope={"user_id": "a"})
    for i in rng.integers(0, 100, 8):
        q = fresh[i]
        hits = search(col, q)
        assert hits[0].id == f"n{i}" and float(hits[0].score) == pytest.approx(1.0, abs=1e-5)
        assert not {h.id for h in hits} & set(gone)
        for h in hits:
            v = fresh[int(h.id[1:])] if h.id.startswith("n") else x[int(h.id[1:])]
            assert float(h.score) == pytest.approx(float(v @ q), abs=1e-5)
    col.close()


def test_reopen_with_a_changed_factor_needs_no_rebuild(tmp_path):
    col, x = filled(tmp_path, refine_k_factor=0)
    qs = queries(x)
    before = recall(col, x, qs)
    rows = col.index("vec")._rows.row_of[: col.index("vec")._labels.next_label].copy()
    assert (rows >= 0).all()  # one map: the rows filtered searches take, found as records were added
    col.close()
    assert not (tmp_path / "indexes" / "vec" / "refine_rows.npy").exists()  # no second map in the save
    again = open_collection(tmp_path)
    again.create_index("vec", "faiss", space="dense", exist_ok=True, **{**PQ, "refine_k_factor": 8})
    handle = again._handle("vec")
    assert handle.loaded_from_disk and handle.index.config.refine_k_factor == 8
    assert not handle.index._rows.from_save  # read back from idmap.npz, not looked up again
    assert np.array_equal(handle.index._rows.row_of[: len(rows)], rows)
    after = recall(again, x, qs)
    assert after >= 0.95 and after > before + 0.2, (before, after)
    again.close()


def test_rows_unknown_after_load_are_looked_up(tmp_path):
    """A save without rows (written before they were kept): the first refined search looks
    them up in the store once, through the rows' own backfill (their counter stays right)."""
    col, x = filled(tmp_path, refine_k_factor=8)
    qs = queries(x, 10)
    expected = [[(h.id, float(h.score)) for h in search(col, q)] for q in qs]
    index = col.index("vec")
    kept = index._rows.row_of[: index._labels.next_label].copy()
    index._rows = StoreRows.loaded(index._labels.live_labels(), None, index._labels.next_label, "test")
    assert index._rows.unknown == len(index._labels) and not index._rows.usable
    assert [[(h.id, float(h.score)) for h in search(col, q)] for q in qs] == expected
    assert index._rows.usable and not index._rows.from_save and index._rows.unknown == 0
    assert np.array_equal(index._rows.row_of[: len(kept)], kept)
    col.close()


def test_a_vector_the_store_does_not_hold_is_read_through_the_store(tmp_path):
    """A label whose row is unknown (the index was given a vector the store does not hold)
    is refined with the store's vector, read by id; the rows stay off for filters."""
    col, x = filled(tmp_path, refine_k_factor=8)
    index = col.index("vec")
    rid = "r10"
    index.add([Record(id=rid, text="x", vectors={"dense": -x[10]})])  # not the store's vector of r10
    assert not index._rows.usable and index._rows.unknown == 1
    hits = search(col, x[10], extras={"exact": True})  # every live label scored from the store's vectors
    assert hits[0].id == rid and float(hits[0].score) == pytest.approx(1.0, abs=1e-5)  # scored with the store's vector
    assert_exact_scores(hits, x, x[10])
    assert index._rows.unknown == 1  # not recorded: the store's row of r10 is not what the index holds
    col.close()


@pytest.mark.parametrize("value", [-1, 257, 10**9, 2.5, "many", None])
def test_bad_factor_is_a_typed_error(tmp_path, value):
    with pytest.raises(Exception) as info:
        FaissIndexConfig(refine_k_factor=value)
    assert "validation error" in str(info.value).lower()
    col = open_collection(tmp_path)
    with pytest.raises(ConfigError, match="refine_k_factor"):
        col.create_index("vec", "faiss", space="dense", **PQ, refine_k_factor=value)
    assert "vec" not in col.info().get("indexes", {})
    col.close()


@pytest.mark.parametrize("value", [-1, 257, "x", 1.5])
def test_bad_query_factor_is_a_validation_error(tmp_path, value):
    col, x = filled(tmp_path)
    with pytest.raises(ValidationError, match="refine_k_factor"):
        search(col, x[0], extras={"refine_k_factor": value})
    col.close()


def test_a_save_from_before_the_option_loads_and_refines(tmp_path):
    """An index saved before ``refine_k_factor`` existed (its manifest's config without the
    option, no ``rows`` in ``idmap.npz``): loaded as is, not rebuilt; the option reads as
    its default and the rows are looked up in the store at the first refined search."""
    col, x = filled(tmp_path)
    qs = queries(x, 10)
    expected = [[(h.id, round(float(h.score), 5)) for h in search(col, q)] for q in qs]
    col.insert([{"id": "extra", "text": "t", "vectors": {"dense": x[0]}}])  # dirty: saved at close ...
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StoreRows, "saved", lambda self, labels: None)  # ... as before the rows were kept
        col.close()
    col = open_collection(tmp_path)
    col.delete(["extra"])  # saved again at close, still without rows (they are unknown until looked up)
    col.close()
    folder = tmp_path / "indexes" / "vec"
    manifest = json.loads((folder / "index.json").read_text())
    del manifest["config"]["refine_k_factor"]
    (folder / "index.json").write_text(json.dumps(manifest))
    again = open_collection(tmp_path)
    again.create_index("vec", "faiss", space="dense", exist_ok=True, **PQ)
    handle = again._handle("vec")
    assert handle.loaded_from_disk and handle.index.config.refine_k_factor == FaissIndexConfig().refine_k_factor
    assert handle.index._rows.from_save and not handle.index._rows.usable
    assert [[(h.id, round(float(h.score), 5)) for h in search(again, q)] for q in qs] == expected
    assert handle.index._rows.usable and handle.index._rows.unknown == 0  # looked up once, at the first search
    again.close()


def test_index_types_without_selectors_refine_what_they_overfetch(tmp_path):
    """``PQ4x4`` alone (an IndexPQ: no SearchParameters) filters by over-fetching; the
    refined hits are still allowed ones, with exact scores."""
    x = clustered(N, DIM, clusters=12, seed=3)
    col = open_collection(tmp_path)
    col.create_index("vec", "faiss", space="dense", factory="PQ4x4", min_train=256, exact_filter_below=0, exact_filter_fraction=0.0)
    col.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"dense": x[i]}, "metadata": {"g": i % 4}} for i in range(N)])
    assert col.index("vec").trained
    qs = queries(x, 12)
    for q in qs:
        hits = search(col, q, where={"g": 1})
        assert len(hits) == K and all(int(h.id[1:]) % 4 == 1 for h in hits)
        assert_exact_scores(hits, x, q)
    assert col.index("vec")._params_ok is False  # the over-fetch path ran
    keep = np.arange(N) % 4 == 1
    assert recall(col, x, qs, keep=keep, where={"g": 1}) > recall(col, x, qs, keep=keep, where={"g": 1}, extras={"refine_k_factor": 0})
    col.close()


@pytest.mark.parametrize("compact_fraction", [0.9, 0.05], ids=["tombstones", "compacted"])
def test_hnsw_over_sq_tombstones_and_compaction(tmp_path, compact_fraction):
    """HNSW over SQ8 cannot remove: deleted records stay as tombstones (their store rows
    freed and reused by new records) or the graph is rebuilt and renumbered; either way the
    refined hits are live records with exact scores."""
    x = clustered(N, DIM, clusters=12, seed=3)
    col = open_collection(tmp_path)
    col.create_index("vec", "faiss", space="dense", factory="HNSW16_SQ8", min_train=256, compact_fraction=compact_fraction)
    col.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"dense": x[i]}} for i in range(N)])
    gone = {f"r{i}" for i in range(0, N, 3)}
    col.delete(sorted(gone))
    fresh = clustered(60, DIM, clusters=12, seed=21)
    col.insert([{"id": f"n{i}", "text": "n", "vectors": {"dense": fresh[i]}} for i in range(60)])
    index = col.index("vec")
    assert (len(index._labels.dead) > 0) == (compact_fraction > 0.5)
    for q in np.concatenate([fresh[:5], queries(x, 5)]):
        hits = search(col, q)
        assert len(hits) == K and not {h.id for h in hits} & gone
        for h in hits:
            v = fresh[int(h.id[1:])] if h.id.startswith("n") else x[int(h.id[1:])]
            assert float(h.score) == pytest.approx(float(v @ q), abs=1e-5)
    assert search(col, fresh[3])[0].id == "n3"
    col.close()
