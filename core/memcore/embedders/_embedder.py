"""The Embedder interface: text -> vectors of one embedding space.

Besides one vector per text, an embedder may offer per-token vectors (late interaction,
the ``colbert`` index): :meth:`Embedder.embed_document_tokens` and
:meth:`Embedder.embed_query_tokens`. They are optional; :attr:`Embedder.supports_tokens`
says whether an embedder implements them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Embedder", "build_embedder", "unit_token_rows"]


class Embedder(ABC):
    """Turns texts into float32 vectors of a fixed dimension.

    ``model_id`` identifies the model so the manifest can pin it: changing the model of a
    space means rebuilding the indexes that use it.

    Token vectors (optional): an embedder that can return one vector per token overrides
    :meth:`embed_document_tokens` (and :meth:`embed_query_tokens` when queries are encoded
    differently, as ColBERT's ``[Q]`` marker and mask padding do). Late-interaction
    indexes build such an embedder themselves (by kind, through the registry) and keep the
    token vectors inside the index: they never go into a collection's spaces.
    """

    dim: int
    model_id: str = ""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to store, shape ``(len(texts), dim)``, float32."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for query texts (same as documents unless the model is asymmetric)."""
        return self.embed_documents(texts)

    # -- token vectors (optional) ---------------------------------------------------------

    @property
    def supports_tokens(self) -> bool:
        """Whether this embedder implements :meth:`embed_document_tokens`."""
        return type(self).embed_document_tokens is not Embedder.embed_document_tokens

    def embed_document_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """Per-token vectors of texts to store: one float32 array ``(n_tokens, dim)`` per text.

        Every row has unit L2 length (so a dot product is a cosine); at most ``max_length``
        rows per text (``None``: the model's own limit), the first tokens kept; never zero
        rows for a text the model accepts. :func:`unit_token_rows` does the normalising and
        truncating for implementers.

        The base class has no token vectors: it raises :class:`memcore.ConfigError`.
        """
        from ..errors import ConfigError

        raise ConfigError(
            f"embedder {type(self).__name__} ({self.model_id or 'no model id'}) gives no token vectors; "
            "late interaction needs an embedder implementing embed_document_tokens (e.g. 'minilm' of memcore[embed])"
        )

    def embed_query_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """Per-token vectors of query texts, as :meth:`embed_document_tokens` (the default)."""
        return self.embed_document_tokens(texts, max_length=max_length)


def unit_token_rows(matrices: Sequence[np.ndarray], max_length: int | None = None) -> list[np.ndarray]:
    """Token matrices cut to their first ``max_length`` rows, each row scaled to unit length
    (all-zero rows stay zero), as contiguous float32 arrays."""
    out = []
    for matrix in matrices:
        m = np.asarray(matrix, dtype=np.float32)
        if max_length is not None:
            m = m[:max_length]
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        out.append(np.ascontiguousarray(np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)))
    return out


def build_embedder(spec: str | Mapping[str, Any] | Any, *, location: str = "embedder") -> Embedder:
    """An embedder from a settings entry, through the registry of installed plugins.

    ``spec`` is a kind (``"minilm"``), a table with ``kind`` and the embedder's options
    (``{"kind": "minilm", "batch_size": 16}``) or an already-validated config model. Used by
    components that embed for themselves (a late-interaction index builds its token
    embedder this way), so they never import the plugin providing it. Unknown kinds raise
    :class:`memcore.UnknownComponentError`, bad options :class:`memcore.ConfigError` at
    ``location``.
    """
    from ..errors import ConfigError
    from .._plugins._host import get_registry

    kind: Any
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, Mapping):
        options = dict(spec)
        kind = options.pop("kind", None)
    else:
        kind, options = getattr(spec, "kind", None), spec
    if not isinstance(kind, str) or not kind:
        raise ConfigError("an embedder entry needs a 'kind' (a registered embedder name)", location=location)
    registration = get_registry().get("embedders", kind, location=f"{location}.kind")
    config = registration.parse_config(options, location)
    embedder = registration.factory(config)
    if not isinstance(embedder, Embedder):
        raise ConfigError(f"embedder {kind!r} built a {type(embedder).__name__}, not a memcore.Embedder", location=location)
    return embedder
