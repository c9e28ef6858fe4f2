"""Calls on the served memory: in the server's own worker threads, in the caller's scope, in time.

A memory call (a search, a write) can take long: embedding a query with a model, a write
waiting for the store. The event loop never runs one itself: :class:`Calls` hands each to a
pool of ``[server] threads`` worker threads and awaits it at most ``request_timeout_s``.
Reads and writes have a pool each: a write waits for the store's disk (a SQLite store's
writes take turns on its writer lock), and in one shared pool searches queued behind them
(measured: 32 clients, 20% inserts, 8 threads: search p50 53 ms with one pool).
When the time is up the client gets a 504 at once (:class:`CallTimeout`); a call still
waiting in the pool's queue is dropped, one already running completes in its thread.

Each pool is a few threads taking calls from one queue (:class:`_Pool`), each call answered
on an asyncio future that the worker resolves through ``call_soon_threadsafe``; the time
limit is one timer on the loop. A call costs the event loop less than
``loop.run_in_executor`` (a :class:`concurrent.futures.Future` chained to an asyncio one)
under ``asyncio.timeout`` (measured: that hop was about a tenth of the server's CPU per
search), and a small pool keeps fewer threads contending for the GIL than one thread per
concurrent request.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable, TypeVar

import memcore
from memcore import MemcoreError
from memcore.plugin import get_logger

from .tenancy import Caller, Served, imposed

__all__ = ["Calls", "CallTimeout", "Unexpected"]

T = TypeVar("T")
log = get_logger("memcore.server")


class CallTimeout(MemcoreError):
    """A call ran longer than ``request_timeout_s`` (HTTP 504)."""


class Unexpected(MemcoreError):
    """A call raised something that is not a memcore error (HTTP 500 ``InternalError``; logged)."""


_STOP = None
"""What :meth:`_Pool.close` queues once per worker: stop."""


def _resolve(future: "asyncio.Future[Any]", value: Any) -> None:
    if not future.done():  # not timed out nor cancelled meanwhile
        future.set_result(value)


def _fail(future: "asyncio.Future[Any]", exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _cancel(future: "asyncio.Future[Any]", _: Any) -> None:
    future.cancel()


class _Pool:
    """At most ``threads`` worker threads (started as calls come) running calls from one queue,
    each answered on its asyncio future (through its loop's ``call_soon_threadsafe``); a call
    whose future is done before it starts (timed out, cancelled) is dropped."""

    def __init__(self, threads: int, name: str):
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._max = threads
        self._name = name
        self._threads: list[threading.Thread] = []
        self._idle = 0  # workers waiting on the queue (approximate: a race at most starts one more, within the maximum)
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, loop: asyncio.AbstractEventLoop, future: "asyncio.Future[Any]", fn: Callable[[], Any]) -> None:
        """Queue ``fn``; its value or exception goes to ``future`` on ``loop``."""
        self._queue.put((loop, future, fn))
        if self._idle <= 0 and len(self._threads) < self._max:
            with self._lock:
                if len(self._threads) < self._max and not self._closed:
                    worker = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
                    self._threads.append(worker)
                    worker.start()

    def _work(self) -> None:
        get = self._queue.get
        while True:
            self._idle += 1
            item = get()
            self._idle -= 1
            if item is _STOP:
                return
            loop, future, fn = item
            del item
            if future.done():  # timed out or cancelled while queued: dropped
                continue
            try:
                value = fn()
            except BaseException as exc:  # handed to the awaiting request, as run_in_executor would
                self._answer(loop, _fail, future, exc)
            else:
                self._answer(loop, _resolve, future, value)
                del value
            del loop, future, fn  # keep no reference to the last call while waiting for the next

    @staticmethod
    def _answer(loop: asyncio.AbstractEventLoop, how: Callable[..., None], future: "asyncio.Future[Any]", outcome: Any) -> None:
        try:
            loop.call_soon_threadsafe(how, future, outcome)
        except RuntimeError:  # the loop is closed: nobody waits for the answer
            pass

    def close(self) -> None:
        """Drop the calls still queued; those running finish in their threads, then every worker stops."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    self._answer(item[0], _cancel, item[1], None)
            for _ in self._threads:
                self._queue.put(_STOP)


class Calls:
    """Run calls on ``memory`` in ``threads`` worker threads for reads and as many for
    writes, each within ``timeout_s`` seconds."""

    def __init__(self, memory: memcore.Memory, timeout_s: float, threads: int):
        self.memory = memory
        self.timeout_s = timeout_s
        self._reads = _Pool(threads, "memcore-read")
        self._writes = _Pool(threads, "memcore-write")

    def _scoped(self, who: Caller, fn: Callable[[Served], T]) -> T:
        try:
            with imposed(self.memory, who) as served:
                return fn(served)
        except MemcoreError:
            raise
        except Exception as exc:  # answered as a bare 500; the details go to the log only
            log.error("server.unexpected", type=type(exc).__name__, exc_info=exc)
            raise Unexpected("the server failed unexpectedly; the details are in its log") from None

    async def run(self, who: Caller, fn: Callable[[Served], T], *, writes: bool = False) -> T:
        """``fn`` on the memory as ``who`` sees it, in a worker thread, inside ``who``'s scope
        (``writes``: in the pool of the calls that write).

        :raises CallTimeout: it took longer than ``timeout_s`` (it may still complete).
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        (self._writes if writes else self._reads).submit(loop, future, lambda: self._scoped(who, fn))
        timer = loop.call_later(self.timeout_s, self._expire, future)
        try:
            return await future  # type: ignore[no-any-return]
        finally:
            timer.cancel()

    def _expire(self, future: "asyncio.Future[Any]") -> None:
        _fail(future, CallTimeout(f"the call took longer than {self.timeout_s} s (it may still complete)"))

    def close(self) -> None:
        """Drop the calls still queued; those running finish in their threads."""
        self._reads.close()
        self._writes.close()
