"""The crash harness in CI: a writer SIGKILLed at random points (mid-write, flush, close,
reopen); after each kill every acknowledged record is in the store and found through
every index. ``bench/bench_crash.py --trials 50`` runs the long version."""

from __future__ import annotations

import os

from memcore.testing.crash import crash_settings, run_crash_trials


def test_sigkilled_writer_loses_nothing_acknowledged(tmp_path):
    trials = int(os.environ.get("MEMCORE_CRASH_TRIALS", "10"))
    settings = crash_settings(
        {"flat": {"kind": "faiss", "space": "v", "factory": "Flat"}, "hnsw": {"kind": "faiss", "space": "v", "factory": "HNSW16", "ef_search": 256}}
    )
    report = run_crash_trials(tmp_path / "memory", trials, settings=settings, seed=13, max_delay=1.0)
    assert report.trials == trials
    assert report.acknowledged > 0
    assert report.ok, report.as_dict()
