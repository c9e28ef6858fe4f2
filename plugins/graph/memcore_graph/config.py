"""Settings of the ``graph`` index (``indexes.<name> = {kind = "graph", ...}``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memcore.plugin import ComponentConfig

__all__ = ["GraphIndexConfig"]


class GraphIndexConfig(ComponentConfig):
    """Settings of the ``graph`` index: a networkx graph derived from ``Record.links``."""

    kind: str = "graph"
    directed: bool = Field(True, description="A link A -> B is a directed edge (traversals follow it A to B by default); false: an undirected graph.")
    decay: float = Field(0.7, gt=0.0, le=1.0, description="Score factor per hop: score = seed score x decay ** hops.")
    max_depth: int = Field(2, ge=0, le=64, description="Default number of hops a search walks from its start nodes (a query may override it).")
    max_nodes: int = Field(
        1000, ge=1, le=10_000_000, description="Default bound on the nodes one search visits, entity nodes included (a query may override it)."
    )
    default_weight: float = Field(1.0, allow_inf_nan=False, description="Weight of the record-entity edges ('mentions'); links carry their own weight.")
    entity_extraction: Literal["rule", "spacy", "none", "llm"] = Field(
        "rule",
        description="How entities are found in record texts: capitalised phrases and quoted terms, a spaCy pipeline, none, "
        "or the LLM named by 'llm' (fallback: rule).",
    )
    llm: str = Field(
        "default", min_length=1, description="The LLM ([llms.<name>]) of entity_extraction = 'llm'; an undeclared 'default' means the rule fallback."
    )
    entity_nodes: bool = Field(True, description="Add a node per entity, linked to the records mentioning it, so co-mentions connect records.")
    spacy_model: str = Field("en_core_web_sm", min_length=1, description="spaCy pipeline (package name or directory) for entity_extraction = 'spacy'.")
    name_field: str | None = Field(
        "name", description="Metadata field whose string value is also an entity of the record (a node name queries can use); null: none."
    )
