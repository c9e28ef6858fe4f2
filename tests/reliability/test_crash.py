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


def test_a_kill_between_the_store_delete_and_a_durable_index_leaves_no_phantom(tmp_path):
    """Issue 27: chroma and poincare persist every add on their own. A writer killed after the
    store committed the delete of a record added since the last flush, before those indexes
    removed it, must not leave it in them (the catch-up removes it: ``Index.durable_writes``)."""
    from memcore._plugins._host import get_registry

    installed = set(get_registry().names("indexes"))
    durable = {name: {"kind": name, "space": "v"} for name in ("chroma", "poincare") if name in installed}
    if not durable:
        import pytest

        pytest.skip("neither chroma nor poincare is installed")
    trials = int(os.environ.get("MEMCORE_CRASH_TRIALS", "4"))
    report = run_crash_trials(tmp_path / "memory", trials, settings=crash_settings(durable), seed=27, kill_in_remove=sorted(durable))
    assert report.trials == trials
    assert report.kill_phases.get("delete") == trials  # every kill landed in the index's remove
    assert report.acknowledged > 0
    assert report.ok, report.as_dict()
