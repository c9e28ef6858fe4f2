"""A readers-writer lock: many readers at once, one writer alone, writers not starved.

The server takes one per index: searches hold it shared (numpy / torch release the GIL
in their kernels, so concurrent searches run in parallel), changes of the index hold it
exclusively. A waiting writer blocks new readers, so a stream of searches cannot delay an
add forever.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["RWLock"]


class RWLock:
    """Shared (``read``) / exclusive (``write``) lock; not re-entrant."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock shared with other readers."""
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the lock alone (waits for the readers inside to leave)."""
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()

    @property
    def readers(self) -> int:
        """Readers inside now (for tests and stats)."""
        with self._cond:
            return self._readers

    @property
    def writers_waiting(self) -> int:
        """Writers waiting for the readers to leave (for tests and stats)."""
        with self._cond:
            return self._writers_waiting
