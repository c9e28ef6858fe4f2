"""``[server] blas_threads``: the BLAS / OpenMP pools of a serving process, capped at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memcore_server.config import load_server_config

PROBE = """
import json, os, sys
import numpy  # loaded before the cap: threadpoolctl caps it
from memcore_server.threads import THREAD_VARIABLES, limit_compute_threads
pools = limit_compute_threads(int(sys.argv[1]))
print(json.dumps({"pools": pools, "env": {v: os.environ.get(v) for v in THREAD_VARIABLES}}))
"""


def _probe(threads: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE, str(threads)], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_default_is_one_thread_per_call() -> None:
    assert load_server_config({}).blas_threads == 1


@pytest.mark.parametrize("threads", sorted({1, min(2, os.cpu_count() or 1)}))
def test_the_cap_reaches_loaded_libraries_and_those_loaded_later(threads: int) -> None:
    seen = _probe(threads)
    blas = [p for p in seen["pools"] if p["user_api"] == "blas"]  # type: ignore[union-attr]
    assert blas, "numpy's BLAS is loaded, so threadpoolctl sees it"
    assert all(p["num_threads"] == threads for p in blas)
    assert seen["env"] == {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def test_zero_leaves_the_libraries_alone() -> None:
    seen = _probe(0)
    assert seen["env"] == {"OPENBLAS_NUM_THREADS": None, "OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None}
    assert all(p["num_threads"] >= 1 for p in seen["pools"])  # type: ignore[union-attr]
