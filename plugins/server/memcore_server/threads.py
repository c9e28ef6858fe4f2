"""The compute thread pools of a served memory: how many threads one search may start.

A server runs many requests at once, each in a worker thread. numpy's BLAS (OpenBLAS, MKL)
and OpenMP (faiss) start their own pool of one thread per core for a matrix product, and
their idle threads spin while they wait for work: with many requests on a few cores, the
pools of concurrent searches take the cores from each other, from the event loop and from
the other processes. ``[server] blas_threads`` (default 1) caps every such pool, so the
requests run in parallel in the worker threads instead; 0 leaves the libraries' own choice
(and their environment variables).

The cap is set twice, because a library reads it when it loads: as the environment
variables a library reads then (for those not loaded yet), and through threadpoolctl for
those already loaded.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["THREAD_VARIABLES", "limit_compute_threads", "compute_threads"]

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The environment variables BLAS and OpenMP libraries read when they load."""


def limit_compute_threads(threads: int) -> list[dict[str, Any]]:
    """Cap the BLAS and OpenMP thread pools of this process at ``threads`` (0: leave them).

    Meant for a process that serves (``memcore serve`` calls it at start-up): the cap is
    process-wide. Returns :func:`compute_threads` after the change.
    """
    if threads > 0:
        for variable in THREAD_VARIABLES:
            os.environ[variable] = str(threads)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    return compute_threads()


def compute_threads() -> list[dict[str, Any]]:
    """The loaded BLAS / OpenMP libraries and their thread counts (threadpoolctl's view)."""
    from threadpoolctl import threadpool_info

    return [{k: lib.get(k) for k in ("user_api", "internal_api", "num_threads")} for lib in threadpool_info()]
