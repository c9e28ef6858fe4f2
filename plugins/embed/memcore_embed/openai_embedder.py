"""The ``openai`` embedder: any OpenAI-compatible ``POST {base_url}/embeddings``.

Works with api.openai.com and with local servers speaking the same protocol (llama.cpp
server, vLLM, Ollama's /v1, text-embeddings-inference, LM Studio, ...). The dimension is
declared in settings (``dim``), so nothing is requested before the first embed; every
reply is checked against it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from memcore.plugin import ComponentConfig, DimensionError, Embedder, EndpointConfig, JsonHttpClient, RequestStats, ValidationError
from pydantic import Field

from .texts import check_texts

__all__ = ["OpenAIEmbedderConfig", "OpenAIEmbedder", "parse_embeddings"]


class OpenAIEmbedderConfig(ComponentConfig, EndpointConfig):
    """Settings of the ``openai`` embedder (plus the endpoint fields of :class:`EndpointConfig`)."""

    kind: str = "openai"
    model: str = Field(..., min_length=1, description='Model name sent to the server, e.g. "text-embedding-3-small".')
    dim: int = Field(..., ge=1, le=65536, description="The model's output dimension; every reply is checked against it.")
    batch_size: int = Field(64, ge=1, le=2048, description="Texts per request.")
    send_dimensions: bool = Field(False, description='Send "dimensions": dim (OpenAI text-embedding-3 models can shorten their vectors).')
    normalize: bool = Field(False, description="L2-normalise the returned vectors (OpenAI's already are; many local servers' are not).")


def parse_embeddings(body: Any, n: int, dim: int) -> np.ndarray:
    """The ``(n, dim)`` float32 matrix of an embeddings reply, rows in input order (``data[i].index``).

    Raises :class:`memcore.ValidationError` for a malformed reply and
    :class:`memcore.DimensionError` when the vectors do not have ``dim`` components.
    """
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValidationError(f"embeddings reply has no 'data' list: {str(body)[:200]!r}")
    if len(data) != n:
        raise ValidationError(f"embeddings reply has {len(data)} vectors for {n} inputs")
    if not all(isinstance(item, dict) and "embedding" in item for item in data):
        raise ValidationError("embeddings reply: every item of 'data' needs an 'embedding'")
    with_index = ["index" in item for item in data]
    if all(with_index):
        order = [item["index"] for item in data]
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in order) or sorted(order) != list(range(n)):
            raise ValidationError(f"embeddings reply: the 'index' fields {order[:20]} are not a permutation of 0..{n - 1}")
    elif not any(with_index):
        order = list(range(n))  # some servers omit index: the list order is the input order
    else:
        raise ValidationError("embeddings reply: some items have an 'index' and some do not")
    out = np.empty((n, dim), dtype=np.float32)
    for position, item in zip(order, data):
        values = item["embedding"]
        if not isinstance(values, list):
            raise ValidationError(f"embeddings reply: 'embedding' is a {type(values).__name__}, expected a list of floats (encoding_format=float)")
        if len(values) != dim:
            raise DimensionError(f"the embeddings endpoint returned {len(values)}-d vectors, settings declare dim={dim}")
        try:
            out[position] = np.asarray(values, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValidationError("embeddings reply: an 'embedding' holds non-numeric values") from None
    if not np.isfinite(out).all():
        raise ValidationError("embeddings reply holds NaN or infinite values")
    return out


class OpenAIEmbedder(Embedder):
    """Vectors from an OpenAI-compatible embeddings endpoint, requested in batches."""

    def __init__(self, config: OpenAIEmbedderConfig):
        self.config = config
        self.dim = config.dim
        self.model_id = config.model
        self._http = JsonHttpClient(config)

    @property
    def stats(self) -> RequestStats:
        """Requests, retries and retry delays of this embedder."""
        return self._http.stats

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, shape ``(len(texts), dim)``, float32, in input order."""
        items = check_texts(texts, allow_empty_strings=False)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        size = self.config.batch_size
        for start in range(0, len(items), size):
            batch = items[start : start + size]
            payload: dict[str, Any] = {"model": self.config.model, "input": batch, "encoding_format": "float"}
            if self.config.send_dimensions:
                payload["dimensions"] = self.dim
            out[start : start + len(batch)] = parse_embeddings(self._http.post("embeddings", payload), len(batch), self.dim)
        if self.config.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out
