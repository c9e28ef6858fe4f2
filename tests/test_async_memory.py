"""``memcore.AsyncMemory``: many coroutines at once, writes serialised, reads beside them,
cancellation that never leaves a partial batch, the caller's scope carried to the worker.

(The everyday verbs themselves are checked on Memory and AsyncMemory alike by
test_memory_api.py.)"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import memcore
from memcore import ValidationError

MEMORY = {"store": {"kind": "memory"}}


def test_open_async_is_awaitable_and_an_async_context_manager(tmp_path):
    async def main():
        async with memcore.open_async(path=tmp_path / "m") as memory:
            assert isinstance(memory, memcore.AsyncMemory)
            await memory.insert("Alice works at the bakery")
        memory = await memcore.open_async(path=tmp_path / "m")
        try:
            assert await memory.count() == 1
            assert (await memory.retrieve("bakery", k=1))[0]["text"] == "Alice works at the bakery"
        finally:
            await memory.aclose()
        await memory.aclose()  # idempotent
        with pytest.raises(ValidationError, match="closed"):
            await memory.count()

    asyncio.run(main())


def test_a_hundred_concurrent_tasks_lose_nothing(tmp_path):
    async def main():
        async with memcore.open_async(path=tmp_path / "m") as memory:

            async def writer(i):
                return await memory.insert([{"text": f"writer {i} note {j}", "metadata": {"w": i}} for j in range(3)])

            async def reader(i):
                await memory.retrieve(f"note {i}", k=5)
                return await memory.count()

            results = await asyncio.gather(*[writer(i) if i % 2 else reader(i) for i in range(100)])
            written = [rid for r in results if isinstance(r, list) for rid in r]
            assert len(written) == len(set(written)) == 150
            assert await memory.count() == 150
            assert {r.id for r in await memory.get(written)} == set(written)
            counts = [r for r in results if isinstance(r, int)]
            assert all(0 <= c <= 150 for c in counts) and len(counts) == 50
        with memcore.open(path=tmp_path / "m") as reopened:
            assert reopened.count() == 150

    asyncio.run(main())


def test_writes_are_serialised_and_reads_do_not_wait_for_them():
    async def main():
        async with memcore.open_async(MEMORY) as memory:
            inner = memory.memory.insert
            busy, peak, release, entered = [0], [0], threading.Event(), threading.Event()
            guard = threading.Lock()

            def slow_insert(*args, **kwargs):
                with guard:
                    busy[0] += 1
                    peak[0] = max(peak[0], busy[0])
                entered.set()
                release.wait(5)
                try:
                    return inner(*args, **kwargs)
                finally:
                    with guard:
                        busy[0] -= 1

            memory.memory.insert = slow_insert
            writes = [asyncio.ensure_future(memory.insert(f"note {i}")) for i in range(4)]
            await asyncio.get_running_loop().run_in_executor(None, entered.wait, 5)
            assert await asyncio.wait_for(memory.count(), 5) == 0  # a read while a write is held
            release.set()
            await asyncio.gather(*writes)
            assert peak[0] == 1 and await memory.count() == 4

    asyncio.run(main())


def test_cancelling_a_batch_never_leaves_part_of_it(tmp_path):
    async def main():
        async with memcore.open_async(path=tmp_path / "m") as memory:
            inner = memory.memory.insert
            started = threading.Event()

            def slow_insert(*args, **kwargs):
                started.set()
                time.sleep(0.3)  # the caller is cancelled while the batch is in the worker
                return inner(*args, **kwargs)

            memory.memory.insert = slow_insert
            task = asyncio.ensure_future(memory.insert([f"batch item {i}" for i in range(200)]))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        # aclose waited for the worker: the batch is whole (it had started), never half
        with memcore.open(path=tmp_path / "m") as reopened:
            assert reopened.count() == 200

    asyncio.run(main())


def test_the_callers_bound_scope_goes_to_the_worker():
    async def main():
        async with memcore.open_async(MEMORY) as memory:
            await memory.insert("alice's note", scope={"user_id": "alice"})
            await memory.insert("bob's note", scope={"user_id": "bob"})
            with memory.collection.scoped({"user_id": "alice"}):
                assert await memory.count() == 1
                assert [r.text for r in await memory.get()] == ["alice's note"]
            assert await memory.count() == 2

    asyncio.run(main())


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_workers_must_be_a_positive_int(workers):
    with memcore.open(MEMORY) as memory, pytest.raises(ValidationError, match="workers"):
        memcore.AsyncMemory(memory, workers=workers)


def test_the_newer_verbs_awaited(tmp_path):
    async def main():
        async with memcore.open_async(path=tmp_path / "m") as memory:
            rid = await memory.insert("apples are red", metadata={"n": 1})
            await memory.update(rid, text="apples are green")
            assert [v["op"] for v in await memory.history(rid)] == ["insert", "update"]
            await memory.insert(["a zebra note", "pears are yellow"])
            answers = await memory.retrieve_many(["apples", "zebra"], k=1)
            assert [a[0]["text"] for a in answers] == ["apples are green", "a zebra note"]
            assert await memory.count(where_document={"$contains": "zebra"}) == 1
            assert [r.text for r in await memory.get(offset=1, limit=1)] == ["a zebra note"]
            assert await memory.delete(where_document={"$contains": "pears"}) == 1

    asyncio.run(main())


def test_async_memory_has_memorys_signatures():
    import inspect

    for name in ["insert", "upsert", "update", "delete", "forget", "get", "count", "history", "retrieve", "retrieve_many", "query"]:
        theirs = inspect.signature(getattr(memcore.Memory, name)).parameters
        ours = inspect.signature(getattr(memcore.AsyncMemory, name)).parameters
        assert [(p.name, p.kind, p.default) for p in ours.values()] == [(p.name, p.kind, p.default) for p in theirs.values()], name
