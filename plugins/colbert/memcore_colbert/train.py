"""Training an index's centroids (faiss k-means) and residual codec, as ColBERTv2 does.

- number of centroids: ``2**floor(log2(16 * sqrt(tokens)))`` unless configured, capped by
  ``max_centroids`` and by the number of training vectors;
- 5 % of the sampled vectors (at most 50,000) are held out to train the codec;
- k-means on the rest (``kmeans_points_per_centroid`` vectors per centroid at most,
  ``kmeans_niters`` iterations, spherical: centroids L2-normalised).
"""

from __future__ import annotations

import math
import time

import numpy as np

from memcore.plugin import get_logger

from .codec import ResidualCodec
from .config import ColbertIndexConfig
from .transform import TransformCodec
from .vq import VQTransformCodec

__all__ = ["default_ncentroids", "sample_for_training", "kmeans_centroids", "train_codec", "train"]

log = get_logger("memcore.colbert")


def default_ncentroids(n_tokens: int, config: ColbertIndexConfig) -> int:
    """Centroids for ``n_tokens`` token vectors under ``config``."""
    if config.ncentroids is not None:
        wanted = config.ncentroids
    else:
        wanted = min(2 ** int(math.floor(math.log2(16 * math.sqrt(max(n_tokens, 1))))), config.max_centroids)
    return max(2, min(wanted, n_tokens // 2))


def sample_for_training(tokens: np.ndarray, config: ColbertIndexConfig) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(ncentroids, sample, heldout, fit)``: the vectors k-means and the codec are trained on."""
    n = len(tokens)
    rng = np.random.default_rng(config.seed)
    ncentroids = default_ncentroids(n, config)
    sample_size = min(n, ncentroids * config.kmeans_points_per_centroid)
    sample = tokens[np.sort(rng.choice(n, size=sample_size, replace=False))] if sample_size < n else tokens
    heldout_size = min(50_000, max(1, int(0.05 * len(sample))))
    order = rng.permutation(len(sample))
    heldout, fit = sample[order[:heldout_size]], sample[order[heldout_size:]]
    if len(fit) < ncentroids:
        fit = sample
    return ncentroids, sample, heldout, fit


def kmeans_centroids(fit: np.ndarray, ncentroids: int, config: ColbertIndexConfig) -> np.ndarray:
    """Unit-length centroids ``(ncentroids, dim)``: faiss spherical k-means on ``fit``."""
    import faiss

    kmeans = faiss.Kmeans(
        fit.shape[1],
        ncentroids,
        niter=config.kmeans_niters,
        seed=config.seed,
        spherical=True,
        gpu=False,
        verbose=False,
        max_points_per_centroid=config.kmeans_points_per_centroid,
        min_points_per_centroid=1,
    )
    kmeans.train(np.ascontiguousarray(fit, dtype=np.float32))
    centroids = np.ascontiguousarray(kmeans.centroids, dtype=np.float32)
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    return centroids


def train_codec(sample: np.ndarray, heldout: np.ndarray, centroids: np.ndarray, config: ColbertIndexConfig) -> ResidualCodec | TransformCodec:
    """The residual codec of ``config`` (``residual_transform``, ``nbits``, ``buckets``), trained on the held-out vectors."""
    if config.residual_transform in ("pca", "pca-vq"):
        # a rotation needs many more vectors than dimensions: small indexes fit it on the whole sample
        data = heldout if len(heldout) >= 8 * sample.shape[1] else sample[:50_000]
        kind = VQTransformCodec if config.residual_transform == "pca-vq" else TransformCodec
        return kind.train(data, centroids, config.nbits)
    return ResidualCodec.train(heldout, centroids, config.nbits, config.buckets)


def train(tokens: np.ndarray, config: ColbertIndexConfig, name: str) -> tuple[np.ndarray, ResidualCodec | TransformCodec]:
    """Centroids ``(C, dim)`` (unit rows) and the residual codec, from token vectors ``tokens``."""
    started = time.perf_counter()
    ncentroids, sample, heldout, fit = sample_for_training(tokens, config)
    centroids = kmeans_centroids(fit, ncentroids, config)
    codec = train_codec(sample, heldout, centroids, config)
    log.info(
        "colbert.trained",
        name=name,
        tokens=len(tokens),
        centroids=ncentroids,
        sample=len(fit),
        heldout=len(heldout),
        nbits=config.nbits,
        buckets=config.buckets,
        transform=config.residual_transform,
        avg_residual=round(codec.avg_residual, 5),
        seconds=round(time.perf_counter() - started, 3),
    )
    return centroids, codec
