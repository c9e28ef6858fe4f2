"""Query modes of the graph index: ``Query.extras["graph"]`` parsed by pydantic into a typed mode.

An index reads its query mode from ``Query.extras[<its kind>]`` and ignores every other
key of ``extras`` (they belong to other indexes or stages, so one query can carry modes
for several indexes of a pipeline). For this index:
``extras["graph"] = {"mode": "traverse" | "expand" | "path" | "text", ...}``; without a
``graph`` key, or without ``mode`` in it, the query is a ``text`` query. A non-dict under
``graph``, unknown keys inside it, wrong types, NaN scores or an unknown mode are a
:class:`memcore.ValidationError` naming the index and the key (``extras.graph.<field>``).
Each mode knows how to run itself against a :class:`~memcore_graph.index.GraphIndex`
(``run``), so the index has no branch per mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Collection as AbstractSet, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from memcore.plugin import Hit

if TYPE_CHECKING:
    from .index import GraphIndex

__all__ = ["QUERY_MODE_KEY", "TraverseMode", "ExpandMode", "PathMode", "TextMode", "GraphMode", "DEFAULT_MODE"]

QUERY_MODE_KEY = "graph"
"""The key of ``Query.extras`` that holds this index kind's query mode."""

NodeId = Annotated[StrictStr, Field(min_length=1)]
Direction = Literal["out", "in", "both"]
SeedScore = Annotated[Union[StrictInt, StrictFloat], Field(ge=0, allow_inf_nan=False)]


class _Mode(BaseModel):
    """Base of the modes: unknown keys are errors, numbers and flags are not coerced from strings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def run(self, index: "GraphIndex", query: Any, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """The hits of this mode (implemented per mode)."""
        raise NotImplementedError


class _Walk(_Mode):
    """Options shared by the modes that walk outwards from start nodes."""

    max_depth: StrictInt | None = Field(None, ge=0, le=64, description="Hops to walk (default: the index's max_depth).")
    max_nodes: StrictInt | None = Field(None, ge=1, le=10_000_000, description="Nodes to visit at most (default: the index's max_nodes).")
    relations: list[NodeId] | None = Field(None, min_length=1, description="Follow only links of these relations (entity edges are 'mentions').")
    direction: Direction = Field("out", description="Directed graphs: follow links forwards ('out'), backwards ('in') or both.")
    pass_through: StrictBool = Field(False, description="Walk through records outside `allowed` (never returning them).")


class TraverseMode(_Walk):
    """``{"mode": "traverse", "start": [ids], "algorithm": "bfs"|"dfs", ...}``: a walk from start records.

    Score ``decay ** depth`` (start nodes: 1.0), ``raw`` = depth. Hits come best first;
    equal depths keep the traversal order (ids in BFS layers, pre-order in DFS).
    """

    mode: Literal["traverse"]
    start: list[NodeId] = Field(min_length=1, description="Start record ids (ids the index does not hold are ignored).")
    algorithm: Literal["bfs", "dfs"] = "bfs"
    include_start: StrictBool = Field(True, description="Return the start records themselves (score 1.0).")

    def run(self, index: "GraphIndex", query: Any, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return index.run_traverse(self, k, allowed)


class ExpandMode(_Walk):
    """``{"mode": "expand", "seeds": {id: score}, ...}``: multi-hop expansion of scored seeds.

    A node's score is the best ``seed score x decay ** hops`` over every seed and path.
    """

    mode: Literal["expand"]
    seeds: dict[NodeId, SeedScore] = Field(min_length=1, description="Seed record id -> its score (finite, >= 0).")
    include_seeds: StrictBool = Field(True, description="Return the seeds themselves (with their own score).")

    def run(self, index: "GraphIndex", query: Any, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return index.run_expand(self, k, allowed)


class PathMode(_Mode):
    """``{"mode": "path", "source": id, "target": id}``: the records of a shortest path, in order.

    Shortest by number of hops (link weights are not used); among equally short paths the
    one through the smallest ids (layer by layer) is chosen. Score ``decay ** hops`` from
    the source.
    """

    mode: Literal["path"]
    source: NodeId
    target: NodeId
    max_depth: StrictInt | None = Field(None, ge=1, le=64, description="Longest path to look for, in hops (default: unlimited).")
    relations: list[NodeId] | None = Field(None, min_length=1)
    direction: Direction = "out"
    pass_through: StrictBool = False

    def run(self, index: "GraphIndex", query: Any, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return index.run_path(self, k, allowed)


class TextMode(_Walk):
    """No ``mode`` (or ``"text"``): entities and record ids named in the query text pick seeds, then expand.

    A record's seed score is the share of the query's known names it matches (1.0 when it
    matches them all, or when the text names the record's id).
    """

    mode: Literal["text"]

    def run(self, index: "GraphIndex", query: Any, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        return index.run_text(self, query, k, allowed)


GraphMode = Annotated[Union[TraverseMode, ExpandMode, PathMode, TextMode], Field(discriminator="mode")]
DEFAULT_MODE = {"mode": "text"}
"""The entry a query without ``mode`` (or without ``extras["graph"]``) stands for: a text query."""
