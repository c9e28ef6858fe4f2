"""The pca residual transform: a learned rotation, bits by variance, Lloyd-Max buckets per component."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memcore import CorruptError
from memcore_colbert.codec import ResidualCodec
from memcore_colbert.transform import TransformCodec
from memcore_colbert.vq import VQTransformCodec


def correlated(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 8 directions whose residuals share a few strong directions (as MiniLM's do)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    spread = np.geomspace(1.0, 0.01, dim)  # variance concentrated in a few components
    centres = rng.standard_normal((8, dim))
    x = centres[rng.integers(0, 8, n)] * 3 + (rng.standard_normal((n, dim)) * spread) @ basis.T
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("nbits", [1, 2, 4])
def test_transform_codec_beats_plain_buckets_at_the_same_bytes(nbits):
    x = correlated(6000, 32, 0)
    centroids = x[:8].copy()
    for _ in range(3):  # a few Lloyd steps for sensible centroids
        assign = np.argmax(x @ centroids.T, axis=1)
        centroids = np.stack([x[assign == c].mean(axis=0) for c in range(8)])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    centroids = centroids.astype(np.float32)
    plain = ResidualCodec.train(x[3000:], centroids, nbits, "per_dim")
    pca = TransformCodec.train(x[3000:], centroids, nbits)
    assert pca.bytes_per_token == plain.bytes_per_token == 32 * nbits // 8
    assert int(pca.widths.sum()) <= 32 * nbits and (np.diff(pca.widths) <= 0).all()
    assert pca.widths[0] > nbits and pca.widths[-1] < nbits  # bits follow the variance
    np.testing.assert_allclose(pca.rotation.T @ pca.rotation, np.eye(32), atol=1e-5)
    cos = {}
    for name, codec in (("plain", plain), ("pca", pca)):
        codes, packed = codec.compress(x[:3000], centroids)
        assert packed.shape == (3000, codec.bytes_per_token) and packed.dtype == np.uint8
        approx = codec.decompress(codes, packed, centroids)
        np.testing.assert_allclose(np.linalg.norm(approx, axis=1), 1.0, atol=1e-5)
        cos[name] = float(np.mean(np.sum(approx * x[:3000], axis=1)))
    assert cos["pca"] > cos["plain"]
    # scoring in the rotated space gives the same inner products as the decoded vectors
    codes, packed = pca.compress(x[:200], centroids)
    q = x[3000:3010]
    np.testing.assert_allclose(
        pca.decompress_scoring(codes, packed, centroids) @ pca.rotate_query(q).T, pca.decompress(codes, packed, centroids) @ q.T, atol=1e-5
    )
    again = TransformCodec.from_json(json.loads(json.dumps(pca.to_json())), pca.rotation)
    np.testing.assert_array_equal(again.decompress(codes, packed, centroids), pca.decompress(codes, packed, centroids))


@pytest.mark.parametrize("nbits", [1, 2, 4])
def test_lloyd_buckets_and_packing(nbits):
    x = correlated(4000, 16, 1)
    centroids = np.zeros((1, 16), dtype=np.float32)
    codec = TransformCodec.train(x, centroids, nbits)
    assert len(set(codec.widths.tolist())) >= 2  # several widths: bytes of different layouts
    for j in np.flatnonzero(codec.widths > 0)[:3]:
        w, cut = codec.weights[j], codec.cutoffs[j]
        assert (np.diff(w) >= 0).all()
        np.testing.assert_allclose(cut, (w[1:] + w[:-1]) / 2, rtol=1e-5)  # nearest-neighbour condition
    # each component's bucket id sits at its bit offset; none straddles a byte
    codes, packed = codec.compress(x[:50], centroids)
    z = x[:50] @ codec.rotation
    decoded = np.zeros_like(z)
    offset = 0
    for j, width in enumerate(codec.widths.tolist()):
        if not width:
            continue
        assert offset // 8 == (offset + width - 1) // 8
        ids = (packed[:, offset // 8] >> (offset % 8)) & ((1 << width) - 1)
        np.testing.assert_array_equal(ids, np.searchsorted(codec.cutoffs[j], z[:, j], side="right"))
        decoded[:, j] = codec.weights[j][ids]
        offset += width
    # decoding: (rotated) centroid + each coded component's weight, the others their mean
    expected = (centroids @ codec.rotation)[codes] + decoded + np.where(codec.widths > 0, 0, codec.means)[None, :]
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(codec.decompress_scoring(codes, packed, centroids), expected, atol=1e-5)


def test_bad_tables_are_refused():
    x = correlated(2000, 16, 2)
    codec = TransformCodec.train(x, np.zeros((1, 16), dtype=np.float32), 1)
    data = codec.to_json()
    with pytest.raises(ValueError, match="more than dim"):
        TransformCodec.from_json({**data, "widths": [8] * 16, "bucket_cutoffs": [[0.0] * 255] * 16, "bucket_weights": [[0.0] * 256] * 16}, codec.rotation)
    with pytest.raises(ValueError, match="widest first"):
        TransformCodec.from_json({**data, "widths": list(reversed(data["widths"]))}, codec.rotation)
    with pytest.raises(ValueError, match="do not fit dim"):
        TransformCodec.from_json(data, codec.rotation[:8])


def test_pca_index_plaid_agrees_reopens_and_refuses_another_transform(kit, tmp_path):
    options = dict(train_min_tokens=200, exhaustive_below=0, ncentroids=64, nbits=2, residual_transform="pca")
    index = kit.make(**options)
    texts = kit.texts(600, seed=3)
    index.add(kit.records(texts))
    assert isinstance(index.engine.codec, TransformCodec)
    overlaps = []
    for text in kit.texts(30, seed=7, start=5000):
        query = " ".join(text.split()[1:5])
        plaid = [h.id for h in index.search(kit.query(query, ncells=4, centroid_score_threshold=0.3), 10)]
        exact = [h.id for h in index.search(kit.query(query, exhaustive=True), 10)]
        overlaps.append(len(set(plaid) & set(exact)) / 10)
    assert np.mean(overlaps) >= 0.9
    for i in (0, 17, 333):
        assert index.search(kit.query(texts[i]), 1)[0].id == f"r{i}"
    stats = index.stats()
    assert stats["stored_bytes"] == index.engine.codes.nbytes + index.engine.residuals.nbytes + index.engine.centroids.nbytes + 32 * 32 * 4
    index.save(tmp_path)
    assert np.load(tmp_path / "rotation.npy", allow_pickle=False).shape == (32, 32)
    assert json.loads((tmp_path / "buckets.json").read_text())["transform"] == "pca"
    fresh = kit.make(**options)
    fresh.load(tmp_path)
    q = kit.query(texts[42])
    assert [(h.id, round(h.score, 6)) for h in fresh.search(q, 5)] == [(h.id, round(h.score, 6)) for h in index.search(q, 5)]
    # the index keeps the codec it was trained with; the setting applies at its next training
    other = kit.make(**{**options, "residual_transform": "none"})
    other.load(tmp_path)
    assert other.stats()["residual_transform"] == "pca"
    assert [h.id for h in other.search(q, 5)] == [h.id for h in index.search(q, 5)]
    other.engine.retrain()
    assert other.stats()["residual_transform"] == "none"
    (tmp_path / "rotation.npy").unlink()
    with pytest.raises(CorruptError, match="rotation.npy"):
        kit.make(**options).load(tmp_path)
    # back to no transform: the rotation file is not left behind
    plain = kit.make(**{**options, "residual_transform": "none"})
    plain.add(kit.records(texts[:100]))
    plain.save(tmp_path)
    assert not (tmp_path / "rotation.npy").exists()


def test_served_index_of_format_2_opens_without_a_transform(tmp_path):
    """A server directory written before the residual transform (plan.json without
    residual_transform, buckets.json without transform) opens as an index without one."""
    from memcore_colbert import ColbertIndexConfig
    from memcore_colbert.served import ServedIndex
    from memcore.testing import make_texts

    config = ColbertIndexConfig(embedder={"kind": "token_hashing", "dim": 32}, train_min_tokens=100, ncentroids=16, residual_transform="none")
    served = ServedIndex("ws_kb_t", config)
    texts = make_texts(200, seed=13)
    served.add([(f"p{i}", t) for i, t in enumerate(texts)], {})
    served.save(tmp_path)
    before = served.search(texts[9], 3)
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["config"].pop("residual_transform")
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "format_version": 2}))
    meta = json.loads((tmp_path / "metadata.json").read_text())
    (tmp_path / "metadata.json").write_text(json.dumps({**meta, "format_version": 2}))
    buckets = json.loads((tmp_path / "buckets.json").read_text())
    (tmp_path / "buckets.json").write_text(json.dumps({k: v for k, v in buckets.items() if k != "transform"}))
    opened = ServedIndex.open("ws_kb_t", tmp_path)
    assert opened.config.residual_transform == "none" and opened.engine.codec.transform == "none"
    assert opened.search(texts[9], 3) == before


@pytest.mark.parametrize("nbits", [1, 2])
def test_pca_vq_codebooks_beat_the_scalar_grid_in_the_same_layout(nbits):
    x = correlated(8000, 32, 4)
    centroids = np.zeros((1, 32), dtype=np.float32)
    train, test = x[:5000], x[5000:]
    pca = TransformCodec.train(train, centroids, nbits)
    vq = VQTransformCodec.train(train, centroids, nbits)
    # same rotation, widths and bytes: only the byte -> codeword tables differ
    np.testing.assert_array_equal(vq.widths, pca.widths)
    np.testing.assert_allclose(vq.rotation, pca.rotation)
    assert vq.bytes_per_token == pca.bytes_per_token == 32 * nbits // 8
    assert vq.codebooks.shape[:2] == (vq.bytes_per_token, 256)

    def error(codec, data):
        codes, packed = codec.compress(data, centroids)
        assert packed.shape == (len(data), codec.bytes_per_token) and packed.dtype == np.uint8
        rotated = codec._rotated(codes, packed, codec.scoring_centroids(centroids))  # before normalisation
        return float(np.mean(np.sum((rotated - data @ codec.rotation) ** 2, axis=1)))

    # Lloyd from the product grid never does worse on the training data, and it generalises
    assert error(vq, train) < error(pca, train)
    assert error(vq, test) < error(pca, test)
    # each byte decodes to the codeword its value names (the nearest one to the component values)
    codes, packed = vq.compress(test[:40], centroids)
    z = test[:40] @ vq.rotation
    for p, (c0, c1, bits) in enumerate(vq.byte_layout()):
        if not bits:
            continue
        book = vq.codebooks[p, : 1 << bits, : c1 - c0]
        assert packed[:, p].max() < (1 << bits)
        nearest = np.argmin(((z[:, None, c0:c1] - book[None]) ** 2).sum(axis=2), axis=1)
        np.testing.assert_array_equal(packed[:, p], nearest)
    decoded = vq.decompress_scoring(codes, packed, centroids)
    np.testing.assert_allclose(np.linalg.norm(decoded, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(decoded @ vq.rotate_query(test[:5]).T, vq.decompress(codes, packed, centroids) @ test[:5].T, atol=1e-5)
    again = VQTransformCodec.from_json(json.loads(json.dumps(vq.to_json())), vq.rotation, vq.codebooks)
    assert again.transform == "pca-vq"
    np.testing.assert_array_equal(again.decompress(codes, packed, centroids), vq.decompress(codes, packed, centroids))
    with pytest.raises(ValueError, match="codebooks of shape"):
        VQTransformCodec.from_json(vq.to_json(), vq.rotation, vq.codebooks[:, :, :1] if vq.codebooks.shape[2] > 1 else vq.codebooks[1:])
    with pytest.raises(ValueError, match="needs its codebooks"):
        VQTransformCodec.from_json(vq.to_json(), vq.rotation)


def test_pca_vq_is_the_default_and_reopens(kit, tmp_path):
    index = kit.make(train_min_tokens=200, exhaustive_below=0, ncentroids=64, nbits=2)
    assert index.config.residual_transform == "pca-vq"
    texts = kit.texts(600, seed=3)
    index.add(kit.records(texts))
    assert isinstance(index.engine.codec, VQTransformCodec)
    stats = index.stats()
    assert stats["residual_transform"] == "pca-vq"
    assert (
        stats["stored_bytes"]
        == index.engine.codes.nbytes + index.engine.residuals.nbytes + index.engine.centroids.nbytes + 32 * 32 * 4 + index.engine.codec.codebooks.nbytes
    )
    index.save(tmp_path)
    assert json.loads((tmp_path / "metadata.json").read_text())["format_version"] == 4
    books = np.load(tmp_path / "codebooks.npy", allow_pickle=False)
    np.testing.assert_array_equal(books, index.engine.codec.codebooks)
    fresh = kit.make(train_min_tokens=200, exhaustive_below=0, ncentroids=64, nbits=2)
    fresh.load(tmp_path)
    q = kit.query(texts[42])
    assert [(h.id, round(h.score, 6)) for h in fresh.search(q, 5)] == [(h.id, round(h.score, 6)) for h in index.search(q, 5)]
    assert fresh.search(q, 1)[0].id == "r42"
    # a missing codebook file is a CorruptError; back to pca the file is not left behind
    (tmp_path / "codebooks.npy").unlink()
    with pytest.raises(CorruptError, match="codebooks.npy"):
        kit.make(train_min_tokens=200, ncentroids=64).load(tmp_path)
    pca = kit.make(train_min_tokens=200, exhaustive_below=0, ncentroids=64, residual_transform="pca")
    pca.add(kit.records(texts[:300]))
    pca.save(tmp_path)
    assert not (tmp_path / "codebooks.npy").exists() and (tmp_path / "rotation.npy").exists()
    # a pca-vq codec named by a format-3 directory (which could not hold one) is refused
    index.save(tmp_path)
    for name in ("plan.json", "metadata.json"):
        data = json.loads((tmp_path / name).read_text())
        (tmp_path / name).write_text(json.dumps({**data, "format_version": 3}))
    with pytest.raises(CorruptError, match="pca-vq"):
        kit.make(train_min_tokens=200, ncentroids=64).load(tmp_path)
