"""Calls on the served memory: reads and writes run in pools of their own."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import memcore
from memcore_server.calls import Calls
from memcore_server.tenancy import ANONYMOUS


def test_a_read_does_not_wait_behind_writes(tmp_path: Path) -> None:
    """With one thread per pool, a write holding the write thread leaves the read thread free:
    the read completes while the write is still running (one shared pool would queue it)."""
    settings = {"spaces": {"default": {"dim": 4}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert([{"text": "a", "vectors": {"default": [1.0, 0.0, 0.0, 0.0]}}])
        calls = Calls(memory, timeout_s=30.0, threads=1)
        started, release = threading.Event(), threading.Event()

        def slow_write(m: memcore.Memory) -> str:
            started.set()
            assert release.wait(30), "the test never released the write"
            return str(m.insert("b", vector=[0.0, 1.0, 0.0, 0.0]))

        async def scenario() -> tuple[int, str]:
            write = asyncio.ensure_future(calls.run(ANONYMOUS, slow_write, writes=True))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
            found = await calls.run(ANONYMOUS, lambda m: m.count())
            assert not write.done(), "the write is still holding its thread"
            release.set()
            return found, await write

        try:
            found, written = asyncio.run(scenario())
        finally:
            release.set()
            calls.close()
        assert found == 1 and written  # counted while the write held its thread
        assert memory.count() == 2


def test_a_call_still_queued_when_its_time_is_up_never_runs_and_close_cancels_the_queued(tmp_path: Path) -> None:
    """One read thread held by a slow call: a second call waits in the queue; when its time is
    up its caller gets CallTimeout and the call is dropped (it never runs, even once the thread
    is free). A call queued when the pools close is cancelled, not left waiting."""
    from memcore_server.calls import CallTimeout

    settings = {"spaces": {"default": {"dim": 4}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        short, long = Calls(memory, timeout_s=0.3, threads=1), Calls(memory, timeout_s=30.0, threads=1)
        started, release, finished = threading.Event(), threading.Event(), threading.Event()
        ran: list[str] = []

        def slow(m: memcore.Memory) -> int:
            started.set()
            try:
                assert release.wait(30), "the test never released the slow call"
                return m.count()
            finally:
                finished.set()

        def queued(m: memcore.Memory) -> int:
            ran.append("queued")
            return m.count()

        async def outcome(call: "asyncio.Future[int]") -> str:
            try:
                await call
            except CallTimeout:
                return "timed out"
            except asyncio.CancelledError:
                return "cancelled"
            return "answered"

        async def scenario() -> list[str]:
            loop = asyncio.get_running_loop()
            held = asyncio.ensure_future(short.run(ANONYMOUS, slow))
            await loop.run_in_executor(None, started.wait, 30)
            late = await outcome(asyncio.ensure_future(short.run(ANONYMOUS, queued)))  # queued behind slow, past its time
            release.set()
            await loop.run_in_executor(None, finished.wait, 30)
            await outcome(held)
            again = await short.run(ANONYMOUS, queued)  # the thread is free: this one runs
            started.clear(), release.clear(), finished.clear()
            busy = asyncio.ensure_future(long.run(ANONYMOUS, slow))
            await loop.run_in_executor(None, started.wait, 30)
            waiting = asyncio.ensure_future(long.run(ANONYMOUS, queued))
            await asyncio.sleep(0.05)  # queued behind slow
            long.close()
            closed = await outcome(waiting)
            release.set()
            return [late, str(again), closed, await outcome(busy)]

        try:
            results = asyncio.run(scenario())
        finally:
            release.set()
            short.close()
            long.close()
        assert results == ["timed out", "0", "cancelled", "answered"]  # the running call completes after close
        assert ran == ["queued"]  # only the call made once the thread was free ran
