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

from memcore import get_logger

from .codec import ResidualCodec
from .config import ColbertIndexConfig

__all__ = ["default_ncentroids", "train"]

log = get_logger("memcore.colbert")


def default_ncentroids(n_tokens: int, config: ColbertIndexConfig) -> int:
    """Centroids for ``n_tokens`` token vectors under ``config``."""
    if config.ncentroids is not None:
        wanted = config.ncentroids
    else:
        wanted = min(2 ** int(math.floor(math.log2(16 * math.sqrt(max(n_tokens, 1))))), config.max_centroids)
    return max(2, min(wanted, n_tokens // 2))


def train(tokens: np.ndarray, config: ColbertIndexConfig, name: str) -> tuple[np.ndarray, ResidualCodec]:
    """Centroids ``(C, dim)`` (unit rows) and the residual codec, from token vectors ``tokens``."""
    import faiss

    started = time.perf_counter()
    n, dim = tokens.shape
    rng = np.random.default_rng(config.seed)
    ncentroids = default_ncentroids(n, config)
    sample_size = min(n, ncentroids * config.kmeans_points_per_centroid)
    sample = tokens[np.sort(rng.choice(n, size=sample_size, replace=False))] if sample_size < n else tokens
    heldout_size = min(50_000, max(1, int(0.05 * len(sample))))
    order = rng.permutation(len(sample))
    heldout, fit = sample[order[:heldout_size]], sample[order[heldout_size:]]
    if len(fit) < ncentroids:
        fit = sample
    kmeans = faiss.Kmeans(
        dim,
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
    codec = ResidualCodec.train(heldout, centroids, config.nbits, config.buckets)
    log.info(
        "colbert.trained",
        name=name,
        tokens=n,
        centroids=ncentroids,
        sample=len(fit),
        heldout=len(heldout),
        nbits=config.nbits,
        buckets=config.buckets,
        avg_residual=round(codec.avg_residual, 5),
        seconds=round(time.perf_counter() - started, 3),
    )
    return centroids, codec
