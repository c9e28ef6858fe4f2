"""Config models of the fusions of this plugin (validated settings, unknown keys refused)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from memcore.plugin import ComponentConfig
from pydantic import Field, field_validator

from .normalize import NormalizationName

__all__ = ["ScoreFusionConfig", "WeightedConfig", "DBSFConfig", "UnionConfig", "Weight"]

Weight = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
"""A list weight: a finite number >= 0 (0 keeps the list in provenance but not in the score)."""


class ScoreFusionConfig(ComponentConfig):
    """Options shared by the score fusions (``weighted``, ``dbsf``, ``union``)."""

    weights: dict[str, Weight] = Field(default_factory=dict, description="Per-list weight by list name (index or recall list name); unlisted lists weigh 1.")
    normalize_weights: bool = Field(False, description="Divide the weights by their sum over the lists of each call (so they sum to 1).")
    std: Literal["population", "sample"] = Field(
        "population", description="Standard deviation used by the zscore and dbsf normalisations: population (divide by n) or sample (n - 1)."
    )

    @field_validator("weights")
    @classmethod
    def _finite(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name, w in value.items() if not math.isfinite(w)]
        if bad:
            raise ValueError(f"weights of {bad} are not finite numbers")
        return value


class WeightedConfig(ScoreFusionConfig):
    """``weighted``: normalise each list, then sum ``weight * normalised score`` per id."""

    kind: str = "weighted"
    normalization: NormalizationName = Field("minmax", description="Per-list normalisation: minmax, zscore, dbsf or none.")
    normalize_weights: bool = Field(True, description="Divide the weights by their sum over the lists of each call (so they sum to 1).")


class DBSFConfig(ScoreFusionConfig):
    """``dbsf``: distribution-based score fusion, 3-sigma normalisation per list, summed with weights."""

    kind: str = "dbsf"
    clip: bool = Field(False, description="Clip each normalised score to [0, 1] (Haystack and Qdrant do not).")


class UnionConfig(ScoreFusionConfig):
    """``union``: every id of every list, scored by its best ``weight * normalised score``."""

    kind: str = "union"
    normalization: NormalizationName = Field("minmax", description="Per-list normalisation: minmax, zscore, dbsf or none (raw scores, for lists on one scale).")
