"""PostgreSQL failures as memcore errors, and which of them are safe to retry.

- a connection that cannot be made, is refused, rejects the credentials or drops
  mid-call (SQLSTATE classes 08, 57P01-57P03, 28): :class:`~memcore.StoreUnavailableError`;
- a serialization failure or a deadlock (40001, 40P01), a lock that could not be taken
  (55P03) and an insert that lost the race for a new record's id to another writer's
  (23505 on ``records_id_key``): retried, then :class:`~memcore.LockedError`;
- a full disk (53100) or out of memory / too many connections (53xxx):
  :class:`~memcore.StorageFullError` / :class:`~memcore.StoreUnavailableError`;
- anything else from the server: :class:`~memcore.StoreError` (never a raw psycopg error).

The URL is never part of a message: psycopg's messages name the host and port at most,
and :func:`redact` removes any ``user:password@`` that would slip through.
"""

from __future__ import annotations

import re

import psycopg

from memcore.plugin import LockedError, MemcoreError, StorageFullError, StoreError, StoreUnavailableError

__all__ = ["translate", "retry_safe", "redact", "RETRY_STATES", "RACE_CONSTRAINTS"]

RETRY_STATES = frozenset({"40001", "40P01", "55P03"})
"""Serialization failure, deadlock, lock not available: the transaction rolled back, run it again."""

RACE_CONSTRAINTS = frozenset({"records_id_key"})
"""Unique constraints a batch violates only when another writer inserted the same key
after the batch read it (a new record's id): run it again, it finds the other's row."""

_CREDENTIALS = re.compile(r"(postgres(?:ql)?://)[^@\s/]*@", re.IGNORECASE)
_PASSWORD = re.compile(r"(password\s*=\s*)\S+", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` without credentials of a libpq URI or keyword string."""
    return _PASSWORD.sub(r"\1***", _CREDENTIALS.sub(r"\1***@", text))


def _message(exc: BaseException) -> str:
    return redact(" ".join(str(exc).split()) or type(exc).__name__)


def retry_safe(exc: BaseException) -> bool:
    """True when the transaction that raised ``exc`` was rolled back for a reason that a
    new attempt can overcome (a conflict with another writer, a dropped connection)."""
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        if state in RETRY_STATES or _lost_race(exc):
            return True
        return isinstance(exc, psycopg.OperationalError) and not state.startswith("28") and not state.startswith("53")
    return False


def _lost_race(exc: BaseException) -> bool:
    """A unique violation of one of :data:`RACE_CONSTRAINTS` (another writer's insert won)."""
    return isinstance(exc, psycopg.errors.UniqueViolation) and exc.diag.constraint_name in RACE_CONSTRAINTS


def translate(exc: BaseException, what: str) -> MemcoreError:
    """The memcore error for a psycopg failure while doing ``what``."""
    if isinstance(exc, MemcoreError):
        return exc
    message = f"PostgreSQL store: {what} failed: {_message(exc)}"
    state = getattr(exc, "sqlstate", None) or ""
    if state in RETRY_STATES or _lost_race(exc):
        return LockedError(f"{message}; another writer holds the rows, retry later")
    if state == "53100":
        return StorageFullError(f"{message}; free space on the database server and retry")
    if state.startswith("28"):
        return StoreUnavailableError(f"{message}; check the user and password of the store's url")
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) or state.startswith(("08", "57P", "53")):
        return StoreUnavailableError(f"{message}; is the database server running and reachable?")
    return StoreError(message)
