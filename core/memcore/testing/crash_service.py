"""The crash harness for a memory *service*: a writer inserting through the service
(``Memory.insert``: tiers, migrations, evictions, summaries) SIGKILLed at random points.

:func:`run_service_crash_trials` is :func:`memcore.testing.crash.run_crash_trials` for the
service layer: a child (``python -m memcore.testing.crash_service``) opens the memory with
the given settings and inserts turns (explicit ids, a ``session`` that changes every few
turns) through the service, reopening now and then, printing each id after the call
returned (acknowledged); the parent kills it after a random delay, reopens the memory and
checks that every acknowledged item is stored, that the service reports no inconsistency
(:meth:`memcore.Memory.check_service`) and whatever ``verify(memory)`` adds.

``kill_after`` (an index name) makes the crash point exact: in the given trials the child
kills itself right after the first ``Collection.insert`` into that index returned -- e.g.
``memoryos.user_knowledge``, where an eviction commits the summary of a segment, to show
that nothing is left half-done between that commit and the next one.

Used by memcore-services' tests (``memoryos`` evictions, ``hierarchical`` migrations).
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

__all__ = ["ServiceCrashReport", "run_service_crash_trials"]


@dataclass
class ServiceCrashReport:
    """Totals over the trials."""

    trials: int = 0
    acknowledged: int = 0
    lost: int = 0
    unopenable: int = 0
    self_killed: int = 0
    """Trials whose child reached the ``kill_after`` point and killed itself."""
    service_problems: list[str] = field(default_factory=list)
    other_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no promise was broken."""
        return not (self.lost or self.unopenable or self.service_problems or self.other_errors)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe totals."""
        return {**self.__dict__, "ok": self.ok}


def turn(prefix: str, n: int) -> tuple[str, str, dict[str, Any]]:
    """The ``n``-th turn a child inserts: (id, text, metadata); the session changes every 5 turns."""
    words = ("budget", "garden", "violin", "harbour", "sourdough", "tennis", "lisbon", "pixel", "meeting", "tomato")
    text = f"{prefix} turn {n}: " + " ".join(words[(n * 7 + k * 3) % len(words)] for k in range(4))
    return f"{prefix}-{n}", text, {"session": f"{prefix}-s{n // 5}", "n": n}


def _child(directory: str, settings: dict[str, Any], prefix: str, seed: int, kill_after: str) -> None:
    """The writer: inserts until killed; prints ``{"ready"}`` once open and ``{"ack": id}`` after each insert."""
    import memcore

    rng = random.Random(seed)

    def say(**msg: Any) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    def arm(memory: Any) -> None:
        if not kill_after:
            return
        collection = memory.collection
        original = collection.insert

        def insert(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            indexes = kwargs.get("indexes")
            if indexes is not None and kill_after in ([indexes] if isinstance(indexes, str) else list(indexes)):
                say(phase="self_kill")
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        collection.insert = insert

    memory = memcore.open(settings, path=directory)
    arm(memory)
    say(phase="ready")
    n = 0
    while True:
        rid, text, metadata = turn(prefix, n)
        n += 1
        memory.insert(text, metadata=metadata, id=rid)
        say(ack=rid, text=text)
        if rng.random() < 0.03:
            memory.close()
            memory = memcore.open(settings, path=directory)
            arm(memory)


def _verify(directory: Path, settings: dict[str, Any], expected: dict[str, str], report: ServiceCrashReport, verify: Callable[[Any], list[str]] | None) -> None:
    import memcore

    try:
        memory = memcore.open(settings, path=directory)
    except Exception as exc:  # noqa: BLE001 - any failure to open is what we count
        report.unopenable += 1
        report.other_errors.append(f"open: {type(exc).__name__}: {exc}")
        return
    with memory:
        ids = list(expected)
        for rid, record in zip(ids, memory.collection.get_many(ids)):
            if record is None or record.text != expected[rid]:
                report.lost += 1
        report.service_problems += [str(p) for p in memory.check_service()]
        if verify is not None:
            report.other_errors += verify(memory)


def run_service_crash_trials(
    directory: str | os.PathLike[str],
    trials: int,
    settings: dict[str, Any],
    *,
    seed: int = 0,
    max_delay: float = 1.5,
    kill_after: str | None = None,
    kill_after_trials: int = 0,
    verify: Callable[[Any], list[str]] | None = None,
) -> ServiceCrashReport:
    """Run ``trials`` kill-and-verify rounds on ``directory`` (the first ``kill_after_trials``
    end at the ``kill_after`` point instead of a random delay); returns the totals."""
    directory = Path(directory)
    rng = random.Random(seed)
    report = ServiceCrashReport()
    expected: dict[str, str] = {}
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for trial in range(trials):
        exact = kill_after if (kill_after and trial < kill_after_trials) else ""
        args = [sys.executable, "-m", "memcore.testing.crash_service", str(directory), json.dumps(settings), f"t{trial}", str(rng.randrange(2**31)), exact]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if '"ready"' in line:
                break
        if exact:
            try:
                proc.wait(timeout=120)  # it kills itself at the point
            except subprocess.TimeoutExpired:
                report.other_errors.append(f"trial {trial}: the child never reached an insert into {exact!r}")
        else:
            time.sleep(rng.uniform(0.0, max_delay))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        lines.extend(out.splitlines())
        if proc.returncode != -signal.SIGKILL:
            report.other_errors.append(f"trial {trial}: writer exited with {proc.returncode} before the kill: {err[-500:]}")
        for line in lines:
            msg = json.loads(line)
            if "ack" in msg:
                expected[msg["ack"]] = msg["text"]
                report.acknowledged += 1
            elif msg.get("phase") == "self_kill":
                report.self_killed += 1
        _verify(directory, settings, expected, report, verify)
        report.trials += 1
    report.seconds = round(time.perf_counter() - started, 2)
    return report


if __name__ == "__main__":  # the writer child
    _child(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
