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
