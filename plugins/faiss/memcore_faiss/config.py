"""Settings of the ``faiss`` index and its per-query modes (``Query.extras["faiss"]``).

Both are plain pydantic models: importing this module never imports faiss.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memcore.plugin import ComponentConfig

from .grammar import parse_factory

__all__ = ["FaissIndexConfig", "FaissQueryMode"]

MAX_EF = 4096
"""Upper bound of ef_search / ef_construction (10**9 took 41 s and 7.7 GB on 200 records)."""
MAX_NPROBE = 65536
"""Upper bound of nprobe (the largest nlist the factory grammar allows)."""
MAX_REFINE = 256
"""Upper bound of refine_k_factor (k * factor candidates are scored exactly per query)."""
DEFAULT_REFINE = 8
"""Default refine_k_factor (see docs/plugins/faiss.md for the measurements behind it)."""
MAX_PARAM = 65536.0
"""Upper bound of the values in ``params`` (efSearch-like knobs of nested quantizers)."""


class FaissIndexConfig(ComponentConfig):
    """Settings of the ``faiss`` index (``[indexes.<name>] kind = "faiss"``)."""

    search_time: ClassVar[frozenset[str]] = frozenset({"ef_search", "nprobe", "refine_k_factor"})

    kind: str = "faiss"
    space: str = Field("default", description="Embedding space whose vectors are indexed.")
    metric: Literal["cosine", "ip", "l2"] = Field(
        "cosine",
        description="cosine (vectors normalised, inner-product index), ip (raw inner product) or l2 (score = -squared distance).",
    )
    factory: str = Field(
        "Flat",
        min_length=1,
        description='Any faiss index_factory string without "IDMap": "Flat", "HNSW32", "IVF1024,Flat", "IVF256,PQ16", ...',
    )
    ef_search: int | None = Field(
        None, ge=1, le=MAX_EF, description="HNSW efSearch (search-time breadth); default: automatic, max(2k, 40 + 8 per doubling of the size above 1,000)."
    )
    ef_construction: int | None = Field(None, ge=1, le=MAX_EF, description="HNSW efConstruction (build-time breadth); default 80 (faiss' own: 40).")
    nprobe: int | None = Field(None, ge=1, le=MAX_NPROBE, description="IVF nprobe (inverted lists visited per query); faiss default 1.")
    refine_k_factor: int = Field(
        DEFAULT_REFINE,
        ge=0,
        le=MAX_REFINE,
        description="Indexes whose storage approximates the vectors (PQ, SQ, PCA/OPQ): fetch k * this many candidates and "
        "re-score them exactly with the vectors the store keeps (memory-mapped, no second copy), ranked and scored "
        "exactly; 0 keeps faiss' estimated scores. Ignored by indexes that keep exact vectors (Flat, HNSW32).",
    )
    params: dict[str, float] = Field(
        default_factory=dict,
        description='Extra faiss ParameterSpace settings applied to the index, e.g. {"quantizer_efSearch" = 64}.',
    )
    min_train: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="Vectors collected (and searched exactly) before a trainable index (IVF, PQ, SQ...) is trained; "
        "default: 39 per centroid as faiss recommends (39*nlist for IVF, 39*2^nbits for PQ), else 1000.",
    )
    train_sample: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="At most this many of the collected vectors train the index (a seeded random sample; all of them are "
        "added): default max(256 per centroid, 65536), the most faiss' k-means samples anyway; the rest only cost time.",
    )
    compact_fraction: float = Field(
        0.2,
        gt=0.0,
        le=1.0,
        description="Indexes without remove_ids (HNSW) keep removed vectors as tombstones; above this fraction of "
        "tombstones the index is rebuilt from its live vectors.",
    )
    exact_filter_below: int = Field(
        2048,
        ge=0,
        le=10_000_000,
        description="When an allowed-id set holds at most this many live ids, search them exactly (numpy over their "
        "vectors) instead of a filtered faiss search.",
    )
    exact_filter_fraction: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="Also search exactly when an allowed-id set holds at most this fraction of the live ids (HNSW and Flat "
        "score the allowed rows in place with a faiss selector; measured recall 1.0 where a filtered graph search loses some).",
    )
    gather_budget_mb: float = Field(
        64.0,
        ge=0.0,
        le=1_000_000.0,
        description="Cached allowed-id sets scored exactly that hold more than 8,192 live ids keep a gathered copy of their "
        "vectors (one matrix-vector product per query instead of a selector scan of the whole storage) while the copies "
        "of this index stay within this many MiB; 0 turns it off.",
    )
    filter_ef_max: int = Field(
        1024,
        ge=1,
        le=65536,
        description="Under a where filter above the exact thresholds, HNSW searches with ef_search / selectivity, at most this.",
    )
    score_threshold: float | None = Field(None, allow_inf_nan=False, description="Drop hits whose converted score is below this value.")
    omp_threads: int | None = Field(None, ge=1, le=1024, description="OpenMP threads for this index's faiss calls (default: leave faiss' setting).")
    blas_min_queries: int | None = Field(
        16,
        ge=1,
        le=1_000_000,
        description="Batched exhaustive searches of at least this many queries use BLAS (faiss' distance_compute_blas_threshold, "
        "set around each batched call); None leaves faiss' own threshold.",
    )

    @field_validator("factory")
    @classmethod
    def _no_idmap(cls, value: str) -> str:
        value = value.strip()
        if "IDMap" in value:
            raise ValueError('leave "IDMap" out of the factory string: the index maps record ids to faiss ids itself')
        parse_factory(value)  # only the bounded grammar reaches faiss: no string may abort the process
        return value

    @field_validator("params")
    @classmethod
    def _param_names(cls, value: dict[str, float]) -> dict[str, float]:
        for name, number in value.items():
            if not name or not all(c.isalnum() or c == "_" for c in name):
                raise ValueError(f"invalid faiss parameter name {name!r}")
            if not 0.0 <= number <= MAX_PARAM:  # NaN fails too
                raise ValueError(f"faiss parameter {name}={number} is outside 0..{MAX_PARAM:g}")
        return value


class FaissQueryMode(BaseModel):
    """Per-query settings read from ``Query.extras["faiss"]`` (all optional).

    ``ef_search`` (HNSW) and ``nprobe`` (IVF) override the index's values for this query,
    ``refine_k_factor`` overrides the index's refine factor (indexes with approximate
    storage), ``exact`` scores every candidate exactly with numpy over the stored vectors
    (slow on large indexes; meant for measuring recall), ``score_threshold`` overrides the
    configured threshold.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ef_search: int | None = Field(None, ge=1, le=MAX_EF)
    nprobe: int | None = Field(None, ge=1, le=MAX_NPROBE)
    refine_k_factor: int | None = Field(None, ge=0, le=MAX_REFINE)
    exact: bool = False
    score_threshold: float | None = Field(None, allow_inf_nan=False)
