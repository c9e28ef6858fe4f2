"""Crash harness, long run: a writer SIGKILLed at random points, N trials.

Each trial starts a writer process on the same collection (inserts, upserts, deletes,
flushes, closes and reopens at random), kills it with SIGKILL after a random delay,
reopens the collection and checks that every acknowledged record is in the store and
found through every index (exact, faiss Flat and HNSW). Prints one JSON object:
trials, acknowledged records, lost, resurrected, index misses, unopenable opens, the
phase each kill landed in. Not a speed benchmark: the figures are counts that must be 0.

    python bench/bench_crash.py --trials 50
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import emit, finish_environment, header, log, use_checkout

use_checkout("faiss")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="kill-and-verify rounds (the issue's figure: 50)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--max-delay", type=float, default=1.5, help="longest wait before the kill, in seconds")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    from memcore.testing.crash import crash_settings, run_crash_trials

    result = header("crash harness: SIGKILLed writer, every acknowledged record checked", args, argv=argv)
    settings = crash_settings(
        {
            "flat": {"kind": "faiss", "space": "v", "factory": "Flat"},
            "hnsw": {"kind": "faiss", "space": "v", "factory": "HNSW16", "ef_search": 256},
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        log(f"{args.trials} trials in {tmp}")
        report = run_crash_trials(
            Path(tmp) / "memory",
            args.trials,
            settings=settings,
            seed=args.seed,
            max_delay=args.max_delay,
            progress=lambda t, r: log(
                f"trial {t + 1}: acknowledged {r.acknowledged}, lost {r.lost}, misses {r.index_misses}, unopenable {r.unopenable}, kills {r.kill_phases}"
            ),
        )
    result["report"] = report.as_dict()
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
