"""Settings of the ``lsh`` index and its per-query modes (``Query.extras["lsh"]``).

Both are plain pydantic models; importing this module imports nothing heavy.
"""

from __future__ import annotations

from math import comb
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memcore.plugin import ComponentConfig

__all__ = [
    "LSHIndexConfig",
    "LSHQueryMode",
    "MAX_PROBE_MASKS",
    "check_probe_radius",
    "probe_mask_count",
]

MAX_PROBE_MASKS = 4096
"""Upper bound on the bucket perturbations (codes within the probe radius) per table."""


def probe_mask_count(bits: int, radius: int) -> int:
    """How many codes lie within Hamming distance ``radius`` of a ``bits``-bit code (itself included)."""
    return sum(comb(bits, i) for i in range(min(radius, bits) + 1))


def check_probe_radius(bits: int, radius: int) -> None:
    """ValueError when probing ``radius`` around a ``bits``-bit code means too many buckets."""
    count = probe_mask_count(bits, radius)
    if count > MAX_PROBE_MASKS:
        raise ValueError(f"multi_probe={radius} with bits={bits} means {count} buckets per table (limit {MAX_PROBE_MASKS}); lower multi_probe or bits")


class LSHIndexConfig(ComponentConfig):
    """Settings of the ``lsh`` index (``[indexes.<name>] kind = "lsh"``)."""

    search_time: ClassVar[frozenset[str]] = frozenset({"multi_probe", "probes", "max_candidates", "fallback_exact", "exact_filter_below"})

    kind: str = "lsh"
    space: str = Field("default", description="Embedding space whose vectors are hashed.")
    bits: int = Field(10, ge=1, le=64, description="Hyperplanes (code bits) per hash table; a bucket is one code.")
    tables: int = Field(16, ge=1, le=64, description="Independent hash tables; candidates are the union over tables.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the random hyperplanes (persisted with the index).")
    multi_probe: int = Field(1, ge=0, le=3, description="Hamming radius of the probed buckets per table: 0 = only the query's own bucket.")
    probes: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Probe at most this many buckets per table besides the query's own, the likeliest first "
        "(smallest hyperplane margins); None = every bucket within multi_probe.",
    )
    rerank: bool = Field(True, description="Score candidates by exact cosine (else by Hamming distance of the full code).")
    store_vectors: bool = Field(True, description="Keep the normalised float32 vectors (needed by rerank); False keeps only the codes.")
    max_candidates: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="Score at most this many candidates per query (never fewer than k): the nearest by full-code "
        "Hamming distance. None = score every candidate.",
    )
    fallback_exact: bool = Field(False, description="When the buckets yield fewer than k hits, score every held (allowed) id instead.")
    exact_filter_below: int = Field(
        2048,
        ge=0,
        le=10_000_000,
        description="A filtered search whose allowed set holds at most this many of the index's ids scores them all instead of looking up buckets; 0 = never.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> "LSHIndexConfig":
        if self.rerank and not self.store_vectors:
            raise ValueError("rerank = true needs store_vectors = true (the exact cosine needs the vectors)")
        check_probe_radius(self.bits, self.multi_probe)
        return self


class LSHQueryMode(BaseModel):
    """Per-query settings read from ``Query.extras["lsh"]`` (all optional).

    ``multi_probe``, ``probes``, ``max_candidates`` and ``fallback_exact`` override the
    index's values for this query; ``exact`` scores every held (allowed) id, skipping the
    buckets (the ground truth the buckets approximate; slow on large indexes).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    multi_probe: int | None = Field(None, ge=0, le=3)
    probes: int | None = Field(None, ge=1, le=100_000)
    max_candidates: int | None = Field(None, ge=1, le=10_000_000)
    fallback_exact: bool | None = None
    exact: bool = False
