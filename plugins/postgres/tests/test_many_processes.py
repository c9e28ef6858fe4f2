"""Many processes on one memory: 4 writers x 500 inserts and 2 readers at once.

Each writer acknowledges a record (a shared counter) only after ``insert`` returned, i.e.
after its batch committed. Each reader notes the counters, then searches: its in-process
index must hold at least every acknowledged record, and the last acknowledged record of
each writer must be the top hit for its own text. The guarantee checked: a search sees
every write committed before it began.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

import memcore
from memcore.testing import unique_word

WRITERS = 4
PER_WRITER = 500
READERS = 2


def settings() -> dict[str, Any]:
    return {"store": {"kind": "postgres"}, "indexes": {"main": {"kind": "exact"}}}


def text_of(writer: int, j: int) -> str:
    return f"{unique_word(writer * 100_000 + j)} {unique_word(7_000_000 + writer * 1000 + j)} item"


def writer(path: str, w: int, acked: Any, errors: Any, timings: Any) -> None:
    try:
        with memcore.open(settings(), path=path) as memory:
            started = time.perf_counter()
            for j in range(PER_WRITER):
                memory.insert({"id": f"w{w}-{j}", "text": text_of(w, j), "metadata": {"writer": w, "j": j}})
                acked[w] = j + 1  # committed: acknowledged
            timings.put((w, time.perf_counter() - started))
    except BaseException:  # noqa: BLE001 - reported to the parent
        errors.put(f"writer {w}: {traceback.format_exc()}")


def reader(path: str, r: int, acked: Any, done: Any, errors: Any, checks: Any) -> None:
    try:
        with memcore.open(settings(), path=path) as memory:
            handle = memory.collection._indexes["main"]  # type: ignore[attr-defined]
            n = 0
            while True:
                finished = done.value == WRITERS
                before = list(acked)  # acknowledged before the search began
                for w, count in enumerate(before):
                    if count == 0:
                        continue
                    hits = memory.collection.retrieve(text_of(w, count - 1), k=1, index="main", with_records=False)
                    assert hits and hits[0].id == f"w{w}-{count - 1}", (w, count, hits[:1])
                assert len(handle.index) >= sum(before), (len(handle.index), before)
                n += 1
                if finished:
                    assert len(handle.index) == WRITERS * PER_WRITER
                    assert memory.count() == WRITERS * PER_WRITER
                    break
            checks.put(n)
    except BaseException:  # noqa: BLE001 - reported to the parent
        errors.put(f"reader {r}: {traceback.format_exc()}")


@pytest.mark.timeout(900)
def test_four_writers_and_two_readers_on_one_memory(pg_dir: Path) -> None:
    path = str(pg_dir / "memory")
    with memcore.open(settings(), path=path) as memory:  # created once, so the processes open an existing memory
        assert memory.count() == 0
        ctx = mp.get_context("spawn")
        acked = ctx.Array("i", WRITERS)
        done = ctx.Value("i", 0)
        errors = ctx.Queue()
        checks = ctx.Queue()
        readers = [ctx.Process(target=reader, args=(path, r, acked, done, errors, checks)) for r in range(READERS)]
        writers = [ctx.Process(target=writer, args=(path, w, acked, errors, checks)) for w in range(WRITERS)]
        for p in readers + writers:
            p.start()
        for p in writers:
            p.join(600)
            with done.get_lock():
                done.value += 1
        for p in readers:
            p.join(600)
        failures = []
        while not errors.empty():
            failures.append(errors.get())
        assert failures == [], "\n".join(failures)
        assert [p.exitcode for p in readers + writers] == [0] * (READERS + WRITERS)
        reported = [checks.get(timeout=5) for _ in range(READERS + WRITERS)]
        searches = [x for x in reported if isinstance(x, int)]
        seconds = sorted(x[1] for x in reported if isinstance(x, tuple))
        assert len(searches) == READERS and len(seconds) == WRITERS
        assert all(n >= 1 for n in searches)
        assert list(acked) == [PER_WRITER] * WRITERS
        assert memory.count() == WRITERS * PER_WRITER
        ids = set(memory.collection._store.ids())  # type: ignore[attr-defined]
        assert ids == {f"w{w}-{j}" for w in range(WRITERS) for j in range(PER_WRITER)}
        # this process's index catches up too, before its next search
        assert memory.collection.retrieve(text_of(3, 499), k=1, index="main")[0].id == "w3-499"
        print(f"reader searches: {searches}; writer seconds: {[round(s, 1) for s in seconds]}")
