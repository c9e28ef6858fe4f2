"""Saving and loading the graph: one node-link JSON file, written atomically, no pickle.

The file is what ``networkx.node_link_data(graph, edges="edges")`` produces (and
``networkx.node_link_graph(data, edges="edges")`` reads), so it can be opened with
networkx directly; memcore reads it back itself, checking every edge against the links
and entities of the nodes. Record nodes carry their links (all of them, pending ones included)
and entity keys as attributes; entity node ids ``("entity", key)`` become JSON lists and
are turned back into tuples on load. ``graph.memcore_graph`` records the format and the
settings that shape the graph, for a reader of the file: the core's ``index.json`` checks
the format version and the settings (and the file's checksum) before ``load``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from memcore.plugin import atomic_write_bytes, CorruptError, read_json

__all__ = ["GRAPH_FILE", "FORMAT", "dump_graph", "read_node_link", "check_record_node"]

GRAPH_FILE = "graph.json"
FORMAT = 1
"""Version of the file layout (also the index's ``format_version``)."""


def dump_graph(graph: Any, directory: Path) -> None:
    """Write ``graph`` as node-link JSON to ``directory/graph.json`` (temp file + ``os.replace``)."""
    import networkx as nx

    data = nx.node_link_data(graph, edges="edges")
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    atomic_write_bytes(Path(directory) / GRAPH_FILE, payload.encode("utf-8"))


def _node_id(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) == 2 and value[0] == "entity" and isinstance(value[1], str):
        return ("entity", value[1])
    raise CorruptError(f"bad node id {value!r}")


def read_node_link(directory: Path, *, directed: bool, name: str) -> tuple[list[tuple[Any, dict[str, Any]]], list[tuple[Any, Any]]]:
    """Read ``graph.json``: its nodes ``(id, attributes)`` and edges ``(source, target)``, in file order.

    Entity ids come back as tuples. CorruptError when the file is unreadable or is not
    node-link JSON of a (``directed``) graph without parallel edges.
    """
    path = Path(directory) / GRAPH_FILE
    data = read_json(path, f"graph index {name!r} in {Path(directory)}")
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not isinstance(data.get("edges"), list):
        raise CorruptError(f"graph index {name!r}: {path} is not node-link JSON with 'nodes' and 'edges'")
    if data.get("directed") is not directed or data.get("multigraph") is not False:
        raise CorruptError(f"graph index {name!r}: {path} has directed={data.get('directed')!r}, multigraph={data.get('multigraph')!r}")
    try:
        nodes = [(_node_id(node.pop("id")), node) for node in data["nodes"]]
        edges = [(_node_id(edge["source"]), _node_id(edge["target"])) for edge in data["edges"]]
    except CorruptError as exc:
        raise CorruptError(f"graph index {name!r}: {path}: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise CorruptError(f"graph index {name!r}: {path} is malformed: {type(exc).__name__}: {exc}") from None
    return nodes, edges


def check_record_node(node: str, attrs: dict[str, Any]) -> tuple[dict[str, dict[str, float]], tuple[str, ...]]:
    """The (links, entity keys) of a loaded record node; CorruptError when malformed."""
    links = attrs.get("links")
    entities = attrs.get("entities")
    if not isinstance(links, dict) or not isinstance(entities, (list, tuple)):
        raise CorruptError(f"record node {node!r} lacks its links/entities")
    for target, rels in links.items():
        if not isinstance(target, str) or not target or target == node or not isinstance(rels, dict) or not rels:
            raise CorruptError(f"record node {node!r} has a bad link to {target!r}")
        for relation, weight in rels.items():
            if not isinstance(relation, str) or not relation or isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise CorruptError(f"record node {node!r} has a bad relation {relation!r} -> {weight!r}")
    if not all(isinstance(e, str) and e for e in entities):
        raise CorruptError(f"record node {node!r} has bad entity keys")
    return links, tuple(entities)
