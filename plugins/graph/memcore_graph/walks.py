"""Graph walks over a neighbour function: BFS, DFS, best-first expansion, shortest path.

The walks never depend on the iteration order of networkx's adjacency dicts (which a
save/load or a different insertion history can change): BFS layers are sorted, DFS
pushes sorted neighbours, the expansion heap breaks ties by node order. So the same graph
always gives the same results. Nodes are record ids (``str``) or entity nodes (``tuple``);
``order_key`` sorts a mix of both (``None`` when every node is a ``str``).

Each walk takes ``expand(node) -> iterable of neighbours`` (already filtered by relation,
direction and what may be traversed) and ``is_hit(node) -> bool`` (what may be returned;
None when every node may be).
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Hashable, Iterable, Sequence

__all__ = ["Walk", "bfs", "dfs", "best_first", "shortest_path", "node_order"]

Node = Hashable
Expand = Callable[[Any], Iterable[Any]]
IsHit = Callable[[Any], bool]


def node_order(node: Any) -> tuple[int, str]:
    """Sort key over record ids (first, by id) and entity nodes ``("entity", key)`` (after, by key)."""
    return (1, node[1]) if node.__class__ is tuple else (0, node)


def _sort(nodes: list[Any], order_key: Callable[[Any], Any] | None) -> None:
    nodes.sort(key=order_key)


class Walk:
    """The result of a walk: the hit ``nodes`` best first, their ``depths`` (hops), their
    ``scores`` (None: ``decay ** depth``), and how many nodes were ``visited``."""

    __slots__ = ("nodes", "depths", "scores", "visited")

    def __init__(self, nodes: list[Any], depths: list[int], scores: list[float] | None, visited: int):
        self.nodes = nodes
        self.depths = depths
        self.scores = scores
        self.visited = visited


def bfs(
    starts: Sequence[Any],
    expand: Expand,
    *,
    max_depth: int,
    max_nodes: int,
    want: int,
    is_hit: IsHit | None,
    order_key: Callable[[Any], Any] | None,
) -> Walk:
    """Breadth-first, layer by layer (each layer in node order); stops after ``want`` hits.

    Depth is the hop distance from the nearest start; at most ``max_nodes`` nodes are
    visited (the first ones in (depth, node order)). Hits are ordered by (depth, node
    order); ``is_hit`` None means every node is a hit. Scores are ``decay ** depth``.
    """
    layer = sorted(dict.fromkeys(starts), key=order_key)[:max_nodes]
    seen = set(layer)
    nodes: list[Any] = []
    depths: list[int] = []
    visited = 0
    depth = 0
    while layer:
        found = layer if is_hit is None else list(filter(is_hit, layer))
        room = want - len(nodes)
        if len(found) >= room:
            found = found[:room]
            nodes.extend(found)
            depths.extend([depth] * room)
            return Walk(nodes, depths, None, visited + layer.index(found[-1]) + 1)
        nodes.extend(found)
        depths.extend([depth] * len(found))
        visited += len(layer)
        if depth >= max_depth or visited >= max_nodes:
            break
        frontier: set[Any] = set()
        for node in layer:
            frontier.update(expand(node))
        frontier -= seen
        seen |= frontier
        layer = sorted(frontier, key=order_key)[: max_nodes - visited]
        depth += 1
    return Walk(nodes, depths, None, visited)


def dfs(
    starts: Sequence[Any],
    expand: Expand,
    *,
    max_depth: int,
    max_nodes: int,
    want: int,
    is_hit: IsHit | None,
    order_key: Callable[[Any], Any] | None,
) -> Walk:
    """Depth-first pre-order from each start in node order, neighbours in node order.

    A node's depth is the depth at which the DFS first reaches it (not always its hop
    distance). At most ``max_nodes`` nodes are visited. Hits are ordered by (depth,
    pre-order), so scores come best first and the DFS order decides ties; the first
    ``want`` are kept (the whole walk is needed to rank them, so ``want`` does not stop it).
    """
    seen: set[Any] = set()
    order: list[tuple[Any, int]] = []
    for start in sorted(dict.fromkeys(starts), key=order_key):
        if start in seen:
            continue
        stack = [(start, 0)]
        while stack:
            node, depth = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            order.append((node, depth))
            if len(order) >= max_nodes:
                stack.clear()
                break
            if depth < max_depth:
                nbs = [nb for nb in expand(node) if nb not in seen]
                _sort(nbs, order_key)
                stack.extend((nb, depth + 1) for nb in reversed(nbs))
        if len(order) >= max_nodes:
            break
    ranked = sorted(order, key=lambda item: item[1])  # stable: pre-order within a depth
    if is_hit is not None:
        ranked = [item for item in ranked if is_hit(item[0])]
    ranked = ranked[:want]
    return Walk([n for n, _ in ranked], [d for _, d in ranked], None, len(order))


def best_first(
    seeds: dict[Any, float],
    expand: Expand,
    *,
    max_depth: int,
    max_nodes: int,
    want: int,
    is_hit: IsHit | None,
    decay: float,
    order_key: Callable[[Any], Any],
) -> Walk:
    """Expansion from scored seeds: each node keeps its best ``seed x decay ** hops``.

    Nodes are finalised best score first (ties: fewer hops, then node order), like
    Dijkstra on ``-log`` scores, so the first time a node is popped its score is its best.
    Stops after ``want`` hits or ``max_nodes`` finalised nodes.
    """
    heap = [(-float(s), 0, order_key(n), n) for n, s in seeds.items()]
    heapq.heapify(heap)
    done: set[Any] = set()
    nodes: list[Any] = []
    depths: list[int] = []
    scores: list[float] = []
    while heap:
        neg, depth, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        score = -neg
        if is_hit is None or is_hit(node):
            nodes.append(node)
            depths.append(depth)
            scores.append(score)
            if len(nodes) >= want:
                break
        if len(done) >= max_nodes:
            break
        if depth < max_depth:
            child = -(score * decay)
            for nb in expand(node):
                if nb not in done:
                    heapq.heappush(heap, (child, depth + 1, order_key(nb), nb))
    return Walk(nodes, depths, scores, len(done))


def shortest_path(
    source: Any,
    target: Any,
    expand: Expand,
    *,
    max_depth: int | None,
    order_key: Callable[[Any], Any] | None,
) -> list[Any] | None:
    """The nodes of a shortest path (fewest hops) from ``source`` to ``target``, or None.

    BFS layer by layer in node order; each node's parent is the first node of the previous
    layer (in node order) that reaches it, so among equally short paths the choice is
    deterministic.
    """
    if source == target:
        return [source]
    parent: dict[Any, Any] = {source: None}
    layer = [source]
    depth = 0
    while layer and (max_depth is None or depth < max_depth):
        nxt = []
        for node in layer:
            for nb in expand(node):
                if nb in parent:
                    continue
                parent[nb] = node
                if nb == target:
                    path = [nb]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                nxt.append(nb)
        _sort(nxt, order_key)
        layer = nxt
        depth += 1
    return None
