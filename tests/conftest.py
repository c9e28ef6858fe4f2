"""Fixtures shared by the core's test modules."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

import memcore

from memcore.embedders._embedder import HashingEmbedder, HashingEmbedderConfig, Space


def _two_spaces() -> dict[str, Space]:
    default = HashingEmbedder()
    small = HashingEmbedder(HashingEmbedderConfig(dim=64))
    return {"default": Space("default", default.dim, default, "hashing"), "small": Space("small", small.dim, small, "hashing")}


@pytest.fixture
def make_spaces() -> Callable[[], dict[str, Space]]:
    """A factory of the two hashing spaces most collection tests use: ``default`` (256
    dimensions) and ``small`` (64). (test_persistence.py keeps its own copy in the helper
    source it shares with the child processes it starts.)"""
    return _two_spaces


# -- AsyncMemory behind a synchronous face -----------------------------------------------


class SyncOverAsync:
    """A synchronous face over an AsyncMemory (for running Memory's tests against it)."""

    def __init__(self, settings: Any, **kwargs: Any):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.amemory: memcore.AsyncMemory = self._wait(memcore.open_async(settings, **kwargs)._open())

    def _wait(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.amemory, name)
        if inspect.iscoroutinefunction(attribute):
            return lambda *args, **kwargs: self._wait(attribute(*args, **kwargs))
        return attribute

    def __len__(self) -> int:
        return int(self._wait(self.amemory.count()))

    def close(self) -> None:
        try:
            self._wait(self.amemory.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


@pytest.fixture(params=["Memory", "AsyncMemory"])
def open_memory(request) -> Callable[..., Any]:
    """``open_memory(settings, **kw)``: a ``memcore.open`` memory, or the same memory as an
    ``AsyncMemory`` behind :class:`SyncOverAsync`, so one test module checks that both
    behave the same. Closed at teardown."""
    opened: list[Any] = []

    def open_(settings: Any, **kwargs: Any) -> Any:
        memory = memcore.open(settings, **kwargs) if request.param == "Memory" else SyncOverAsync(settings, **kwargs)
        opened.append(memory)
        return memory

    yield open_
    for memory in opened:
        memory.close()


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def old_store(tmp_path: Path) -> Callable[[str], Path]:
    """A copy of a memory directory an older version wrote (``tests/fixtures/<name>/collection``),
    to migrate without touching the fixture: ``old_store("store_v2")``."""

    def copy(name: str) -> Path:
        target = tmp_path / "collection"
        shutil.copytree(FIXTURES / name / "collection", target)
        return target

    return copy


@pytest.fixture
def schema_version() -> Callable[[Path], str]:
    """The schema version a SQLite store file of a directory records (``meta.schema_version``)."""

    def read(directory: Path) -> str:
        with sqlite3.connect(directory / "store.sqlite3") as db:
            return str(db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    return read
