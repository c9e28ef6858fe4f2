"""Thread safety (issue 13): one Memory shared by writer and reader threads.

Every public Collection method holds the collection's lock; the SQLite store serialises its
connection. Afterwards every record written by any thread is in the store and in every index.
"""

from __future__ import annotations

import threading

import memcore

from .conftest import settings, vec


def test_threads_share_one_memory(directory):
    memory = memcore.open(settings(), path=directory)
    c = memory.collection
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(25):
                rid = f"t{t}-{i}"
                c.insert([{"id": rid, "text": rid, "vectors": {"v": vec(1000 * t + i)}}])
                if i % 5 == 4:
                    c.delete(f"t{t}-{i - 1}")
                if i % 10 == 9:
                    c.flush()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(60):
                c.retrieve({"vectors": {"v": vec(i)}}, index="flat", k=3)
                c.count()
                memory.retrieve(vector=vec(i), k=2)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expected = {f"t{t}-{i}" for t in range(4) for i in range(25)} - {f"t{t}-{i - 1}" for t in range(4) for i in range(25) if i % 5 == 4}
    assert set(c.ids()) == expected
    for name in ("exact", "flat"):
        assert len(c.index(name)) == len(expected)
    memory.close()
    with memcore.open(settings(), path=directory) as again:
        assert set(again.collection.ids()) == expected
        hits = again.collection.retrieve({"vectors": {"v": vec(1000 * 2 + 7)}}, index="flat", k=1)
        assert hits[0].id == "t2-7"
