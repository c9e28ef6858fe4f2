"""The plugin's own error: an OpenAI-compatible endpoint that keeps failing."""

from __future__ import annotations

from memcore.plugin import MemcoreError

__all__ = ["EmbeddingServiceError"]


class EmbeddingServiceError(MemcoreError):
    """An OpenAI-compatible HTTP endpoint (embeddings or chat) failed.

    Raised after the retries are used up (HTTP 429 / 5xx, timeouts, refused or reset
    connections) or at once for a status that retrying cannot fix (400, 401, 403, 404, ...).
    A reply that arrives but is malformed is a :class:`memcore.ValidationError` instead.

    Attributes: ``url``, ``status`` (the last HTTP status, ``None`` for a network error
    or timeout) and ``attempts`` (requests sent).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None, attempts: int = 1):
        self.url = url
        self.status = status
        self.attempts = attempts
        super().__init__(message)
