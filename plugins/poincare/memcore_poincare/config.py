"""Settings of the ``poincare`` index, its query modes and the ``hyperamy`` service.

Plain pydantic models: importing this module imports no chromadb.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memcore.plugin import ComponentConfig

from memcore_chroma_support import ChromaConnection
from .physics import EvolutionLaw

__all__ = ["PoincareIndexConfig", "PoincareQueryMode", "HyperAmyServiceConfig", "QUERY_MODE_KEY"]

QUERY_MODE_KEY = "poincare"
"""The key of ``Query.extras`` holding this index kind's query modes."""


class PoincareIndexConfig(ComponentConfig):
    """``[indexes.<name>] kind = "poincare"``: records as particles of the Poincaré ball."""

    kind: str = "poincare"
    #: options that change how the index searches, not what it stores: changed on reopen without a rebuild
    search_time: ClassVar[frozenset[str]] = frozenset({"cone_width", "max_neighbors", "neighbor_penalty", "mirror", "cone"})
    space: str = Field("default", description="Embedding space giving each record's direction.")
    connection: ChromaConnection = Field(default_factory=ChromaConnection, description="Embedded (inside the index folder) or a Chroma server.")
    collection_prefix: str = Field("hyperamy", description="Chroma collections are named <prefix>-<index name>-<12 hex>.")
    curvature: float = Field(1.0, gt=0, allow_inf_nan=False, description="c: the ball has curvature -c and radius 1/sqrt(c).")
    scaling_factor: float = Field(2.0, gt=0, allow_inf_nan=False, description="Intensity multiplier of the projection radius.")
    f: EvolutionLaw = Field(default_factory=EvolutionLaw, description="Evolution law of the intensity v (identity, exponential, power).")
    g: EvolutionLaw = Field(default_factory=EvolutionLaw, description="Evolution law of the temperature T.")
    v_key: str = Field("v", min_length=1, description="Record metadata key of the initial intensity.")
    T_key: str = Field("T", min_length=1, description="Record metadata key of the initial temperature.")
    born_key: str = Field("born", min_length=1, description="Record metadata key of the birth time (default: the record's created_at).")
    default_v: float = Field(1.0, ge=0, allow_inf_nan=False, description="Intensity of records (and queries) without one.")
    default_T: float = Field(1.0, ge=0, allow_inf_nan=False, description="Temperature of records (and queries) without one.")
    cone_width: int | None = Field(None, ge=1, description="Step 1 candidates; default max(k, min(N, max(50, ceil(10 ln N)))).")
    max_neighbors: int = Field(20, ge=0, description="Step 3: links expanded per result (and max_neighbors*k in all).")
    neighbor_penalty: float = Field(1.1, ge=1.0, allow_inf_nan=False, description="Step 3: a neighbour's distance is multiplied by this.")
    mirror: Literal["auto", "on", "off"] = Field(
        "auto",
        description="In-memory particle mirror for the cone and neighbour steps (exact cone, no Chroma round trip); auto: on embedded, off on a server.",
    )
    cone: Literal["auto", "chroma"] = Field(
        "auto", description="Step 1: auto = the mirror's exact cosine cone when the mirror is on; chroma = Chroma's HNSW query (ids only) always."
    )

    @field_validator("collection_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value or len(value) > 200 or not value[0].isalnum() or not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in value):
            raise ValueError("collection_prefix: 1-200 characters of [a-zA-Z0-9._-], starting alphanumeric")
        return value


class PoincareQueryMode(BaseModel):
    """Per-query settings in ``Query.extras["poincare"]`` (all optional): the query
    particle's ``v``, ``T``, ``born`` and the evaluation time ``t_now`` (default now), and
    overrides of ``cone_width``, ``max_neighbors``, ``neighbor_penalty``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: float | None = Field(None, ge=0, allow_inf_nan=False)
    T: float | None = Field(None, ge=0, allow_inf_nan=False)
    born: float | None = Field(None, allow_inf_nan=False)
    t_now: float | None = Field(None, allow_inf_nan=False)
    cone_width: int | None = Field(None, ge=1)
    max_neighbors: int | None = Field(None, ge=0)
    neighbor_penalty: float | None = Field(None, ge=1.0, allow_inf_nan=False)


class HyperAmyServiceConfig(ComponentConfig):
    """``[service] kind = "hyperamy"``: an emotional memory over one ``poincare`` index."""

    kind: str = "hyperamy"
    index: str = Field("hyperamy.particles", min_length=1, description="Name of the poincare index (created when missing).")
    space: str | None = Field(None, description="Space of a bare vector argument (default: the only space).")
    default_v: float = Field(1.0, ge=0, allow_inf_nan=False, description="Intensity of items inserted without v (and of queries).")
    default_T: float = Field(1.0, ge=0, allow_inf_nan=False, description="Temperature of items inserted without T.")
    index_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the poincare index (connection, curvature, f, g...); v/T/born keys are the service's own.",
    )
