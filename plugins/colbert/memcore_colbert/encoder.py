"""The token encoder of a colbert index: an embedder built by kind through the registry.

The index never imports the plugin that provides its embedder: settings name the kind
(``embedder = {kind = "minilm"}``) and :func:`memcore.plugin.build_embedder` builds it. Any
embedder implementing :meth:`memcore.plugin.Embedder.embed_document_tokens` works, including a
real ColBERT checkpoint wrapped as an embedder (see docs/plugins/colbert.md).
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np

from memcore.plugin import ConfigError, DimensionError, Embedder, ValidationError, build_embedder

__all__ = ["TokenEncoder"]

_ENCODE_LOCK = threading.Lock()
"""Serialises calls into token embedders: the Embedder interface does not promise thread
safety (a Hugging Face fast tokenizer shared by threads can fail with "Already borrowed"),
and the server runs searches and adds in parallel. Documents go through in batches of
:data:`DOC_BATCH`, so a long add lets query encodings in between."""

DOC_BATCH = 32


class TokenEncoder:
    """Documents and queries -> lists of unit token matrices, with the index's max lengths."""

    def __init__(self, spec: Mapping[str, Any], doc_maxlen: int, query_maxlen: int, location: str, embedder: Embedder | None = None):
        """``embedder``: one already built from ``spec`` (the server shares one per spec), else built here."""
        self.embedder: Embedder = embedder if embedder is not None else build_embedder(dict(spec), location=location)
        if not self.embedder.supports_tokens:
            raise ConfigError(
                f"embedder {spec.get('kind')!r} gives no token vectors (it does not implement embed_document_tokens); "
                "use 'minilm' (memcore[embed]), 'token_hashing' or another token embedder",
                location=location,
            )
        self.dim = int(self.embedder.dim)
        self.model_id = str(self.embedder.model_id or spec.get("kind"))
        self.doc_maxlen = doc_maxlen
        self.query_maxlen = query_maxlen

    def _check(self, out: Sequence[np.ndarray], n: int, what: str) -> list[np.ndarray]:
        if len(out) != n:
            raise DimensionError(f"token embedder {self.model_id!r} returned {len(out)} matrices for {n} {what}")
        checked = []
        for m in out:
            m = np.asarray(m, dtype=np.float32)
            if m.ndim != 2 or m.shape[1] != self.dim or m.shape[0] == 0:
                raise DimensionError(f"token embedder {self.model_id!r} returned a token matrix of shape {m.shape}, expected (n >= 1, {self.dim})")
            if not np.isfinite(m).all():
                raise ValidationError(f"token embedder {self.model_id!r} returned NaN or infinite values")
            checked.append(m)
        return checked

    def documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token matrices of passages (at most ``doc_maxlen`` rows each)."""
        if not texts:
            return []
        out: list[np.ndarray] = []
        for start in range(0, len(texts), DOC_BATCH):
            batch = list(texts[start : start + DOC_BATCH])
            with _ENCODE_LOCK:
                matrices = self.embedder.embed_document_tokens(batch, max_length=self.doc_maxlen)
            out += self._check(matrices, len(batch), "passages")
        return out

    def queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token matrices of queries (at most ``query_maxlen`` rows each)."""
        if not texts:
            return []
        with _ENCODE_LOCK:
            matrices = self.embedder.embed_query_tokens(list(texts), max_length=self.query_maxlen)
        return self._check(matrices, len(texts), "queries")
