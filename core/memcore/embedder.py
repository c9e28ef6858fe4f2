"""The Embedder interface: text -> vectors of one embedding space."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

__all__ = ["Embedder"]


class Embedder(ABC):
    """Turns texts into float32 vectors of a fixed dimension.

    ``model_id`` identifies the model so the manifest can pin it: changing the model of a
    space means rebuilding the indexes that use it.
    """

    dim: int
    model_id: str = ""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to store, shape ``(len(texts), dim)``, float32."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for query texts (same as documents unless the model is asymmetric)."""
        return self.embed_documents(texts)
