"""The crash suite on PostgreSQL: ``memcore.testing``'s harness SIGKILLs a writer process at
random points (mid-batch included) on a postgres memory, then reopens it and checks every
promise: no acknowledged write lost, no deleted record back, no insert batch half there, and
the in-process indexes of the reopened memory hold exactly their members and find every
acknowledged record. Bounded trials (a few minutes in CI); ``bench/bench_crash.py`` runs more."""

from __future__ import annotations

import os
from pathlib import Path

from memcore.testing.crash import crash_settings, run_crash_trials

TRIALS = int(os.environ.get("MEMCORE_PG_CRASH_TRIALS", "12"))


def test_sigkill_mid_batch_on_postgres_loses_nothing_acknowledged(pg_url: str, schema: str, pg_dir: Path) -> None:
    settings = {**crash_settings(), "store": {"kind": "postgres", "url": pg_url, "schema": schema}}
    report = run_crash_trials(pg_dir, TRIALS, settings=settings, seed=22, max_delay=2.0)
    print(f"postgres crash trials: {report.as_dict()}")
    assert report.trials == TRIALS and report.acknowledged > 0
    assert report.killed_batches > 0  # some kills landed inside an insert batch
    assert report.ok, report.as_dict()
