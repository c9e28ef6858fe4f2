"""Several threads sharing one :class:`memcore.Memory`: a stress run of a service's verbs,
then the checks of a single-threaded reopen.

:func:`hammer_service` starts ``threads`` threads on one memory; each inserts its own items
(in turn in ``scopes``, default alice's and bob's), retrieves them, retries some inserts
(an idempotent retry must return the same id), updates and deletes some of its own, all at
once. :func:`check_after_threads` then reopens the memory alone and checks: the service
reports no inconsistency (:meth:`memcore.Memory.check_service`), every acknowledged item
that was not deleted is stored (unless the service may forget what it accepted), every
deleted one is gone, every index holds exactly its members, and new inserts and retrieves
work in every scope. :class:`memcore.testing.ServiceContract` runs both on every service;
services with capacity policies run them with small capacities in their own tests.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import NotFoundError, ValidationError
from .data import unique_word

__all__ = ["ThreadsReport", "hammer_service", "check_after_threads"]

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}
SCOPES: tuple[dict[str, Any] | None, ...] = (ALICE, BOB)
"""The default scopes the threads take in turn: two disjoint ones (an unscoped call acts on
every scope's records, with the unscoped state: give ``scopes=(None,)`` for an unscoped memory)."""


@dataclass
class ThreadsReport:
    """What the threads did: the acknowledged items still expected, the deleted ids, the
    calls made and every unexpected error (``"<verb>: <type>: <message>"``)."""

    expected: dict[str, tuple[str, dict[str, Any] | None]] = field(default_factory=dict)
    """id -> (text, scope) of each acknowledged insert not deleted since."""
    deleted: set[str] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    scopes: tuple[dict[str, Any] | None, ...] = SCOPES
    """The scopes the threads used (the checks insert and retrieve in each)."""
    idempotent: bool = True
    """Whether an insert of identical content must return the first id (checked if so)."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, verb: str) -> None:
        """Count one call of ``verb``."""
        with self.lock:
            self.calls[verb] = self.calls.get(verb, 0) + 1


def _text(rng: random.Random, t: int, i: int) -> str:
    """A text of words no other item has (so that exact-text retrieval is unambiguous)."""
    return f"thread {t} item {i}: " + " ".join(unique_word(rng.randrange(10**9)) for _ in range(5))


def hammer_service(
    memory: Any,
    *,
    threads: int = 4,
    items: int = 12,
    seed: int = 0,
    scopes: tuple[dict[str, Any] | None, ...] = SCOPES,
    idempotent: bool = True,
) -> ThreadsReport:
    """Run ``threads`` threads of ``items`` inserts each (plus retrieves, retries, updates
    and deletes) on ``memory`` at once; returns what they did and every unexpected error.

    Expected refusals are not errors: a verb the service refuses for every record
    (:class:`memcore.ValidationError`, e.g. ``update`` of a ``vector_hash`` text), and a
    :class:`memcore.NotFoundError` for an item the service has forgotten by its own policy
    (checked: the record is really gone). ``idempotent=False``: the service gives identical
    content a new record on purpose (a new birth time...), so retries are not checked."""
    report = ThreadsReport(scopes=tuple(scopes), idempotent=idempotent)
    barrier = threading.Barrier(threads)

    def gone(rid: str) -> bool:
        return memory.collection.get_many([rid])[0] is None

    def work(t: int) -> None:
        rng = random.Random(seed * 1000 + t)
        own: list[tuple[str, str, dict[str, Any] | None]] = []
        barrier.wait()
        for i in range(items):
            scope = scopes[(t + i) % len(scopes)]
            at = {"scope": scope} if scope else {}
            text = _text(rng, t, i)
            metadata = {"topic": ("work", "pets", "hobby")[i % 3], "n": i, "thread": t}
            try:
                report.count("insert")
                rid = memory.insert(text, metadata=metadata, **at)
                with report.lock:
                    report.expected[rid] = (text, scope)
                own.append((rid, text, scope))
                report.count("retrieve")
                memory.retrieve(text, k=3, **at)
                if idempotent and i % 4 == 1:  # an idempotent retry: the same id, nothing else changes
                    report.count("retry")
                    again = memory.insert(text, metadata=metadata, **at)
                    if again != rid:
                        report.errors.append(f"retry: insert of identical content returned {again!r}, first {rid!r}")
                if i % 5 == 2 and own:
                    target, _, target_scope = own[rng.randrange(len(own))]
                    report.count("update")
                    try:
                        memory.update(target, metadata={"topic": "edited", "n": i, "thread": t}, scope=target_scope)
                    except ValidationError:
                        pass  # the service refuses the verb for every record
                    except NotFoundError:
                        if not gone(target):
                            raise
                if i % 4 == 3 and len(own) > 1:
                    target, _, target_scope = own.pop(rng.randrange(len(own) - 1))
                    report.count("delete")
                    try:
                        memory.delete(target, scope=target_scope)
                    except NotFoundError:
                        if not gone(target):
                            raise
                    with report.lock:
                        report.expected.pop(target, None)
                        report.deleted.add(target)
            except Exception as exc:  # noqa: BLE001 - every unexpected error is reported
                with report.lock:
                    report.errors.append(f"thread {t} item {i}: {type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return report


def check_after_threads(open_memory: Callable[[Path], Any], path: Path, report: ThreadsReport, *, may_forget: bool = False) -> list[str]:
    """Reopen the memory at ``path`` alone and return every broken promise (empty: all
    kept). ``may_forget``: the service may forget items it accepted (a window or a last
    tier that deletes), so an expected item may be absent."""
    broken: list[str] = [f"during the threads: {e}" for e in report.errors]
    memory = open_memory(path)
    try:
        problems = memory.check_service()
        broken += [f"service state after the threads: {p}" for p in problems]
        collection = memory.collection
        ids = list(report.expected)
        for rid, record in zip(ids, collection.get_many(ids)):
            text, _ = report.expected[rid]
            if record is None and not may_forget:
                broken.append(f"acknowledged item {rid} ({text!r}) is not stored")
        back = [r.id for r in collection.get_many(sorted(report.deleted)) if r is not None]
        broken += [f"deleted item {rid} is still stored" for rid in back]
        for entry in collection.list_indexes():
            if entry.get("status", "ok") != "ok":
                broken.append(f"index {entry['name']} is broken: {entry.get('error')}")
                continue
            members = collection.count(index=entry["name"])
            if len(collection.index(entry["name"])) != members:
                broken.append(f"index {entry['name']} holds {len(collection.index(entry['name']))} entries for {members} members")
        rng = random.Random(len(ids))
        for scope in report.scopes:
            at = {"scope": scope} if scope else {}
            text = _text(rng, -1, 0)
            try:
                rid = memory.insert(text, metadata={"topic": "work", "n": -1}, **at)
                if report.idempotent and memory.insert(text, metadata={"topic": "work", "n": -1}, **at) != rid:
                    broken.append(f"after the threads, a retry in scope {scope} returned another id")
                memory.retrieve(text, k=3, **at)
            except Exception as exc:  # noqa: BLE001 - a verb failing after reopen is what we look for
                broken.append(f"after the threads, insert/retrieve in scope {scope}: {type(exc).__name__}: {exc}")
        broken += [f"service state after new inserts: {p}" for p in memory.check_service()]
    finally:
        memory.close()
    return broken
