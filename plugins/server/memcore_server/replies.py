"""The server's error replies: what status, body and headers end a request that failed.

One function, :func:`error_reply`, for every exception a request can end with, used by the
FastAPI exception handlers (:mod:`.app`) and by the hot routes (:mod:`.hotpath`), so both
answer a failure alike: a memcore error by its status (:mod:`.wire`), a call over the time
limit 504, a body or batch over a size limit 413, anything else a bare 500 whose details go
to the log only (never a traceback to a client).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memcore import MemcoreError
from memcore.plugin import get_logger

from .calls import CallTimeout, Unexpected
from .limits import TooLarge
from .wire import INTERNAL_ERROR, REQUEST_TIMEOUT, REQUEST_TOO_LARGE, error_body, status_of

__all__ = ["error_reply", "validation_message", "Reply"]

log = get_logger("memcore.server")

Reply = tuple[int, dict[str, Any], dict[str, str] | None]
"""An error reply: its status, its JSON body and its extra headers (or None)."""

OWN_TYPES: dict[type[MemcoreError], tuple[int, str]] = {
    TooLarge: (413, REQUEST_TOO_LARGE),
    CallTimeout: (504, REQUEST_TIMEOUT),
    Unexpected: (500, INTERNAL_ERROR),
}
"""The server's own errors: their status and the error type the body names (not their class name)."""

UNEXPECTED = "the server failed unexpectedly; the details are in its log"


def error_reply(exc: BaseException, path: str) -> Reply:
    """The reply to a request to ``path`` that ended with ``exc`` (logged when it is a 5xx)."""
    if not isinstance(exc, MemcoreError):
        log.error("server.unexpected", path=path, type=type(exc).__name__, exc_info=exc)
        return 500, error_body(INTERNAL_ERROR, UNEXPECTED), None
    for cls in type(exc).__mro__:
        if cls in OWN_TYPES:
            status, kind = OWN_TYPES[cls]
            return status, error_body(kind, str(exc)), None
    status = status_of(exc)
    if status >= 500:
        log.warning("server.error", path=path, type=type(exc).__name__, message=str(exc))
    return status, error_body(type(exc).__name__, str(exc)), {"WWW-Authenticate": "Bearer"} if status == 401 else None


def validation_message(problems: Sequence[Mapping[str, Any]], prefix: tuple[str, ...] = ()) -> str:
    """The message of a 400 for a request pydantic refused: where and what of the first
    problem (its location under ``prefix``), and how many more there are."""
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(p) for p in (*prefix, *first.get("loc", ())))
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg')}{more}"
