"""Progress of long operations (populating or rebuilding an index), reported to whoever listens.

The core never draws anything: an operation asks :func:`progress_for` for an ``update(n)``
callable, which does nothing unless a reporter was installed with :func:`use_progress`
(the CLI installs one that draws a progress bar on stderr).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, ContextManager, Iterator

__all__ = ["ProgressFactory", "use_progress", "progress_for"]

ProgressFactory = Callable[[str, int], ContextManager[Callable[[int], None]]]
"""``factory(label, total)`` -> a context manager yielding ``update(done_now)``."""

_reporter: ContextVar[ProgressFactory | None] = ContextVar("memcore_progress", default=None)


@contextlib.contextmanager
def use_progress(factory: ProgressFactory | None) -> Iterator[None]:
    """Report the progress of operations run inside this block through ``factory``."""
    token = _reporter.set(factory)
    try:
        yield
    finally:
        _reporter.reset(token)


@contextlib.contextmanager
def progress_for(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """An ``update(n)`` callable for an operation over ``total`` items (a no-op without a reporter)."""
    factory = _reporter.get()
    if factory is None or total <= 0:
        yield lambda n: None
        return
    with factory(label, total) as update:
        yield update
