"""Safety pieces of the SQLite store: the writer lock, the store-boundary error guard,
and the checks that a collection directory is what it claims to be.

- :class:`WriterLock` is an exclusive ``flock`` on the collection *directory* inode: it
  cannot be bypassed by deleting a file (``writer.lock`` only tells who holds it);
- :func:`guard_methods` wraps every public store method so that SQLite failures
  (``DatabaseError``, "attempt to write a readonly database", undecodable UTF-8,
  malformed JSON or numbers) surface as :class:`CorruptError` naming the file;
- :func:`check_store_file` refuses a missing or empty database in a directory that
  holds index folders: that is a damaged collection, not a new one.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..errors import CorruptError, FilterError, LockedError, MemcoreError

__all__ = ["WriterLock", "guard_methods", "check_store_file", "LOCK_NOTE"]

LOCK_NOTE = "writer.lock"
"""File that names the writer's pid (informative only: the lock is on the directory)."""

T = TypeVar("T")


class WriterLock:
    """An exclusive, non-blocking ``flock`` on the collection directory itself.

    Deleting ``writer.lock`` (or any file) does not release it; the kernel drops it when
    the holder closes it or dies, so a crashed writer never leaves a stale lock.
    """

    def __init__(self, directory: Path):
        self.directory = directory
        self.fd: int | None = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            holder = ""
            try:
                holder = f" (pid {(directory / LOCK_NOTE).read_text().strip()})"
            except OSError:
                pass
            raise LockedError(
                f"collection at {directory} is open for writing by another process{holder}; open it read-only or close the other writer"
            ) from None
        try:
            (directory / LOCK_NOTE).write_text(str(os.getpid()))
        except OSError:
            pass  # informative only

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _typed(file: Path, exc: BaseException) -> MemcoreError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError):
        low = text.lower()
        if "database is locked" in low or "database is busy" in low:
            return LockedError(f"{file}: {text}; another connection holds it, retry later")
        if "too large" in low or "too many" in low or "stack overflow" in low:
            return FilterError(f"the filter is too large for SQLite ({text}); split it")
    return CorruptError(f"{file}: {type(exc).__name__}: {text} (check it with `memcore info --check`)")


def guard_methods(cls: type[T], skip: frozenset[str] = frozenset({"close", "size_bytes"})) -> type[T]:
    """Wrap each public method of ``cls`` so raw SQLite and decoding failures become typed errors."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except MemcoreError:
                raise
            except (sqlite3.DatabaseError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise _typed(self.file, exc) from exc
            except (ValueError, KeyError, IndexError) as exc:  # malformed numbers / rows in the file
                raise CorruptError(f"{self.file}: unreadable stored value ({type(exc).__name__}: {exc})") from exc

        return guarded

    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_") and name not in skip:
            setattr(cls, name, wrap(value))
    return cls


def check_store_file(directory: Path, file: Path) -> None:
    """A missing or empty database beside index folders is damage, never a fresh start.

    memcore does not delete files it cannot account for: the caller must restore the
    database (or move the directory away) before a new collection is created there.
    """
    if file.is_file() and file.stat().st_size > 0:
        return
    indexes = directory / "indexes"
    leftovers = sorted(p.name for p in indexes.iterdir()) if indexes.is_dir() else []
    wal = [p.name for p in (file.with_name(file.name + "-wal"),) if p.exists() and p.stat().st_size > 0]
    if leftovers or wal:
        state = "is empty" if file.is_file() else "is missing"
        raise CorruptError(
            f"{file} {state} but {directory} holds {'index folders ' + str(leftovers[:5]) if leftovers else ''}"
            f"{' and ' if leftovers and wal else ''}{'a write-ahead log ' + str(wal) if wal else ''}: the store was "
            "deleted or truncated. Restore it from a backup, or move the directory away to start a new collection; "
            "memcore deletes nothing it cannot account for"
        )
