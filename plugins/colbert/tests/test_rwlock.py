"""The readers-writer lock of the server: shared readers, exclusive writers, writer preference."""

from __future__ import annotations

import threading
import time

from memcore_colbert.rwlock import RWLock


def _wait_for(predicate) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_readers_share_and_a_waiting_writer_holds_new_readers_back():
    lock = RWLock()
    inside = threading.Barrier(3, timeout=30)  # both readers inside at once, with the test thread
    release = threading.Event()
    order: list[str] = []

    def reader(tag: str) -> None:
        with lock.read():
            inside.wait()
            release.wait(30)
            order.append(tag)

    def writer() -> None:
        with lock.write():
            order.append("w")

    def late_reader() -> None:
        with lock.read():
            order.append("r3")

    readers = [threading.Thread(target=reader, args=(t,)) for t in ("r1", "r2")]
    for t in readers:
        t.start()
    inside.wait()  # would time out (BrokenBarrierError) if readers excluded each other
    assert lock.readers == 2
    w = threading.Thread(target=writer)
    w.start()
    _wait_for(lambda: lock.writers_waiting == 1)
    late = threading.Thread(target=late_reader)
    late.start()
    assert order == []
    release.set()
    for t in (*readers, w, late):
        t.join(30)
    assert sorted(order[:2]) == ["r1", "r2"] and order[2:] == ["w", "r3"]
    assert lock.readers == 0 and lock.writers_waiting == 0


def test_writers_exclude_each_other_and_readers():
    lock = RWLock()
    state = {"n": 0, "inside": 0, "max_inside": 0, "bad_reads": 0}
    guard = threading.Lock()

    def write() -> None:
        for _ in range(200):
            with lock.write():
                with guard:
                    state["inside"] += 1
                    state["max_inside"] = max(state["max_inside"], state["inside"])
                state["n"] += 1
                with guard:
                    state["inside"] -= 1

    def read() -> None:
        for _ in range(200):
            with lock.read():
                with guard:
                    state["bad_reads"] += state["inside"] != 0

    threads = [threading.Thread(target=write) for _ in range(3)] + [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert state["n"] == 600 and state["max_inside"] == 1 and state["bad_reads"] == 0
