"""The ``token_hashing`` embedder: deterministic per-word token vectors, no model.

Each lowercase word becomes a fixed pseudo-random unit vector seeded by a hash of the
word, so MaxSim late interaction over it is exact lexical matching (a query word scores 1
against the same word in a passage, about 0 otherwise). NOT semantic: it exists for tests,
demos and machines without a model; use ``minilm`` (memcore[embed]) for real retrieval.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
from pydantic import Field

from memcore.plugin import ComponentConfig, Embedder, ValidationError, tokenize, unit_token_rows

__all__ = ["TokenHashingConfig", "TokenHashingEmbedder"]


class TokenHashingConfig(ComponentConfig):
    """Settings of the ``token_hashing`` embedder."""

    kind: str = "token_hashing"
    dim: int = Field(64, ge=8, le=4096, description="Dimension of every token vector (a multiple of 8 suits every nbits).")


class TokenHashingEmbedder(Embedder):
    """One seeded random unit vector per word; documents and queries alike."""

    def __init__(self, config: TokenHashingConfig | None = None):
        self.config = config or TokenHashingConfig()
        self.dim = self.config.dim
        self.model_id = f"token-hashing-v1-{self.dim}"  # pinned with the vectors: unchanged by the kind's rename to token_hashing
        self._cache: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vector = self._cache.get(word)
        if vector is None:
            seed = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            vector /= np.linalg.norm(vector)
            if len(self._cache) < 100_000:
                self._cache[word] = vector
        return vector

    def _tokens(self, texts: Sequence[str], max_length: int | None) -> list[np.ndarray]:
        if isinstance(texts, str):
            raise ValidationError("texts must be a sequence of strings, not a single string")
        out = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(f"text {i} is a {type(text).__name__}, not a string")
            words = tokenize(text)[:max_length] or [""]
            out.append(np.stack([self._word(w) for w in words]))
        return unit_token_rows(out)

    def embed_document_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """One unit row per word (at most ``max_length``); a text without words gets one row."""
        return self._tokens(texts, max_length)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The normalised mean of a text's token vectors (so it also works as a plain embedder)."""
        rows = [t.mean(axis=0) for t in self._tokens(texts, None)]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return unit_token_rows([np.stack(rows)])[0]
