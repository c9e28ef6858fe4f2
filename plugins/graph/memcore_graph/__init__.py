"""memcore-graph: a graph index over record links (networkx).

Registers, through memcore's hooks:

- ``register_indexes``: the index kind ``graph`` (:class:`~memcore_graph.index.GraphIndex`,
  settings :class:`~memcore_graph.config.GraphIndexConfig`): records are nodes,
  ``Record.links`` are edges (plus optional entity nodes found in the texts), searched by
  traversal, multi-hop expansion, shortest path (query modes in ``Query.extras["graph"]``)
  or the names in a query text; score = seed score x decay^hops;
- ``register_stages``: the pipeline stage ``graph_recall``
  (:class:`~memcore_graph.stage.GraphRecall`), which expands earlier hits along a graph index.

This module imports no heavy library: networkx (and spaCy, when configured) are imported
by the index when one is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import memcore
import memcore.plugin
from memcore.plugin import IndexFactory, Register, StageFactory

from .config import GraphIndexConfig
from .stage import GraphRecall, GraphRecallConfig

if TYPE_CHECKING:
    from .index import GraphIndex

__all__ = ["GraphIndexConfig", "GraphIndex", "GraphRecall", "GraphRecallConfig", "register_indexes", "register_stages"]
__version__ = "0.1.0"


def __getattr__(name: str) -> type[GraphIndex]:
    """``GraphIndex`` on first use (keeps ``import memcore_graph`` light)."""
    if name == "GraphIndex":
        from .index import GraphIndex

        return GraphIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _graph_index(config: GraphIndexConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``graph`` index (imports networkx on first use)."""
    from .index import GraphIndex

    return GraphIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``graph`` index kind."""
    register("graph", _graph_index, GraphIndexConfig)


@memcore.hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the ``graph_recall`` pipeline stage."""
    register("graph_recall", GraphRecall, GraphRecallConfig)
