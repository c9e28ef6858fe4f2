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
limit is one timer on the loop.

**Searches waiting together run together.** A search may come with a :class:`Batch`: a key
(the caller's key and scope, and the search's shape: k, filters, options, text or vector)
and how to run several such searches in one call (``Memory.retrieve_many``: one index
search and one record read for all). A worker taking a call takes with it every call of the
same key already waiting in the queue (at most :data:`BATCH_MAX`) and answers each future
with its own result. Nothing waits for a batch to fill: a lone search runs alone, as it
came. Calls whose time is up are dropped before the batch runs; when the batch fails, each
of its calls runs again alone, so that each gets exactly the error it would have alone.
Calls of different callers or scopes never share a batch. A call costs the event loop less than
``loop.run_in_executor`` (a :class:`concurrent.futures.Future` chained to an asyncio one)
under ``asyncio.timeout`` (measured: that hop was about a tenth of the server's CPU per
search), and a small pool keeps fewer threads contending for the GIL than one thread per
concurrent request.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from typing import Any, Callable, Hashable, NamedTuple, Sequence, TypeVar

import memcore
from memcore import MemcoreError
from memcore.plugin import get_logger

from .tenancy import Caller, Served, imposed

__all__ = ["Calls", "CallTimeout", "Unexpected", "Batch", "BATCH_MAX"]

T = TypeVar("T")
log = get_logger("memcore.server")


class CallTimeout(MemcoreError):
    """A call ran longer than ``request_timeout_s`` (HTTP 504)."""


class Unexpected(MemcoreError):
    """A call raised something that is not a memcore error (HTTP 500 ``InternalError``; logged)."""


_STOP = False
"""The token :meth:`_Pool.close` queues once per worker: stop."""

BATCH_MAX = 64
"""Most calls one worker takes together as one batch."""


class Batch:
    """How a call may run together with others of the same key: its ``item`` (its query),
    ``shape`` (a function giving its key, called only when a worker looks for calls to run
    with another: a lone call never computes it), and ``many``, which runs several items in
    one call and returns one value per item (the value the call alone would return), in
    order. Calls of one key must be interchangeable but for their items (the same caller,
    scope and shape)."""

    __slots__ = ("_shape", "_key", "item", "many")

    def __init__(self, shape: Callable[[], Hashable], item: Any, many: Callable[[list[Any]], Sequence[Any]]):
        self._shape = shape
        self._key: Any = _UNKNOWN
        self.item = item
        self.many = many

    @property
    def key(self) -> Hashable:
        """The call's key (computed once, when first asked for; None: it runs alone)."""
        if self._key is _UNKNOWN:
            self._key = self._shape()
        return self._key  # type: ignore[no-any-return]


_UNKNOWN: Any = object()


class _Call(NamedTuple):
    loop: asyncio.AbstractEventLoop
    future: "asyncio.Future[Any]"
    fn: Callable[[], Any]
    batch: Batch | None


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
    whose future is done before it starts (timed out, cancelled) is dropped. A worker takes
    the calls waiting with the same :class:`Batch` key as the first it takes, and runs them
    as one batch (see the module).

    The calls wait in a deque; each call also puts one token in a :class:`queue.SimpleQueue`,
    on which idle workers block (a wake-up in C, as cheap as a plain queue's). A worker woken
    by a token takes the next call, if any is left: a batch takes several calls for one
    token, so some tokens find the deque empty, and there are never fewer tokens than calls.
    """

    def __init__(self, threads: int, name: str):
        self._tokens: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._items: deque[_Call] = deque()
        self._lock = threading.Lock()
        self._max = threads
        self._name = name
        self._threads: list[threading.Thread] = []
        self._idle = 0  # workers waiting on the tokens (approximate: a race at most starts one more, within the maximum)
        self._closed = False
        self.batches = 0
        """How many batches of more than one call ran (for tests and diagnostics)."""
        self.batched = 0
        """How many calls those batches answered."""

    def submit(self, loop: asyncio.AbstractEventLoop, future: "asyncio.Future[Any]", fn: Callable[[], Any], batch: Batch | None = None) -> None:
        """Queue ``fn`` (with ``batch``: it may run with others of its key); its value or exception goes to ``future`` on ``loop``."""
        with self._lock:
            self._items.append(_Call(loop, future, fn, batch))
        self._tokens.put(True)
        if self._idle <= 0 and len(self._threads) < self._max:
            with self._lock:
                if len(self._threads) < self._max and not self._closed:
                    worker = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
                    self._threads.append(worker)
                    worker.start()

    def _take(self) -> list[_Call]:
        """The next call and the calls of its batch key waiting behind it (none: the deque is empty)."""
        with self._lock:
            items = self._items
            if not items:
                return []
            first = items.popleft()
            if first.batch is None or not items:
                return [first]
            key = first.batch.key
            if key is None:
                return [first]
            taken, rest = [first], deque[_Call]()
            for call in items:
                if call.batch is not None and len(taken) < BATCH_MAX and call.batch.key == key:
                    taken.append(call)
                else:
                    rest.append(call)
            if len(taken) > 1:
                self._items = rest
            return taken

    def _work(self) -> None:
        get = self._tokens.get
        while True:
            self._idle += 1
            token = get()
            self._idle -= 1
            if not token:  # _STOP
                return
            calls = self._take()
            live = [call for call in calls if not call.future.done()]  # timed out or cancelled while queued: dropped
            if len(live) > 1:
                self._run_batch(live)
            elif live:
                self._run(live[0])
            del calls, live  # keep no reference to the last calls while waiting for the next

    def _run(self, call: _Call) -> None:
        try:
            value = call.fn()
        except BaseException as exc:  # handed to the awaiting request, as run_in_executor would
            self._answer(call.loop, _fail, call.future, exc)
        else:
            self._answer(call.loop, _resolve, call.future, value)

    def _run_batch(self, calls: list[_Call]) -> None:
        """One call of the batch for all; each answered with its own value. When it fails,
        each call runs alone (those whose time is up meanwhile are dropped)."""
        batch = calls[0].batch
        assert batch is not None
        try:
            values = list(batch.many([call.batch.item for call in calls if call.batch is not None]))
            if len(values) != len(calls):
                raise RuntimeError(f"a batch of {len(calls)} calls gave {len(values)} values")
        except BaseException:  # each gets exactly the answer it would have alone
            for call in calls:
                if not call.future.done():
                    self._run(call)
            return
        self.batches += 1
        self.batched += len(calls)
        for call, value in zip(calls, values):
            self._answer(call.loop, _resolve, call.future, value)

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
            queued, self._items = self._items, deque()
            for call in queued:
                self._answer(call.loop, _cancel, call.future, None)
            for _ in self._threads:
                self._tokens.put(_STOP)


def _keyed(who: Caller, shape: Callable[[], Hashable]) -> Hashable:
    """The batch key of a call: its caller's and its shape (None when it has no shape: alone)."""
    found = shape()
    return None if found is None else (caller_key(who), found)


def caller_key(who: Caller) -> Hashable:
    """What tells callers apart for batching: the key's name, whether admin, and its scope."""
    return (who.name, who.admin, None if who.scope is None else tuple(sorted(who.scope.items())))


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

    async def run(
        self,
        who: Caller,
        fn: Callable[[Served], T],
        *,
        writes: bool = False,
        batch: tuple[Callable[[], Hashable], Any, Callable[[Served, list[Any]], Sequence[T]]] | None = None,
    ) -> T:
        """``fn`` on the memory as ``who`` sees it, in a worker thread, inside ``who``'s scope
        (``writes``: in the pool of the calls that write).

        ``batch``: ``(shape, item, many)``: the call may run together with the reads of the
        same caller and shape waiting beside it (``shape()`` gives the shape, asked only when
        a worker looks for company; None: alone), as ``many(memory, items)`` (one value per
        item, each what ``fn`` gives for that item); see the module.

        :raises CallTimeout: it took longer than ``timeout_s`` (it may still complete).
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        together = None
        if batch is not None and not writes:
            shape, item, many = batch
            together = Batch(lambda: _keyed(who, shape), item, lambda items: self._scoped(who, lambda m: many(m, items)))
        (self._writes if writes else self._reads).submit(loop, future, lambda: self._scoped(who, fn), together)
        timer = loop.call_later(self.timeout_s, self._expire, future)
        try:
            return await future  # type: ignore[no-any-return]
        finally:
            timer.cancel()

    @property
    def batches(self) -> int:
        """How many batches of several reads ran so far."""
        return self._reads.batches

    def _expire(self, future: "asyncio.Future[Any]") -> None:
        _fail(future, CallTimeout(f"the call took longer than {self.timeout_s} s (it may still complete)"))

    def close(self) -> None:
        """Drop the calls still queued; those running finish in their threads."""
        self._reads.close()
        self._writes.close()
