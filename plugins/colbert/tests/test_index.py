"""The colbert index: compression, PLAID vs exhaustive agreement, add/delete, reopen, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memcore import ConfigError, CorruptError, UnknownComponentError, ValidationError
from memcore_colbert.codec import ResidualCodec


@pytest.mark.parametrize("buckets", ["per_dim", "pooled"])
def test_codec_roundtrip_and_buckets(buckets):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    centroids = x[:16].copy()
    errors = {}
    for nbits in (1, 2, 4):
        codec = ResidualCodec.train(x[1000:], centroids, nbits, buckets)
        shape = (32,) if buckets == "per_dim" else ()
        assert codec.cutoffs.shape == (*shape, (1 << nbits) - 1) and codec.weights.shape == (*shape, 1 << nbits)
        assert np.all(np.diff(codec.cutoffs, axis=-1) >= 0) and np.all(np.diff(codec.weights, axis=-1) > 0)
        codes, residuals = codec.compress(x[:1000], centroids)
        assert codes.dtype == np.uint8  # 16 centroids
        assert residuals.shape == (1000, 32 * nbits // 8) and residuals.dtype == np.uint8
        approx = codec.decompress(codes, residuals, centroids)
        errors[nbits] = float(np.mean(np.sum(approx * x[:1000], axis=1)))
        again = ResidualCodec.from_json(json.loads(json.dumps(codec.to_json())))
        np.testing.assert_array_equal(again.decompress(codes, residuals, centroids), approx)
    # more bits, closer reconstruction (mean cosine to the original)
    assert errors[1] < errors[2] < errors[4] and errors[4] > 0.97


def test_buckets_follow_colbertv2_quantiles():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4000, 16)).astype(np.float32) * np.linspace(0.1, 2.0, 16, dtype=np.float32)
    centroids = np.zeros((1, 16), dtype=np.float32)
    pooled = ResidualCodec.train(x, centroids, 2, "pooled")
    flat = x.ravel()
    np.testing.assert_allclose(pooled.cutoffs, np.quantile(flat, [0.25, 0.5, 0.75]), rtol=1e-5)
    np.testing.assert_allclose(pooled.weights, np.quantile(flat, [0.125, 0.375, 0.625, 0.875]), rtol=1e-5)
    assert pooled.avg_residual == pytest.approx(float(np.abs(x).mean()), rel=1e-5)
    per_dim = ResidualCodec.train(x, centroids, 2, "per_dim")
    for d in (0, 7, 15):  # the same quantiles, of each dimension alone
        np.testing.assert_allclose(per_dim.cutoffs[d], np.quantile(x[:, d], [0.25, 0.5, 0.75]), rtol=1e-5)
        np.testing.assert_allclose(per_dim.weights[d], np.quantile(x[:, d], [0.125, 0.375, 0.625, 0.875]), rtol=1e-5)
    # encoding follows each dimension's cutoffs: bucket id = number of cutoffs <= r_d
    probe = np.stack([per_dim.cutoffs[:, 1] - 1e-4, per_dim.cutoffs[:, 1] + 1e-4])
    _, packed = per_dim.compress(probe, centroids)
    ids = (packed[:, :, None] >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 3
    assert (ids[0] == 1).all() and (ids[1] == 2).all()


def test_per_dimension_buckets_reconstruct_anisotropic_residuals_better():
    """Dimensions of very different spread (as sentence-model token vectors have): pooled
    cutoffs waste the buckets of the narrow dimensions; per-dimension ones do not."""
    rng = np.random.default_rng(2)
    scale = np.geomspace(0.02, 1.0, 64).astype(np.float32)
    x = rng.standard_normal((6000, 64)).astype(np.float32) * scale
    centroids = np.zeros((1, 64), dtype=np.float32)
    err = {}
    for buckets in ("pooled", "per_dim"):
        codec = ResidualCodec.train(x[:3000], centroids, 2, buckets)
        codes, packed = codec.compress(x[3000:], centroids)
        # undo the normalisation of decompress: compare directions
        approx = codec.decompress(codes, packed, centroids)
        truth = x[3000:] / np.linalg.norm(x[3000:], axis=1, keepdims=True)
        err[buckets] = float(np.mean(np.sum(approx * truth, axis=1)))
    assert err["per_dim"] > err["pooled"]


def test_codes_use_the_smallest_unsigned_dtype():
    from memcore_colbert.codec import code_dtype

    assert code_dtype(2) == np.uint8 and code_dtype(256) == np.uint8
    assert code_dtype(257) == np.uint16 and code_dtype(65_536) == np.uint16
    assert code_dtype(65_537) == np.uint32


def test_plaid_agrees_with_exhaustive(kit):
    index = kit.make(train_min_tokens=200, exhaustive_below=0, ncentroids=64, nbits=2)
    texts = kit.texts(600, seed=3)
    index.add(kit.records(texts))
    assert index.engine.compressed and len(index.engine.centroids) == 64
    overlaps = []
    for text in kit.texts(40, seed=7, start=5000):
        query = " ".join(text.split()[1:5])
        plaid = [h.id for h in index.search(kit.query(query, ncells=4, centroid_score_threshold=0.3), 10)]
        exact = [h.id for h in index.search(kit.query(query, exhaustive=True), 10)]
        overlaps.append(len(set(plaid) & set(exact)) / 10)
    assert np.mean(overlaps) >= 0.9
    for i in (0, 17, 333):  # a passage's own text still ranks it first
        assert index.search(kit.query(texts[i]), 1)[0].id == f"r{i}"


def test_compressed_scores_track_fp32(kit):
    small = kit.make()  # stays uncompressed: exact fp32 MaxSim
    packed = kit.make(train_min_tokens=100, exhaustive_below=0, ncentroids=32, nbits=4)
    texts = kit.texts(300, seed=4)
    for index in (small, packed):
        index.add(kit.records(texts))
    assert not small.engine.compressed and packed.engine.compressed
    q = kit.query(" ".join(texts[5].split()[:4]), exhaustive=True)
    a = {h.id: h.score for h in small.search(q, 20)}
    b = {h.id: h.score for h in packed.search(q, 20)}
    shared = set(a) & set(b)
    assert len(shared) >= 15
    assert max(abs(a[i] - b[i]) for i in shared) < 0.1


def test_incremental_add_delete_compaction_and_retrain(kit):
    index = kit.make(train_min_tokens=200, ncentroids=16, retrain_growth=3.0, compact_fraction=0.3, exhaustive_below=0)
    texts = kit.texts(900, seed=5)
    index.add(kit.records(texts[:100]))
    engine = index.engine
    assert engine.compressed and engine.trained_tokens == engine.total_tokens
    first_centroids = engine.centroids.copy()
    index.add(kit.records(texts[100:200], start=100))  # assigned to the existing centroids
    assert np.array_equal(engine.centroids, first_centroids)
    assert index.search(kit.query(texts[150]), 1)[0].id == "r150"
    index.remove([f"r{i}" for i in range(50)])
    assert len(index) == 150 and index.stats()["tombstones"] == 50
    assert all(h.id not in {f"r{i}" for i in range(50)} for h in index.search(kit.query(texts[3]), 20))
    index.remove([f"r{i}" for i in range(50, 80)])  # past compact_fraction: slots dropped
    assert index.stats()["tombstones"] == 0 and len(engine.pids) == 120
    assert index.search(kit.query(texts[120]), 1)[0].id == "r120"
    index.add(kit.records(texts[200:900], start=200))  # past retrain_growth: trained again
    assert not np.array_equal(engine.centroids, first_centroids)
    assert engine.trained_tokens == engine.live_tokens
    for i in (90, 500, 899):
        assert index.search(kit.query(texts[i]), 1)[0].id == f"r{i}"


def test_readd_replaces_and_allowed(kit):
    index = kit.make(train_min_tokens=100, ncentroids=16, exhaustive_below=0)
    texts = kit.texts(200, seed=6)
    index.add(kit.records(texts))
    index.add(kit.records(["zebra quantum lighthouse"], start=7))
    assert len(index) == 200
    assert index.search(kit.query("zebra lighthouse"), 1)[0].id == "r7"
    assert [h.id for h in index.search(kit.query(texts[7]), 5)][0] != "r7"
    allowed = {f"r{i}" for i in range(0, 200, 10)}
    hits = index.search(kit.query(texts[30]), 5, allowed)
    assert hits[0].id == "r30" and {h.id for h in hits} <= allowed


def test_save_reopen_compressed(kit, tmp_path):
    index = kit.make(train_min_tokens=100, ncentroids=16, exhaustive_below=0, nbits=1)
    texts = kit.texts(300, seed=8)
    index.add(kit.records(texts))
    index.remove(["r3", "r4"])
    index.save(tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert {
        "plan.json",
        "metadata.json",
        "centroids.npy",
        "0.codes.npy",
        "0.residuals.npy",
        "ivf.pid.npy",
        "ivf.lengths.npy",
        "doclens.0.json",
        "buckets.json",
        "avg_residual.json",
    } <= names
    assert not any(n.endswith(".tmp") or n.endswith(".pt") for n in names)
    fresh = kit.make(train_min_tokens=100, ncentroids=16, exhaustive_below=0, nbits=1)
    fresh.load(tmp_path)
    assert len(fresh) == 298
    for i in (0, 10, 299):
        q = kit.query(texts[i])
        assert [(h.id, round(h.score, 6)) for h in fresh.search(q, 5)] == [(h.id, round(h.score, 6)) for h in index.search(q, 5)]
    fresh.add(kit.records(["a brand new passage about lighthouses"], start=1000))
    assert fresh.search(kit.query("brand new lighthouses"), 1)[0].id == "r1000"


def test_codes_on_disk_are_narrow_and_format_1_still_reads(kit, tmp_path):
    import io

    index = kit.make(train_min_tokens=100, ncentroids=300, exhaustive_below=0, buckets="pooled", residual_transform="none")
    texts = kit.texts(400, seed=10)
    index.add(kit.records(texts))
    assert index.engine.codes.dtype == np.uint16  # 300 centroids
    index.save(tmp_path)
    assert np.load(tmp_path / "0.codes.npy", allow_pickle=False).dtype == np.uint16
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["format_version"] == 4 and meta["codes_dtype"] == "uint16"
    q = kit.query(texts[42])
    before = [(h.id, round(h.score, 6)) for h in index.search(q, 5)]
    # format 2: no residual transform in buckets.json
    buckets = json.loads((tmp_path / "buckets.json").read_text())
    (tmp_path / "buckets.json").write_text(json.dumps({k: v for k, v in buckets.items() if k not in ("transform", "buckets")}))
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["config"].pop("residual_transform")
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "format_version": 2}))
    (tmp_path / "metadata.json").write_text(json.dumps({**meta, "format_version": 2}))
    two = kit.make(train_min_tokens=100, ncentroids=300, exhaustive_below=0, buckets="pooled")
    two.load(tmp_path)
    assert [(h.id, round(h.score, 6)) for h in two.search(q, 5)] == before
    # rewrite the directory as format 1 wrote it: int32 codes, pooled buckets, no codes_dtype
    buffer = io.BytesIO()
    np.save(buffer, np.load(tmp_path / "0.codes.npy").astype(np.int32), allow_pickle=False)
    (tmp_path / "0.codes.npy").write_bytes(buffer.getvalue())
    del meta["codes_dtype"]
    (tmp_path / "metadata.json").write_text(json.dumps({**meta, "format_version": 1}))
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["config"].pop("buckets")
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "format_version": 1}))
    old = kit.make(train_min_tokens=100, ncentroids=300, exhaustive_below=0, buckets="pooled")
    old.load(tmp_path)
    assert old.engine.codes.dtype == np.uint16
    assert [(h.id, round(h.score, 6)) for h in old.search(q, 5)] == before
    # a directory of a newer format: a clear refusal
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "format_version": 5}))
    (tmp_path / "metadata.json").write_text(json.dumps({**meta, "format_version": 5}))
    with pytest.raises(CorruptError, match="format version 5.*reads versions 1, 2, 3, 4"):
        kit.make(train_min_tokens=100, ncentroids=300).load(tmp_path)


def test_load_refuses_mismatched_files(kit, tmp_path):
    index = kit.make(train_min_tokens=100, ncentroids=16)
    index.add(kit.records(kit.texts(100, seed=9)))
    index.save(tmp_path)
    with pytest.raises(CorruptError, match="nbits"):
        kit.make(train_min_tokens=100, nbits=4).load(tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "model_id": "another-model"}))
    with pytest.raises(CorruptError, match="model_id"):
        kit.make(train_min_tokens=100).load(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    kit.make(train_min_tokens=100).load(tmp_path)
    meta = json.loads((tmp_path / "metadata.json").read_text())
    meta["num_embeddings"] += 1
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(CorruptError):
        kit.make(train_min_tokens=100).load(tmp_path)
    (tmp_path / "0.codes.npy").write_bytes(b"garbage")
    with pytest.raises(CorruptError):
        kit.make(train_min_tokens=100).load(tmp_path)


def test_plaid_parameters_by_k_settings_and_query_mode():
    from memcore_colbert import ColbertIndexConfig
    from memcore_colbert.config import ColbertQueryMode, resolve_params

    config = ColbertIndexConfig(embedder={"kind": "token_hashing"})
    # ColBERT's by k, but ndocs 512 (not 256) for k <= 10: MiniLM's tokens sit far from their centroids
    assert resolve_params(config, 10, None).model_dump() == {"ncells": 1, "centroid_score_threshold": 0.5, "ndocs": 512, "exhaustive": False}
    assert resolve_params(config, 11, None).model_dump() == {"ncells": 2, "centroid_score_threshold": 0.45, "ndocs": 1024, "exhaustive": False}
    assert resolve_params(config, 1500, None).ndocs == 6000
    tuned = config.model_copy(update={"ndocs": 256, "ncells": 2})
    assert (resolve_params(tuned, 10, None).ndocs, resolve_params(tuned, 10, None).ncells) == (256, 2)
    mode = ColbertQueryMode(ndocs=64)
    assert resolve_params(tuned, 10, mode).ndocs == 64 and resolve_params(tuned, 100, mode).ndocs == 100  # never below k


def test_bad_settings_and_queries(kit):
    with pytest.raises(UnknownComponentError):
        kit.make(embedder={"kind": "no-such-embedder"})
    with pytest.raises(ConfigError, match="no token vectors"):
        kit.make(embedder={"kind": "hashing", "dim": 32})
    with pytest.raises(ValidationError, match="multiple of 8"):
        kit.make(embedder={"kind": "token_hashing", "dim": 12}, nbits=1)
    index = kit.make()
    index.add(kit.records(["hello world"]))
    with pytest.raises(ValidationError, match="query text is empty"):
        index.search(kit.query("  "), 3)
    with pytest.raises(ValidationError, match="extras.colbert"):
        index.search(kit.query("hello", ncells=0), 3)
    with pytest.raises(ValidationError, match="k must be"):
        index.search(kit.query("hello"), 0)
    assert len(index) == 1


def test_retraining_compresses_the_new_passages_from_their_original_vectors(kit):
    index = kit.make(train_min_tokens=100, ncentroids=16, retrain_growth=2.0, exhaustive_below=0)
    texts = kit.texts(400, seed=11)
    index.add(kit.records(texts[:50]))
    engine = index.engine
    trained = engine.trained_tokens
    fresh = index.encoder.documents(texts[50:400])
    index.add(kit.records(texts[50:400], start=50))  # past retrain_growth: trained again
    assert engine.trained_tokens > trained
    rows = np.arange(engine.offsets[50], engine.total_tokens)
    assert engine.pids[50] == "r50" and len(rows) == sum(len(m) for m in fresh)
    codes, residuals = engine.codec.compress(np.concatenate(fresh), engine.centroids)
    np.testing.assert_array_equal(engine.codes[rows], codes)  # not a compressed copy compressed again
    np.testing.assert_array_equal(engine.residuals[rows], residuals)


def test_deferred_training_trains_once_on_the_original_vectors(kit, tmp_path):
    """defer_training (the default): batches past train_min_tokens stay uncompressed until
    the first search or save, which trains once on every original vector, so a collection
    filled in batches ends up as if built in one add."""
    texts = kit.texts(400, seed=12)
    options = dict(train_min_tokens=100, ncentroids=16, retrain_growth=2.0, exhaustive_below=0)
    batched = kit.make(defer_training=True, **options)
    for start in range(0, 400, 50):
        batched.add(kit.records(texts[start : start + 50], start=start))
        assert not batched.engine.compressed and batched.engine.train_pending
    assert batched.stats()["train_pending"]
    one_shot = kit.make(**options)
    one_shot.add(kit.records(texts))
    q = kit.query(texts[77])
    assert [(h.id, round(h.score, 5)) for h in batched.search(q, 5)] == [(h.id, round(h.score, 5)) for h in one_shot.search(q, 5)]
    engine = batched.engine
    assert engine.compressed and not engine.train_pending and engine.trained_tokens == engine.total_tokens
    np.testing.assert_array_equal(engine.codes, one_shot.engine.codes)
    # a save trains too; later adds go to the trained centroids at once
    saving = kit.make(defer_training=True, **options)
    saving.add(kit.records(texts[:200]))
    assert saving.engine.train_pending
    saving.save(tmp_path)
    assert saving.engine.compressed and (tmp_path / "centroids.npy").is_file()
    saving.add(kit.records(texts[200:250], start=200))
    assert not saving.engine.train_pending and saving.engine.trained_tokens < saving.engine.total_tokens
    # max_raw_tokens bounds the uncompressed vectors: the add crossing it trains at once
    capped = kit.make(defer_training=True, max_raw_tokens=1000, **options)
    capped.add(kit.records(texts[:20]))
    assert capped.engine.train_pending
    while not capped.engine.compressed:
        capped.add(kit.records(texts[len(capped) : len(capped) + 20], start=len(capped)))
    assert capped.engine.trained_tokens >= 1000 and not capped.engine.train_pending
