"""What travels between the server and its clients besides records: errors and statuses.

One table maps every memcore error to an HTTP status (the most specific class wins), so the
server answers ``{"error": {"type": "<class name>", "message": ...}}`` and the client turns
that body back into the same exception class. Neither side imports FastAPI here.
"""

from __future__ import annotations

from typing import Any

import memcore
from memcore import (
    AuthenticationError,
    BrokenIndexError,
    ConfigError,
    CorruptError,
    DuplicateIdError,
    EndpointError,
    LockedError,
    MemcoreError,
    NotFoundError,
    PermissionDeniedError,
    StorageFullError,
    StoreUnavailableError,
    ValidationError,
)

__all__ = ["STATUS", "status_of", "error_body", "error_from_body", "REQUEST_TOO_LARGE", "REQUEST_TIMEOUT", "INTERNAL_ERROR"]

STATUS: dict[type[MemcoreError], int] = {
    ValidationError: 400,
    ConfigError: 400,
    AuthenticationError: 401,
    PermissionDeniedError: 403,
    NotFoundError: 404,
    DuplicateIdError: 409,
    LockedError: 423,
    CorruptError: 500,
    BrokenIndexError: 500,
    EndpointError: 502,
    StoreUnavailableError: 503,
    StorageFullError: 507,
}
"""memcore error class -> HTTP status; a class not listed takes its nearest listed base's (else 500)."""

REQUEST_TOO_LARGE = "RequestTooLarge"
"""The error type of a 413: the body, or the number of items in it, is over the server's limit."""
REQUEST_TIMEOUT = "RequestTimeout"
"""The error type of a 504: the call ran longer than ``request_timeout_s`` (it may still complete)."""
INTERNAL_ERROR = "InternalError"
"""The error type of an unexpected failure (500); the details stay in the server's log."""


def status_of(exc: MemcoreError) -> int:
    """The HTTP status of a memcore error (its class's, or its nearest base's)."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"type": kind, "message": message}}


def _memcore_class(name: str) -> type[MemcoreError] | None:
    if not name.isidentifier() or name.startswith("_"):
        return None
    value = vars(memcore).get(name)  # the face's own names only (no deprecated aliases resolved)
    return value if isinstance(value, type) and issubclass(value, MemcoreError) else None


def _rebuild(cls: type[MemcoreError], message: str) -> MemcoreError:
    """An instance of ``cls`` carrying the server's message (classes whose constructor takes
    more than a message get it as their only argument, their other attributes unset)."""
    try:
        return cls(message)
    except TypeError:
        error = cls.__new__(cls)
        Exception.__init__(error, message)
        return error


_BY_STATUS: dict[int, type[MemcoreError]] = {
    400: ValidationError,
    413: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: DuplicateIdError,
    423: LockedError,
    503: StoreUnavailableError,
}


def error_from_body(status: int, body: Any, url: str, attempts: int = 1) -> MemcoreError:
    """The memcore exception an error response stands for (the client raises it).

    A body naming a memcore error class gives that class (``NotFoundError`` -> NotFoundError);
    otherwise the status decides: 400/413 ValidationError, 401 AuthenticationError, 403
    PermissionDeniedError, 404 NotFoundError, 409 DuplicateIdError, 423 LockedError, 503
    StoreUnavailableError, anything else an :class:`memcore.EndpointError` carrying the
    status (an HTTP failure: a 504 timeout, a 500 without details, a proxy's 502).
    """
    error = body.get("error") if isinstance(body, dict) else None
    kind = str(error.get("type", "")) if isinstance(error, dict) else ""
    message = (str(error.get("message", "")) if isinstance(error, dict) else "") or f"HTTP {status} from {url}"
    cls = _memcore_class(kind)
    if cls is not None and cls is not EndpointError:
        return _rebuild(cls, message)
    if status in _BY_STATUS:
        return _BY_STATUS[status](message)
    return EndpointError(message, url=url, status=status, attempts=attempts)
