"""``memcore.AsyncMemory`` and ``memcore.open_async``: the everyday API for asyncio code.

Every verb of :class:`memcore.Memory` as a coroutine. The work runs on the memory's own
thread pool, so the event loop never blocks on the store, an embedder or an index:

- **writes are serialised** (``insert``, ``upsert``, ``update``, ``delete``, ``forget``
  run one at a time, in the order their worker threads take the write lock);
- **reads run beside them** (``get``, ``count``, ``retrieve``, ``query`` do not wait for
  the write lock; the collection still orders each call against the others);
- **cancellation never leaves a partial batch**: cancelling the awaiting task does not
  interrupt the worker thread, which finishes the call (a batch commits whole or not at
  all, as in :class:`memcore.Memory`); the caller sees ``CancelledError`` and must treat
  the write as possibly applied, exactly like a timeout on a networked database;
- **the caller's bound scope goes along**: each call runs in a copy of the caller's
  context, so ``with memory.collection.scoped(...)`` around ``await`` works as in sync code.

``aclose`` (or leaving ``async with``) waits for the calls in flight, then closes.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Generator, Mapping, Sequence, TypeVar

from ..errors import ValidationError
from ..model._query import Hit
from ..model._record import Record

if TYPE_CHECKING:
    import os

    from ..collection._collection import Collection
    from ..settings import MemcoreSettings
    from ._memory import Memory, ScopeLike

__all__ = ["AsyncMemory", "open_async"]

T = TypeVar("T")

Items = str | Mapping[str, Any] | Record | Sequence[str | Mapping[str, Any] | Record]

DEFAULT_WORKERS = 8
"""Threads per AsyncMemory: how many calls can be in flight at once."""


class AsyncMemory:
    """A :class:`memcore.Memory` for asyncio: the same verbs, awaited.

    Build one with ``await memcore.open_async(...)`` or ``async with
    memcore.open_async(...) as memory``; or wrap an open Memory: ``AsyncMemory(memory)``
    (it then owns it and closes it in :meth:`aclose`).
    """

    def __init__(self, memory: Memory, *, workers: int = DEFAULT_WORKERS):
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValidationError(f"workers must be a positive int, not {workers!r}")
        self.memory = memory
        """The wrapped :class:`memcore.Memory` (for what has no async form: ``.pipeline``, ``.service``...)."""
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memcore-async")
        self._write_lock = threading.Lock()
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._closed = False

    @property
    def settings(self) -> MemcoreSettings:
        """The settings the memory was built from."""
        return self.memory.settings

    @property
    def collection(self) -> Collection:
        """The memory's :class:`memcore.Collection` (synchronous; bind scopes with ``.scoped``)."""
        return self.memory.collection

    # -- running calls -------------------------------------------------------------------

    async def _run(self, call: Callable[[], T], *, write: bool) -> T:
        if self._closed:
            raise ValidationError("this AsyncMemory is closed")
        work = self._locked(call) if write else call
        context = contextvars.copy_context()  # the caller's bound scope goes along
        future = asyncio.get_running_loop().run_in_executor(self._pool, context.run, work)
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        future.add_done_callback(_consume)  # a cancelled caller's failure is not 'never retrieved'
        # shielded: cancelling the caller does not orphan the thread's result; the call finishes
        return await asyncio.shield(future)

    def _locked(self, call: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            with self._write_lock:
                return call()

        return run

    # -- writes --------------------------------------------------------------------------

    async def insert(self, items: Items, vector: Any = None, metadata: Mapping[str, Any] | None = None, **options: Any) -> str | list[str]:
        """:meth:`memcore.Memory.insert`, awaited (serialised with the other writes)."""
        return await self._run(functools.partial(self.memory.insert, items, vector, metadata, **options), write=True)

    async def insert_columns(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadata: Mapping[str, Sequence[Any]] | None = None,
        vectors: Any = None,
        scope: ScopeLike = None,
    ) -> list[str]:
        """:meth:`memcore.Memory.insert_columns`, awaited (serialised with the other writes)."""
        call = functools.partial(self.memory.insert_columns, texts, ids=ids, metadata=metadata, vectors=vectors, scope=scope)
        return await self._run(call, write=True)

    async def upsert(self, items: Items, *, scope: ScopeLike = None) -> str | list[str]:
        """:meth:`memcore.Memory.upsert`, awaited (serialised with the other writes)."""
        return await self._run(functools.partial(self.memory.upsert, items, scope=scope), write=True)

    async def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge_metadata: bool = False,
        vectors: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
    ) -> Record:
        """:meth:`memcore.Memory.update`, awaited (serialised with the other writes)."""
        call = functools.partial(self.memory.update, id, text=text, metadata=metadata, merge_metadata=merge_metadata, vectors=vectors, scope=scope)
        return await self._run(call, write=True)

    async def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """:meth:`memcore.Memory.delete`, awaited (serialised with the other writes)."""
        return await self._run(functools.partial(self.memory.delete, ids, where=where, scope=scope, where_document=where_document), write=True)

    async def forget(self, scope: ScopeLike) -> dict[str, Any]:
        """:meth:`memcore.Memory.forget`, awaited (serialised with the other writes)."""
        return await self._run(functools.partial(self.memory.forget, scope), write=True)

    # -- reads ---------------------------------------------------------------------------

    async def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        limit: int | None = None,
        offset: int = 0,
        where_document: Mapping[str, Any] | None = None,
    ) -> Record | list[Record]:
        """:meth:`memcore.Memory.get`, awaited."""
        call = functools.partial(self.memory.get, ids, where=where, scope=scope, limit=limit, offset=offset, where_document=where_document)
        return await self._run(call, write=False)

    async def count(
        self,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        index: str | None = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """:meth:`memcore.Memory.count`, awaited."""
        return await self._run(functools.partial(self.memory.count, where=where, scope=scope, index=index, where_document=where_document), write=False)

    async def history(self, id: str, *, scope: ScopeLike = None) -> list[dict[str, Any]]:
        """:meth:`memcore.Memory.history`, awaited."""
        return await self._run(functools.partial(self.memory.history, id, scope=scope), write=False)

    async def retrieve(
        self,
        query: str | None = None,
        vector: Any = None,
        where: Mapping[str, Any] | None = None,
        k: int = 10,
        *,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """:meth:`memcore.Memory.retrieve`, awaited."""
        call = functools.partial(self.memory.retrieve, query, vector, where, k, where_document=where_document, min_score=min_score, **options)
        return await self._run(call, write=False)

    async def retrieve_many(
        self,
        queries: Sequence[str] | None = None,
        *,
        vectors: Any = None,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`memcore.Memory.retrieve_many`, awaited."""
        call = functools.partial(
            self.memory.retrieve_many, queries, vectors=vectors, k=k, where=where, where_document=where_document, min_score=min_score, **options
        )
        return await self._run(call, write=False)

    async def query(
        self,
        text: str,
        *,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        index: str | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """:meth:`memcore.Memory.query`, awaited."""
        call = functools.partial(self.memory.query, text, k=k, where=where, index=index, scope=scope, where_document=where_document, min_score=min_score)
        return await self._run(call, write=False)

    # -- lifecycle -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Wait for the calls in flight, then close the memory (indexes are saved). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._in_flight:
            await asyncio.wait(list(self._in_flight))
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self.memory.close)
        finally:
            self._pool.shutdown(wait=True)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _Opening:
    """What :func:`open_async` returns: await it, or use it as ``async with``."""

    def __init__(self, settings: Any, path: Any, overrides: dict[str, Any], workers: int):
        self._args = (settings, path, overrides, workers)
        self._memory: AsyncMemory | None = None

    async def _open(self) -> AsyncMemory:
        from ._open import open as open_memory

        settings, path, overrides, workers = self._args
        call = functools.partial(open_memory, settings, path=path, **overrides)
        memory = await asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, call)
        try:
            return AsyncMemory(memory, workers=workers)
        except BaseException:
            memory.close()
            raise

    def __await__(self) -> Generator[Any, None, AsyncMemory]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemory:
        self._memory = await self._open()
        return self._memory

    async def __aexit__(self, *exc: Any) -> None:
        if self._memory is not None:
            await self._memory.aclose()


def open_async(
    settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    workers: int = DEFAULT_WORKERS,
    **overrides: Any,
) -> _Opening:
    """:func:`memcore.open` for asyncio: ``memory = await memcore.open_async(...)`` or
    ``async with memcore.open_async(...) as memory``. The memory is built on a worker
    thread (the event loop keeps running); ``workers`` bounds the calls in flight."""
    return _Opening(settings, path, overrides, workers)
