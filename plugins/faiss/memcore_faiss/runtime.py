"""Process-wide faiss knobs applied around one call: OpenMP threads and the BLAS threshold.

faiss keeps both as globals. An index sets them only for the duration of its own calls
(and restores the previous values), so two indexes with different settings, or raw faiss
code in the same process, do not disturb each other.

The BLAS threshold decides when exhaustive (Flat, IVF coarse) search switches from faiss'
sequential SIMD loop to a BLAS matrix product. faiss < 1.15 compares the number of
queries with it (default 20); faiss >= 1.15 compares ``n_queries * dim`` (default 128,000,
i.e. 333 queries at d=384), which leaves batches of 10-300 queries on the slow path.
This module converts a number of queries to whichever unit the installed faiss uses.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["blas_counts_elements", "faiss_settings"]


def blas_counts_elements(faiss: Any) -> bool:
    """True when this faiss compares ``n_queries * dim`` (not ``n_queries``) to the threshold."""
    try:
        major, minor = (int(p) for p in faiss.__version__.split(".")[:2])
    except (AttributeError, ValueError):
        return True
    return (major, minor) >= (1, 15)


@contextmanager
def faiss_settings(faiss: Any, *, threads: int | None, blas_threshold: int | None) -> Iterator[None]:
    """Set OpenMP threads and/or the BLAS threshold for the enclosed calls, then restore them."""
    old_threads = old_blas = None
    if threads is not None:
        old_threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(threads)
    if blas_threshold is not None:
        old_blas = faiss.cvar.distance_compute_blas_threshold
        faiss.cvar.distance_compute_blas_threshold = blas_threshold
    try:
        yield
    finally:
        if old_blas is not None:
            faiss.cvar.distance_compute_blas_threshold = old_blas
        if old_threads is not None:
            faiss.omp_set_num_threads(old_threads)
