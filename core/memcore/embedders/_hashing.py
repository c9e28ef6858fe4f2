"""Builtin ``hashing`` embedder: deterministic feature hashing of words and word pairs.

NOT semantic: "car" and "automobile" share nothing. It exists so the core runs and tests
without a model; use the ``minilm`` embedder (``memcore[embed]``) for real retrieval.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
from pydantic import Field

from ._embedder import Embedder
from .._plugins._registry import ComponentConfig
from ..model._text import tokenize


class HashingEmbedderConfig(ComponentConfig):
    """Settings of the ``hashing`` embedder."""

    kind: str = "hashing"
    dim: int = Field(256, ge=8, le=65536, description="Vector dimension (number of hash buckets).")
    bigrams: bool = Field(True, description="Also hash adjacent word pairs.")


class HashingEmbedder(Embedder):
    """Signed feature hashing of lowercase word unigrams (+ bigrams), L2-normalised."""

    def __init__(self, config: HashingEmbedderConfig | None = None):
        self.config = config or HashingEmbedderConfig()
        self.dim = self.config.dim
        self.model_id = f"hashing-v1-{self.dim}{'-bigrams' if self.config.bigrams else ''}"
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            hit = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._cache) < 200_000:
                self._cache[token] = hit
        return hit

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Hash each text into a unit vector (all-zero texts stay zero)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = tokenize(text)
            features = words + ([f"{a} {b}" for a, b in zip(words, words[1:])] if self.config.bigrams else [])
            for feature in features:
                col, sign = self._bucket(feature)
                out[row, col] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
