"""Settings of the ``mmr`` stage."""

from __future__ import annotations

from typing import Literal

from memcore.plugin import ComponentConfig
from pydantic import AliasChoices, ConfigDict, Field

__all__ = ["MMRConfig"]


class MMRConfig(ComponentConfig):
    """``mmr``: maximal marginal relevance over the working list.

    ``lambda`` (also accepted as ``lambda_`` and ``lambda_param``) weighs relevance against
    redundancy: 1 keeps the relevance order, 0 picks for diversity only.
    """

    model_config = ConfigDict(populate_by_name=True)

    kind: str = "mmr"
    lambda_: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        validation_alias=AliasChoices("lambda", "lambda_param"),
        serialization_alias="lambda",
        description="Trade-off in [0, 1]: lambda * relevance - (1 - lambda) * max similarity to the hits already selected.",
    )
    top_n: int | None = Field(None, gt=0, description="How many hits to select (default: the query's k).")
    fetch_k: int | None = Field(None, gt=0, description="How many hits of the working list are candidates (default: all).")
    space: str = Field("default", description="Embedding space whose stored vectors give the similarities.")
    redundancy_floor: bool = Field(
        True,
        description="Redundancy = max(0, max similarity to the selected hits); false: Haystack's max similarity, negative values included.",
    )
    relevance: Literal["similarity", "score"] = Field(
        "similarity",
        description="similarity: cosine(query, hit) in `space`; score: the hits' incoming scores, min-max normalised.",
    )
