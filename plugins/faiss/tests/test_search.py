"""Search behaviour: score conventions, recall, tombstones, training, allowed pushdown, modes."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from memcore import Query
from memcore_faiss import selectors

# -- scores ------------------------------------------------------------------------------


def test_score_conventions(make, kit):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((50, 12)).astype(np.float32) * 3  # not normalised
    q = rng.standard_normal(12).astype(np.float32)
    ids = [f"r{i}" for i in range(50)]
    for metric in ("cosine", "ip", "l2"):
        index = make(12, metric=metric)
        index.add(kit.records(base))
        hits = index.search(kit.query(q), 50)
        got = {h.id: (h.score, h.raw) for h in hits}
        for i, rid in enumerate(ids):
            score, raw = got[rid]
            if metric == "cosine":
                expected = float(base[i] @ q / np.linalg.norm(base[i]) / np.linalg.norm(q))
                assert score == pytest.approx(expected, abs=1e-5) and raw == pytest.approx(expected, abs=1e-5)
            elif metric == "ip":
                assert score == pytest.approx(float(base[i] @ q), rel=1e-4) and raw == score
            else:
                sq = float(((base[i] - q) ** 2).sum())
                assert raw == pytest.approx(sq, rel=1e-4) and score == pytest.approx(-sq, rel=1e-4)
        assert [h.id for h in hits[:10]] == kit.exact_ids(
            base if metric != "cosine" else base / np.linalg.norm(base, axis=1, keepdims=True), ids, q, 10, metric
        )
        assert index.score_range == {"cosine": (-1.0, 1.0), "ip": (None, None), "l2": (None, 0.0)}[metric]


def test_zero_vectors_under_cosine_score_zero(make, kit):
    index = make(4)
    index.add(kit.records(np.array([[0, 0, 0, 0], [1, 0, 0, 0]], dtype=np.float32)))
    hits = index.search(kit.query(np.zeros(4)), 2)
    assert sorted(h.score for h in hits) == [0.0, 0.0]
    assert index.search(kit.query(np.array([2.0, 0, 0, 0])), 1)[0].id == "r1"


def test_score_threshold_config_and_query_mode(make, kit):
    base = np.eye(4, dtype=np.float32)
    base[1] = [0.6, 0.8, 0, 0]
    index = make(4, score_threshold=0.5)
    index.add(kit.records(base))
    q = np.array([1.0, 0, 0, 0], dtype=np.float32)
    assert [h.id for h in index.search(kit.query(q), 4)] == ["r0", "r1"]
    assert [h.id for h in index.search(kit.query(q, score_threshold=0.9), 4)] == ["r0"]
    everything = [h.id for h in index.search(kit.query(q, score_threshold=-1.0), 4)]
    assert everything[:2] == ["r0", "r1"] and set(everything[2:]) == {"r2", "r3"}  # r2, r3 tie at 0
    # also on the exact path of small allowed sets
    assert [h.id for h in index.search(kit.query(q), 4, allowed={"r1", "r2"})] == ["r1"]


# -- recall --------------------------------------------------------------------------------


def _recall(index, base, queries, k, kit, **mode):
    ids = [f"r{i}" for i in range(len(base))]
    found = 0
    results = index.search_batch([kit.query(q, **mode) for q in queries], k)
    for q, hits in zip(queries, results):
        found += len({h.id for h in hits} & set(kit.exact_ids(base, ids, q, k)))
    return found / (k * len(queries))


def test_recall_against_exact(make, kit):
    base = kit.clustered(3000, 32, clusters=30)
    queries = kit.clustered(50, 32, clusters=30, seed=9)
    flat = make(32)
    flat.add(kit.records(base))
    assert _recall(flat, base, queries, 10, kit) == 1.0
    hnsw = make(32, factory="HNSW32")
    hnsw.add(kit.records(base))
    assert _recall(hnsw, base, queries, 10, kit, ef_search=128) >= 0.9
    ivf = make(32, factory="IVF16,Flat", min_train=1000, nprobe=4)
    ivf.add(kit.records(base))
    assert ivf.trained
    assert _recall(ivf, base, queries, 10, kit, nprobe=16) == 1.0  # every list: exact
    assert _recall(ivf, base, queries, 10, kit) >= 0.6
    assert _recall(ivf, base, queries, 10, kit, exact=True) == 1.0


def test_recall_on_scifact_minilm(make, kit):
    data = kit.shared / "data" / "scifact" / "minilm"
    if not (data / "corpus.npy").is_file():
        pytest.skip(f"SciFact MiniLM embeddings not found under {data}")
    base = np.load(data / "corpus.npy", allow_pickle=False)[:3000]
    queries = np.load(data / "queries.npy", allow_pickle=False)[:100]
    hnsw = make(base.shape[1], factory="HNSW32")
    hnsw.add(kit.records(base))
    assert _recall(hnsw, base, queries, 10, kit, ef_search=64) >= 0.95


# -- tombstones and compaction ---------------------------------------------------------------


def test_hnsw_tombstones_are_filtered_and_k_is_filled(make, kit):
    base = kit.clustered(400, 16)
    ids = [f"r{i}" for i in range(400)]
    index = make(16, factory="HNSW32", ef_search=128, compact_fraction=0.5)
    index.add(kit.records(base))
    q = base[0]
    top = [h.id for h in index.search(kit.query(q), 30)]
    # fewer tombstones than k: over-fetch; more than k: an IDSelectorNot pushed down
    for gone in (top[:3], top[:25]):
        fresh = make(16, factory="HNSW32", ef_search=128, compact_fraction=0.5)
        fresh.add(kit.records(base))
        fresh.remove(gone)
        stats = fresh.stats()
        assert stats["tombstones"] == len(gone) and stats["faiss_ntotal"] == 400 and len(fresh) == 400 - len(gone)
        hits = fresh.search(kit.query(q), 10)
        assert len(hits) == 10 and not {h.id for h in hits} & set(gone)
        alive = [i for i in ids if i not in gone]
        assert [h.id for h in hits] == kit.exact_ids(base[[ids.index(i) for i in alive]], alive, q, 10)
        batch = fresh.search_batch([kit.query(q), kit.query(base[5])], 10)
        assert [h.id for h in batch[0]] == [h.id for h in hits]


def test_hnsw_compaction_rebuilds_from_live_vectors(make, kit):
    base = kit.clustered(200, 16)
    index = make(16, factory="HNSW32", compact_fraction=0.2, ef_search=200)
    index.add(kit.records(base))
    index.remove([f"r{i}" for i in range(40)])  # 40 / 200 = 0.2: not above the fraction yet
    assert index.stats()["tombstones"] == 40
    index.remove(["r40"])
    stats = index.stats()
    assert stats["tombstones"] == 0 and stats["faiss_ntotal"] == 159 == len(index)
    ids = [f"r{i}" for i in range(41, 200)]
    for i in (50, 120, 199):
        hits = index.search(kit.query(base[i]), 5)
        assert [h.id for h in hits] == kit.exact_ids(base[41:], ids, base[i], 5)
    # labels survive compaction: re-adding and removing keeps working
    index.add(kit.records(base[:5]))
    assert index.search(kit.query(base[2]), 1)[0].id == "r2"
    index.remove(["r2"])
    assert index.search(kit.query(base[2]), 1)[0].id != "r2"


def test_readd_on_hnsw_buries_the_old_vector(make, kit):
    index = make(4, factory="HNSW32", metric="l2", compact_fraction=0.5)
    index.add(kit.records(np.eye(4)))
    index.add(kit.records(np.array([[0, 0, 0, 5]]), start=0))  # r0 moves
    assert index.stats()["tombstones"] == 1 and len(index) == 4
    assert index.search(kit.query(np.array([1.0, 0, 0, 0])), 4)[-1].id == "r0"


def test_compacting_a_trained_hnsw_keeps_its_quantizer(make, kit):
    base = kit.clustered(300, 16)
    index = make(16, factory="HNSW16_SQ8", min_train=100, compact_fraction=0.1)
    index.add(kit.records(base))
    assert index.trained
    index.remove([f"r{i}" for i in range(40)])
    assert index.stats()["tombstones"] == 0 and len(index) == 260
    assert index.search(kit.query(base[100]), 1)[0].id == "r100"


# -- training -------------------------------------------------------------------------------


def test_training_transition(make, kit):
    base = kit.clustered(600, 16)
    ids = [f"r{i}" for i in range(600)]
    index = make(16, factory="IVF8,Flat", min_train=300, nprobe=2)
    index.add(kit.records(base[:150]))
    index.add(kit.records(base[150:299], start=150))
    assert not index.trained and index.stats()["pending"] == 299 and index.stats()["faiss_ntotal"] == 0
    q = base[10]
    # before training: exact search over the buffer
    assert [h.id for h in index.search(kit.query(q), 10)] == kit.exact_ids(base[:299], ids[:299], q, 10)
    index.remove(["r10"])
    assert "r10" not in [h.id for h in index.search(kit.query(q), 10)]
    index.add(kit.records(base[299:400], start=299))  # crosses min_train: trains, moves the buffer in
    stats = index.stats()
    assert index.trained and stats["pending"] == 0 and stats["faiss_ntotal"] == 399 == len(index)
    alive = [i for i in range(400) if i != 10]
    full = index.search(kit.query(q, nprobe=8), 10)  # every list visited: exact again
    assert [h.id for h in full] == kit.exact_ids(base[alive], [ids[i] for i in alive], q, 10)
    approx = index.search(kit.query(q), 10)
    assert len(approx) == 10 and len({h.id for h in approx} & {h.id for h in full}) >= 6
    index.add(kit.records(base[400:], start=400))  # later adds go straight in
    assert index.stats()["faiss_ntotal"] == 599


# -- allowed --------------------------------------------------------------------------------


@pytest.mark.parametrize("factory, options", [("Flat", {}), ("HNSW32", {"ef_search": 128}), ("IVF4,Flat", {"min_train": 100, "nprobe": 4})])
def test_allowed_is_pushed_down_to_faiss(make, kit, monkeypatch, factory, options):
    base = kit.clustered(500, 16)
    ids = [f"r{i}" for i in range(500)]
    index = make(16, factory=factory, exact_filter_below=0, **options)
    index.add(kit.records(base))
    calls = []
    real = selectors.include
    monkeypatch.setattr("memcore_faiss.index.include", lambda *a: calls.append(len(a[1])) or real(*a))
    allowed = {f"r{i}" for i in range(0, 500, 2)} | {"not-held"}
    rows = [i for i in range(0, 500, 2)]
    for q in base[1:40:13]:
        hits = index.search(kit.query(q), 10, allowed)
        assert len(hits) == 10 and {h.id for h in hits} <= allowed
        assert [h.id for h in hits] == kit.exact_ids(base[rows], [ids[i] for i in rows], q, 10)
    assert calls == [250, 250, 250]


def test_small_allowed_sets_are_scored_exactly(make, kit, monkeypatch):
    base = kit.clustered(500, 16)
    index = make(16, factory="HNSW32", exact_filter_below=64)
    index.add(kit.records(base))
    monkeypatch.setattr(type(index), "_approximate", lambda *a, **kw: pytest.fail("graph search used for a small allowed set"))
    allowed = {f"r{i}" for i in range(0, 500, 10)}
    hits = index.search(kit.query(base[3]), 60, allowed)
    assert len(hits) == 50
    rows = list(range(0, 500, 10))
    assert [h.id for h in hits[:10]] == kit.exact_ids(base[rows], [f"r{i}" for i in rows], base[3], 10)


@pytest.mark.parametrize("factory", ["HNSW32", "Flat", "IVF4,Flat"])
def test_cached_allowed_sets_follow_changes_and_fractions(make, kit, factory):
    """An AllowedIds set is translated once per index version: adds, removes and a
    compaction in between never return a removed id nor miss an added one."""
    from memcore.plugin import AllowedIds

    base = kit.clustered(600, 16)
    extra = {"min_train": 100, "nprobe": 4} if factory.startswith("IVF") else {}
    index = make(16, factory=factory, exact_filter_below=0, exact_filter_fraction=0.3, compact_fraction=0.05, **extra)
    records = kit.records(base)
    index.add(records[:500])
    for step in range(0, 500, 7):
        small = AllowedIds(f"r{i}" for i in range(step % 5, 600, 5))  # 20%: exact path
        large = AllowedIds(f"r{i}" for i in range(600) if i % 5 != step % 5)  # 80%: graph path
        for allowed in (small, large):
            for _ in range(2):  # the second search uses the memo
                hits = index.search(kit.query(base[step]), 10, allowed)
                held = [f"r{i}" for i in range(600) if f"r{i}" in allowed and index._labels.label_of.get(f"r{i}") is not None]
                assert {h.id for h in hits} <= set(held)
                assert len(hits) == min(10, len(held))
        index.remove([f"r{step}", f"r{step + 1}"])
        index.add([records[500 + step % 100]])


def test_bitmap_and_hash_selectors_agree():
    labels = np.array([1, 5, 64, 65, 99], dtype=np.int64)
    dense = selectors.include(faiss, labels, 100)
    sparse = selectors.include(faiss, labels, 10**9)
    assert isinstance(dense.selector, faiss.IDSelectorBitmap) and isinstance(sparse.selector, faiss.IDSelectorBatch)
    for sel in (dense.selector, sparse.selector):
        assert [i for i in range(1100) if sel.is_member(i)] == labels.tolist()
    inverse = selectors.exclude(faiss, labels)
    assert [i for i in range(1100) if not inverse.selector.is_member(i)] == labels.tolist()


def test_index_without_selector_support_overfetches(make, kit):
    base = kit.clustered(400, 16)
    index = make(16, factory="PQ4x4", min_train=64, metric="l2", exact_filter_below=0, exact_filter_fraction=0)
    index.add(kit.records(base))
    allowed = {f"r{i}" for i in range(0, 400, 40)}
    for _ in range(2):  # the first call discovers that IndexPQ refuses SearchParameters
        hits = index.search(kit.query(base[7]), 5, allowed)
        assert len(hits) == 5 and {h.id for h in hits} <= allowed
    assert index._params_ok is False


# -- query modes and batches -----------------------------------------------------------------


def test_query_modes(make, kit):
    base = kit.clustered(800, 16)
    ids = [f"r{i}" for i in range(800)]
    hnsw = make(16, factory="HNSW32")
    hnsw.add(kit.records(base))
    q = base[42] + 0.1
    truth = kit.exact_ids(base, ids, q, 10)
    assert [h.id for h in hnsw.search(kit.query(q, exact=True), 10)] == truth
    assert [h.id for h in hnsw.search(kit.query(q, ef_search=400), 10)] == truth
    assert hnsw.stats()["ef_search"] == "auto"  # the override did not stick
    assert hnsw.stats()["ef_search_at_k10"] == hnsw.effective_ef(10) == 40
    fixed = make(16, factory="HNSW32", ef_search=16)
    fixed.add(kit.records(base))
    fixed.search(kit.query(q, ef_search=400), 10)
    assert fixed.stats()["ef_search"] == 16 and fixed.effective_ef(10) == 16


def test_hnsw_defaults_grow_with_k_and_size(make, kit, monkeypatch):
    from memcore_faiss.defaults import DEFAULT_EF_CONSTRUCTION, auto_ef_search

    assert auto_ef_search(10, 500) == 40 and auto_ef_search(50, 500) == 100
    assert auto_ef_search(10, 100_000) > auto_ef_search(10, 10_000) > auto_ef_search(10, 1_000)
    assert auto_ef_search(10, 10**40) == 512 and auto_ef_search(2000, 10) == 2000
    index = make(16, factory="HNSW32")
    index.add(kit.records(kit.clustered(300, 16)))
    assert index.stats()["ef_construction"] == DEFAULT_EF_CONSTRUCTION
    assert make(16, factory="HNSW32", ef_construction=24).stats()["ef_construction"] == 24
    seen = []
    real = index._run
    monkeypatch.setattr(index, "_run", lambda target, x, fetch, params: seen.append(params.efSearch) or real(target, x, fetch, params))
    index.search(kit.query(kit.clustered(1, 16)[0]), 40)
    index.search(kit.query(kit.clustered(1, 16)[0], ef_search=20), 10)
    assert seen == [80, 20]


def test_search_batch_with_mixed_modes(make, kit):
    base = kit.clustered(300, 16)
    index = make(16, factory="IVF4,Flat", min_train=100)
    index.add(kit.records(base))
    queries = [kit.query(base[1], nprobe=4), kit.query(base[2]), Query(vectors={"default": base[3]})]
    batch = index.search_batch(queries, 5)
    assert [[h.id for h in hits] for hits in batch] == [[h.id for h in index.search(q, 5)] for q in queries]


def test_batched_calls_restore_faiss_globals(make, kit):
    base = kit.clustered(100, 16)
    index = make(16, omp_threads=1, blas_min_queries=2)
    index.add(kit.records(base))
    threads, blas = faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold
    seen = []
    original = index._main.search

    def spy(*args, **kwargs):
        seen.append((faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold))
        return original(*args, **kwargs)

    index._main.search = spy
    index.search_batch([kit.query(q) for q in base[:8]], 3)
    index.search(kit.query(base[0]), 3)
    assert seen[0] == (1, 2 * 16) and seen[1][0] == 1 and seen[1][1] == blas  # one query: no BLAS change
    assert (faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold) == (threads, blas)


def test_default_batches_over_flat_use_single_threaded_blas(make, kit):
    base = kit.clustered(100, 16)
    flat, hnsw = make(16), make(16, factory="HNSW32")
    threads, blas = faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold
    for index in (flat, hnsw):
        index.add(kit.records(base))
        seen = []
        original = index._main.search

        def spy(*args, original=original, seen=seen, **kwargs):
            seen.append((faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold))
            return original(*args, **kwargs)

        index._main.search = spy
        index.search_batch([kit.query(q) for q in base[:16]], 3)  # blas_min_queries: 16
        index.search_batch([kit.query(q) for q in base[:15]], 3)
        if index is flat:
            assert seen == [(1, 16 * 16), (threads, blas)]
        else:  # HNSW does no distance matrix: nothing is changed
            assert seen == [(threads, blas), (threads, blas)]
    assert (faiss.omp_get_max_threads(), faiss.cvar.distance_compute_blas_threshold) == (threads, blas)
