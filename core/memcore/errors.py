"""The one exception tree of memcore.

Every error memcore raises on purpose is a :class:`MemcoreError`. The subclasses say
what kind of thing went wrong so callers can catch precisely; the messages say what to
do next.
"""

from __future__ import annotations

__all__ = [
    "MemcoreError",
    "ConfigError",
    "UnknownComponentError",
    "PluginError",
    "NotFoundError",
    "ValidationError",
    "DimensionError",
    "DuplicateIdError",
    "FilterError",
    "ScopeError",
    "LockedError",
    "CorruptError",
    "IndexUpdateError",
    "BrokenIndexError",
    "EndpointError",
    "StoreError",
    "StoreUnavailableError",
    "StorageFullError",
    "AuthenticationError",
    "PermissionDeniedError",
]


class MemcoreError(Exception):
    """Base class of every error memcore raises on purpose."""


class ConfigError(MemcoreError, ValueError):
    """Settings or a component's configuration are invalid.

    ``location`` is the dotted path of the offending key (e.g. ``indexes.dense.metric``)
    when it is known.
    """

    def __init__(self, message: str, location: str | None = None):
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class UnknownComponentError(ConfigError):
    """A settings entry names a component (index, stage, ...) that no plugin registers."""

    def __init__(
        self,
        category: str,
        name: str,
        installed: list[str],
        closest: str | None = None,
        extra: str | None = None,
        location: str | None = None,
        failed: str | None = None,
        *,
        singular: str | None = None,
        hint: str | None = None,
    ):
        self.category = category
        self.name = name
        self.installed = installed
        self.closest = closest
        self.extra = extra
        parts = [f"unknown {singular or category} kind {name!r}."]
        parts.append(f"Installed: {', '.join(installed) if installed else '(none)'}.")
        if closest:
            parts.append(f"Did you mean {closest!r}?")
        if failed:
            parts.append(failed[0].upper() + failed[1:] + ".")
        if hint:
            parts.append("It is provided by: " + hint)
        self.failed = failed
        super().__init__(" ".join(parts), location=location)


class PluginError(MemcoreError):
    """A plugin failed to load or registered something invalid."""


class NotFoundError(MemcoreError, KeyError):
    """A record, index or collection that was asked for does not exist."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class ValidationError(MemcoreError, ValueError):
    """Input data is invalid (empty text, NaN vectors, k <= 0, ...). Nothing was changed."""


class DimensionError(ValidationError):
    """A vector has the wrong dimension for its embedding space or index."""


class DuplicateIdError(ValidationError):
    """Two different records share an id (in one batch, or with a stored record on insert)."""


class FilterError(ValidationError):
    """A metadata filter (``where``) is malformed or uses an unknown operator."""


class ScopeError(ValidationError):
    """A call asked for records or a scope outside the scope it is bound to (another
    tenant's). Nothing was read or changed."""


class LockedError(MemcoreError):
    """Another process holds the writer lock of this collection."""


class CorruptError(MemcoreError):
    """Stored data failed a consistency check (checksum, format version, schema)."""


class IndexUpdateError(MemcoreError):
    """An index failed to apply a change that the store has already committed.

    The data is safe in the store; the index is marked stale and rebuilt from the store
    on its next use.
    """


class BrokenIndexError(CorruptError):
    """An index could not be built, loaded or rebuilt (a bad stored definition, a missing
    plugin, damaged data). The store and every other index open normally; this index is
    reported by ``Collection.list_indexes``/``memcore info`` and can be rebuilt
    (``memcore index rebuild NAME``) or dropped (``memcore index drop NAME``)."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        super().__init__(
            f"index {name!r} is broken and cannot be searched: {reason}. The records are safe in the store; "
            f"rebuild it (memcore index rebuild {name} / Collection.rebuild_index) or drop it (memcore index drop {name})"
        )


class EndpointError(MemcoreError):
    """An OpenAI-compatible HTTP endpoint (embeddings or chat) failed.

    Raised after the retries are used up (HTTP 429 / 5xx, timeouts, refused or reset
    connections) or at once for a status that retrying cannot fix (400, 401, 403, 404, ...).
    A reply that arrives but is malformed is a :class:`ValidationError` instead. Raised by
    :class:`memcore.JsonHttpClient` (memcore-embed's ``openai`` embedder, memcore-llm's chat client).
    memcore-embed still exports it as ``EmbeddingServiceError``, its former name.

    Attributes: ``url``, ``status`` (the last HTTP status, ``None`` for a network error
    or timeout) and ``attempts`` (requests sent).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None, attempts: int = 1):
        self.url = url
        self.status = status
        self.attempts = attempts
        super().__init__(message)


class StoreError(MemcoreError):
    """The store failed for a reason outside the data: its server, its disk, its connection.

    Nothing is half-written: a batch that raises this was not acknowledged and is not stored.
    """


class StoreUnavailableError(StoreError):
    """The store cannot be reached (a database server refused the connection, dropped it
    mid-call or rejected the credentials) after the retries that are safe were used up."""


class StorageFullError(StoreError, OSError):
    """The disk (or quota) under the memory is full. Nothing acknowledged was lost; free
    space and retry. ``path`` names the file or directory that could not be written."""

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(message)


class AuthenticationError(MemcoreError):
    """A server refused the call: no API key, or an unknown one (HTTP 401)."""


class PermissionDeniedError(MemcoreError):
    """A server refused the call: the API key is valid but the call is outside the key's
    scope or needs an admin key (HTTP 403)."""
