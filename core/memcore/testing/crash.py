"""A crash harness: a writer process SIGKILLed at random points, then every promise checked.

:func:`run_crash_trials` starts a writer child (``python -m memcore.testing.crash``) on a
collection directory, lets it write batches -- inserting, upserting, deleting, flushing,
closing and reopening at random; every other insert batch is given as columns
(``Collection.insert_columns``) -- and kills it with SIGKILL after a random delay. The
child prints each batch *after* the call returned (an acknowledged write). The parent
then reopens the collection and checks: every acknowledged record is in the store with
its text, deleted ones are gone, and each index holds exactly its members and finds every
acknowledged record (vector indexes: by its own vector at rank 1), and an insert batch the
writer died in is there whole or not at all (``partial_batches``). Trials continue on the
same directory, so each open also recovers from the previous kill.

``kill_in_remove`` (index names) aims the kill instead: the writer deletes a record it
added since its last flush and SIGKILLs itself when the first of those indexes is asked
to remove it -- after the store committed the delete, before the index wrote it. An index
that persists its writes on its own (``Index.durable_writes``: chroma, poincare) then holds
the record the store no longer has, and the next open's catch-up must remove it: a
*phantom* (an index holding more ids than its members) is counted in ``phantoms``.

Used by ``tests/reliability/test_crash.py`` (a few trials) and ``bench/bench_crash.py --trials N``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..model._query import Query

__all__ = ["CrashReport", "run_crash_trials", "crash_settings"]

DIM = 16


def crash_settings(extra_indexes: dict[str, Any] | None = None) -> dict[str, Any]:
    """Settings of the harness' memory: a caller-vector space, the exact index, plus ``extra_indexes``."""
    return {
        "spaces": {"v": {"dim": DIM}},
        "indexes": {"exact": {"kind": "exact", "space": "v"}, **(extra_indexes or {})},
        "pipeline": [{"kind": "recall", "index": "exact"}, {"kind": "limit"}],
    }


def vector_of(rid: str) -> np.ndarray:
    """The deterministic vector of a record id (so the parent can search for it)."""
    seed = int.from_bytes(rid.encode("utf-8")[-8:].rjust(8, b"\0"), "little") ^ len(rid)
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


@dataclass
class CrashReport:
    """Totals over the trials."""

    trials: int = 0
    acknowledged: int = 0
    lost: int = 0
    resurrected: int = 0
    index_misses: int = 0
    phantoms: int = 0
    partial_batches: int = 0
    """Insert batches killed mid-call that the reopened memory holds only part of (all or none is the promise)."""
    killed_batches: int = 0
    """Insert batches of several records the writer was killed in (checked for ``partial_batches``)."""
    unopenable: int = 0
    other_errors: list[str] = field(default_factory=list)
    kill_phases: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no promise was broken."""
        return not (self.lost or self.resurrected or self.index_misses or self.phantoms or self.partial_batches or self.unopenable or self.other_errors)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe totals."""
        return {**self.__dict__, "ok": self.ok}


def _arm_kill_in_remove(memory: Any, names: list[str], armed: list[bool]) -> None:
    """Make the ``remove`` of the indexes ``names`` SIGKILL the process while ``armed[0]``."""
    for name in names:
        index = memory.collection.index(name)
        cls = type(index)
        if getattr(cls, "_crash_hooked", False):
            continue
        original = cls.remove

        def remove(self: Any, ids: Any, _original: Any = original) -> None:
            if armed[0] and self.name in names:
                os.kill(os.getpid(), signal.SIGKILL)
            _original(self, ids)

        cls.remove = remove
        cls._crash_hooked = True


def _child(directory: str, settings: dict[str, Any], prefix: str, seed: int, kill_in_remove: list[str]) -> None:
    """The writer: random batches until killed; prints ``{"phase"}`` before and ``{"ack"}`` after each call."""
    import memcore

    rng = random.Random(seed)

    def say(**msg: Any) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    say(phase="open")
    memory = memcore.open(settings, path=directory)
    armed = [False]
    if kill_in_remove:
        _arm_kill_in_remove(memory, kill_in_remove, armed)
    say(phase="ready")
    n = inserts = 0
    live: list[str] = []
    fresh: list[str] = []  # added since the last flush (kept by a durable index, unknown to its save)
    while True:
        action = rng.choices(["insert", "upsert", "delete", "flush", "reopen"], weights=[10, 2, 2, 2, 1])[0]
        if action == "insert":
            ids = [f"{prefix}-{n + i}" for i in range(rng.randint(1, 40))]
            n += len(ids)
            say(phase="insert", ids=ids)
            inserts += 1
            if inserts % 2:  # every other batch as columns (Collection.insert_columns): the same atomic commit
                memory.collection.insert_columns([f"text of {i}" for i in ids], ids=ids, vectors={"v": np.stack([vector_of(i) for i in ids])})
            else:
                memory.collection.insert([{"id": i, "text": f"text of {i}", "vectors": {"v": vector_of(i)}} for i in ids])
            live.extend(ids)
            fresh.extend(ids)
            say(ack="insert", ids=ids)
        elif action == "upsert" and live:
            rid = rng.choice(live)
            say(phase="upsert", ids=[rid])
            memory.collection.upsert([{"id": rid, "text": f"updated {rid}", "vectors": {"v": vector_of(rid)}}])
            say(ack="upsert", ids=[rid])
        elif action == "delete" and live:
            if kill_in_remove and fresh:  # aimed: a record added since the last save, killed in the index's remove
                rid = fresh.pop(rng.randrange(len(fresh)))
                live.remove(rid)
                armed[0] = True
            else:
                rid = live.pop(rng.randrange(len(live)))
                if rid in fresh:
                    fresh.remove(rid)
            say(phase="delete", ids=[rid])
            memory.collection.delete(rid)
            say(ack="delete", ids=[rid])
        elif action == "flush":
            say(phase="flush")
            memory.collection.flush()
            fresh.clear()
        elif action == "reopen":
            say(phase="close")
            memory.close()
            fresh.clear()
            say(phase="reopen")
            memory = memcore.open(settings, path=directory)


def _verify(directory: Path, settings: dict[str, Any], expected: dict[str, str], gone: set[str], report: CrashReport, killed: list[str] | None = None) -> None:
    import memcore

    try:
        memory = memcore.open(settings, path=directory)
    except Exception as exc:  # noqa: BLE001 - any failure to open is what we count
        report.unopenable += 1
        report.other_errors.append(f"open: {type(exc).__name__}: {exc}")
        return
    with memory:
        c = memory.collection
        ids = list(expected)
        records = c.get_many(ids)
        for rid, rec in zip(ids, records):
            if rec is None or rec.text != expected[rid]:
                report.lost += 1
        present = c.get_many(sorted(gone))
        report.resurrected += sum(r is not None for r in present)
        if killed and len(killed) > 1:  # the insert batch the writer died in: all of it or none
            report.killed_batches += 1
            held = sum(r is not None for r in c.get_many(killed))
            report.partial_batches += 0 < held < len(killed)
        for entry in c.list_indexes():
            name = entry["name"]
            if entry.get("status", "ok") != "ok":
                report.other_errors.append(f"index {name} broken: {entry.get('error')}")
                continue
            members = set(c.ids(index=name))
            held = len(c.index(name))
            report.phantoms += max(0, held - len(members))
            report.index_misses += max(0, len(members) - held)
            if "v" in entry["requires"]["spaces"]:  # each record by its own vector, batched through the index
                index = c.index(name)
                for start in range(0, len(ids), 512):
                    chunk = ids[start : start + 512]
                    batches = index.search_batch([Query(vectors={"v": vector_of(rid)}) for rid in chunk], 1)
                    report.index_misses += sum(1 for rid, hits in zip(chunk, batches) if not hits or hits[0].id != rid)


def run_crash_trials(
    directory: str | os.PathLike[str],
    trials: int,
    *,
    settings: dict[str, Any] | None = None,
    seed: int = 0,
    max_delay: float = 1.5,
    progress: Callable[[int, CrashReport], None] | None = None,
    kill_in_remove: list[str] | None = None,
) -> CrashReport:
    """Run ``trials`` kill-and-verify rounds on ``directory``; returns the totals
    (``progress(trial, report)`` is called after each round). With ``kill_in_remove``
    (index names) each writer kills itself in those indexes' ``remove`` of a record added
    since its last flush (see the module docstring) instead of being killed at random."""
    settings = settings or crash_settings()
    directory = Path(directory)
    rng = random.Random(seed)
    report = CrashReport()
    expected: dict[str, str] = {}
    gone: set[str] = set()
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for trial in range(trials):
        args = [
            *(sys.executable, "-m", "memcore.testing.crash", str(directory), json.dumps(settings)),
            *(f"t{trial}", str(rng.randrange(2**31)), json.dumps(kill_in_remove or [])),
        ]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        lines: list[str] = []
        assert proc.stdout is not None
        while time.monotonic() < deadline:  # wait until it writes, then kill at a random point
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if '"ready"' in line:
                break
        if kill_in_remove:  # the writer kills itself; the deadline is a safety net
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                report.other_errors.append(f"trial {trial}: the writer never deleted a fresh record")
        else:
            time.sleep(rng.uniform(0.0, max_delay))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        lines.extend(out.splitlines())
        if proc.returncode != -signal.SIGKILL:
            report.other_errors.append(f"trial {trial}: writer exited with {proc.returncode} before the kill: {err[-500:]}")
        phase = "start"
        pending: list[str] = []
        for line in lines:
            msg = json.loads(line)
            if "phase" in msg:
                phase = msg["phase"]
                pending = msg.get("ids", [])
            elif msg.get("ack") in ("insert", "upsert"):
                prefix = "updated" if msg["ack"] == "upsert" else "text of"
                for rid in msg["ids"]:
                    expected[rid] = f"{prefix} {rid}"
                    gone.discard(rid)
                    report.acknowledged += 1
                pending, phase = [], "between"
            elif msg.get("ack") == "delete":
                for rid in msg["ids"]:
                    expected.pop(rid, None)
                    gone.add(rid)
                pending, phase = [], "between"
        for rid in pending:  # killed inside this call: either outcome is allowed
            expected.pop(rid, None)
            gone.discard(rid)
        report.kill_phases[phase] = report.kill_phases.get(phase, 0) + 1
        _verify(directory, settings, expected, gone, report, pending if phase == "insert" else None)
        report.trials += 1
        if progress is not None:
            progress(trial, report)
    report.seconds = round(time.perf_counter() - started, 2)
    return report


if __name__ == "__main__":  # the writer child
    _child(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5]) if len(sys.argv) > 5 else [])
