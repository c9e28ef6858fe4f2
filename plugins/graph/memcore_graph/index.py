"""The ``graph`` index: a networkx graph derived from the records' links (and entities).

Nodes are the records of this index (their ids) plus, with ``entity_nodes``, one node
``("entity", key)`` per entity some record mentions. An edge exists for a link when both
ends are in the index; a link whose target is not (yet) in the index is kept *pending*
and becomes an edge when the target arrives (the collection does not re-add the source
then, so the index remembers it). Removing a record removes its node, its edges and any
entity node no other record mentions; links pointing at it become pending again.

Searches are query modes in ``Query.extras["graph"]`` (:mod:`.modes`; other keys of
``extras`` are ignored): ``traverse``, ``expand``, ``path``, and ``text`` (the default:
names in the query text pick the start records).
Scores are ``seed score x decay ** hops``; ``raw`` is the number of hops.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Collection as AbstractSet, Iterable, Iterator, Sequence, TypedDict

from memcore.plugin import CorruptError, Hit, Index, IndexContext, Query, Record, Requirements, validate_k, ValidationError

from .config import GraphIndexConfig
from .entities import LLMExtractor, make_extractor
from .modes import DEFAULT_MODE, ExpandMode, GraphMode, PathMode, TextMode, TraverseMode, _Mode
from .names import name_key
from .persistence import FORMAT, check_record_node, dump_graph, read_node_link
from .seeds import text_seeds
from .validation import check_records
from .walks import Walk, best_first, bfs, dfs, node_order, shortest_path

__all__ = ["GraphIndex", "entity_node"]

_TRAVERSALS = {"bfs": bfs, "dfs": dfs}


def entity_node(key: str) -> tuple[str, str]:
    """The node id of the entity with matching key ``key`` (see :func:`memcore_graph.names.name_key`)."""
    return ("entity", key)


class _RecordNode(TypedDict):
    """The attributes of a record's node: its links (target -> {relation: weight}) and entity keys."""

    links: dict[str, dict[str, float]]
    entities: tuple[str, ...]


def _is_record(node: Any) -> bool:
    return node.__class__ is str


SHARED_RELATIONS = 4_096
"""Distinct single-relation dicts shared between links (see ``GraphIndex._shared``)."""

BULK = 2_000
"""Batches of at least this many records are added with the cyclic GC paused."""


@contextmanager
def _gc_paused(active: bool = True) -> Iterator[None]:
    """Pause Python's cyclic garbage collector during a bulk build.

    A graph is millions of small dicts and tuples that are never garbage; without the
    pause, every generation-2 collection rescans all of them and a 100k-node load or
    build takes about twice as long. The previous state is restored afterwards.
    """
    if not active or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class GraphIndex(Index):
    """Records as nodes of a networkx graph, edges from their links; searched by walks.

    ``graph`` exposes the networkx graph (read it, never change it): record nodes carry
    ``links`` (target -> {relation: weight}, pending links included) and ``entities``;
    edges carry ``relations`` ({relation: weight}; ``mentions`` for entity edges).
    """

    score_name = "seed score x decay^hops"
    score_range = (0.0, None)
    format_version = FORMAT
    # The index reads record texts (entities) and links. It does not declare text=True:
    # records always carry their text, and validate_query decides itself when a query
    # needs text (the default text mode does; traverse/expand/path in extras["graph"] do not).
    requires = Requirements(links=True)

    def __init__(self, config: GraphIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.config = config
        llm = None
        if config.entity_extraction == "llm" and context.llms is not None:
            llm = context.llms.resolve(config.llm, f"indexes.{context.name}.llm")
        self._extractor = make_extractor(config.entity_extraction, config.spacy_model, llm)
        self._mentions_edge = {"mentions": float(config.default_weight)}
        self._directed = config.directed
        self._shared_rels: dict[tuple[str, float], dict[str, float]] = {}
        self.last_visited = 0
        """Nodes the last search visited (a diagnostic for benchmarks)."""
        self._reset()

    # -- state ---------------------------------------------------------------------------

    def _fingerprint(self) -> dict[str, Any]:
        c = self.config
        fp: dict[str, Any] = {
            "format": FORMAT,
            "directed": c.directed,
            "entity_extraction": c.entity_extraction,
            "entity_nodes": c.entity_nodes,
            "name_field": c.name_field,
        }
        if c.entity_extraction == "spacy":
            fp["spacy_model"] = c.spacy_model
        if c.entity_extraction == "llm":
            fp["llm"] = c.llm
        return fp

    def _reset(self) -> None:
        import networkx as nx

        self._graph = nx.DiGraph() if self.config.directed else nx.Graph()
        self._graph.graph["memcore_graph"] = self._fingerprint()
        self._out: dict[str, dict[str, dict[str, float]]] = {}  # record -> target -> {relation: weight}
        self._pending: dict[str, set[str]] = {}  # absent target -> records linking to it
        self._mentions: dict[str, set[str]] = {}  # entity key -> records mentioning it
        self._name_len = 1  # most words in an entity key (bounds the query n-grams)

    @property
    def graph(self) -> Any:
        """The networkx graph (``DiGraph`` or ``Graph``); read-only by convention."""
        return self._graph

    def pending_links(self) -> dict[str, list[str]]:
        """Targets not in the index -> the records whose links wait for them (sorted)."""
        return {t: sorted(srcs) for t, srcs in sorted(self._pending.items())}

    def entities(self, id: str) -> tuple[str, ...]:
        """The entity keys record ``id`` mentions (empty when it mentions none or is absent)."""
        return tuple(self._graph.nodes[id]["entities"]) if id in self._out else ()

    def mentions(self, key: str) -> list[str]:
        """The records mentioning the entity with matching key ``key`` (sorted)."""
        return sorted(self._mentions.get(key, ()))

    # -- writes --------------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        """Reject records the graph cannot hold: bad ids, texts or links (before anything changes)."""
        check_records(records, self.name)

    def _entities_of(self, record: Record) -> tuple[str, ...]:
        keys = dict.fromkeys(self._extractor.extract(record.text))
        field = self.config.name_field
        if field is not None:
            value = record.metadata.get(field) if isinstance(record.metadata, dict) else None
            key = name_key(value) if isinstance(value, str) else None
            if key is not None:
                keys.setdefault(key, None)
        return tuple(keys)

    def _shared(self, rels: dict[str, float]) -> dict[str, float]:
        """One shared dict per common single-relation link ({"related": 1.0}...), to save memory.

        Relation dicts are never changed in place, so records may share them. At most
        :data:`SHARED_RELATIONS` distinct ones are kept.
        """
        if len(rels) != 1:
            return rels
        key = next(iter(rels.items()))
        found = self._shared_rels.get(key)
        if found is None and len(self._shared_rels) < SHARED_RELATIONS:
            self._shared_rels[key] = found = rels
        return found or rels

    def _relations(self, u: Any, v: Any) -> dict[str, float]:
        """The ``relations`` of the edge u -> v: the links u -> v (undirected: and v -> u, best weight).

        Record u links to v (every caller passes the linking record first). Entity edges have
        the one relation ``mentions``.
        """
        if u.__class__ is tuple or v.__class__ is tuple:
            return self._mentions_edge
        rels = self._out[u][v]
        if self._directed:
            return rels
        back = self._out[v].get(u)
        if not back:
            return rels
        merged = dict(back)
        for rel, w in rels.items():
            merged[rel] = max(w, merged.get(rel, w))
        return merged

    def add(self, records: Sequence[Record]) -> None:
        """Add (or replace) records: nodes, their link edges, their entities; resolve pending links."""
        if not records:
            return
        self.validate(records)
        with _gc_paused(len(records) >= BULK):
            self._add(records)

    def _add(self, records: Sequence[Record]) -> None:
        batch: dict[str, Record] = {}
        for r in records:  # a batch may repeat an id: the last one wins
            batch[r.id] = r
        nodes: list[tuple[str, _RecordNode]] = []  # everything is computed (entity extraction may fail) before anything changes
        for rid, r in batch.items():
            out: dict[str, dict[str, float]] = {}
            for link in r.links:
                rels = out.get(link.target)
                if rels is None:
                    out[link.target] = self._shared({link.relation: float(link.weight)})
                else:  # relation dicts may be shared: never change one in place
                    out[link.target] = {**rels, link.relation: float(link.weight)}
            nodes.append((rid, {"links": out, "entities": self._entities_of(r)}))
        present = [rid for rid in batch if rid in self._out]
        if present:
            self.remove(present)
        graph, out_all = self._graph, self._out
        for rid, attrs in nodes:
            out_all[rid] = attrs["links"]
        graph.add_nodes_from(nodes)
        edges: list[tuple[Any, Any, dict[str, Any]]] = []
        for rid, attrs in nodes:
            for target in attrs["links"]:
                if target in out_all:
                    edges.append((rid, target, {"relations": self._relations(rid, target)}))
                else:
                    self._pending.setdefault(target, set()).add(rid)
            waiting = self._pending.pop(rid, None)
            for src in sorted(waiting or ()):
                edges.append((src, rid, {"relations": self._relations(src, rid)}))
            self._add_mentions(rid, attrs["entities"], edges)
        graph.add_edges_from(edges)

    def _add_mentions(self, rid: str, keys: Iterable[str], edges: list[tuple[Any, Any, dict[str, Any]]]) -> None:
        for key in keys:
            holders = self._mentions.get(key)
            if holders is None:
                holders = self._mentions[key] = set()
                self._name_len = max(self._name_len, key.count(" ") + 1)
            holders.add(rid)
            if self.config.entity_nodes:
                node = entity_node(key)
                edges.append((rid, node, {"relations": self._mentions_edge}))
                if self.config.directed:
                    edges.append((node, rid, {"relations": self._mentions_edge}))

    def remove(self, ids: Sequence[str]) -> None:
        """Remove records with their edges; links to them become pending; orphan entity nodes go."""
        graph = self._graph
        directed = self.config.directed
        for rid in ids:
            out = self._out.pop(rid, None)
            if out is None:
                continue
            for target in out:  # its own pending links disappear with it
                waiting = self._pending.get(target)
                if waiting is not None:
                    waiting.discard(rid)
                    if not waiting:
                        del self._pending[target]
            around = graph._pred[rid] if directed else graph._adj[rid]
            sources = [u for u in around if u.__class__ is str and rid in self._out[u]]
            if sources:
                self._pending.setdefault(rid, set()).update(sources)
            for key in graph.nodes[rid]["entities"]:
                holders = self._mentions.get(key)
                if holders is None:
                    continue
                holders.discard(rid)
                if not holders:
                    del self._mentions[key]
                    if self.config.entity_nodes:
                        graph.remove_node(entity_node(key))
            graph.remove_node(rid)

    def __len__(self) -> int:
        return len(self._out)

    # -- searching -----------------------------------------------------------------------

    def validate_query(self, query: Query) -> None:
        """Parse the query mode from ``extras["graph"]`` (ValidationError when malformed); a text query needs text."""
        self._parse(query)

    def _parse(self, query: Query) -> _Mode:
        mode: _Mode = self.mode(query, GraphMode, defaults=DEFAULT_MODE, label=f"graph index {self.name!r}")
        if isinstance(mode, TextMode) and not (query.text and query.text.strip()):
            raise ValidationError(
                f'graph index {self.name!r}: the query has no text; give text (names to start from) or a mode in extras["graph"] (traverse, expand, path)'
            )
        return mode

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        """Run the query's mode; at most ``k`` hits among ``allowed`` (all when None), best first."""
        k = validate_k(k)
        mode = self._parse(query)
        self.last_visited = 0
        if not self._out:
            return []
        if allowed is not None and not isinstance(allowed, (set, frozenset)):
            allowed = set(allowed)
        return mode.run(self, query, k, allowed)

    def _expander(self, direction: str, relations: Sequence[str] | None, gate: AbstractSet[str] | None) -> Callable[[Any], Iterable[Any]]:
        """Neighbours of a node along ``direction``, through ``relations`` only, records in ``gate`` only."""
        graph = self._graph
        if self.config.directed:
            adjs = {"out": (graph._succ,), "in": (graph._pred,), "both": (graph._succ, graph._pred)}[direction]
        else:
            adjs = (graph._adj,)
        rels = frozenset(relations) if relations else None
        if rels is None and gate is None and len(adjs) == 1:
            neighbours: Callable[[Any], Iterable[Any]] = adjs[0].__getitem__  # fast path: iterate the adjacency dict itself
            return neighbours

        def expand(node: Any) -> Iterable[Any]:
            for adj in adjs:
                for nb, data in adj[node].items():
                    if rels is not None and rels.isdisjoint(data["relations"]):
                        continue
                    if gate is not None and nb.__class__ is str and nb not in gate:
                        continue
                    yield nb

        return expand

    def _is_hit(self, allowed: AbstractSet[str] | None, exclude: AbstractSet[str] = frozenset()) -> Callable[[Any], bool] | None:
        """What a walk may return (None: every node, when the graph holds only records)."""
        if allowed is None:
            if exclude:
                return lambda n: n.__class__ is str and n not in exclude
            return _is_record if self._order_key() is not None else None
        return (lambda n: n in allowed and n not in exclude) if exclude else allowed.__contains__

    def _order_key(self) -> Callable[[Any], Any] | None:
        return node_order if self._mentions and self.config.entity_nodes else None

    def _hits(self, walk: Walk, k: int) -> list[Hit]:
        self.last_visited = walk.visited
        nodes, depths = walk.nodes[:k], walk.depths[:k]
        if not nodes:
            return []
        hops = [float(d) for d in range(max(depths) + 1)]
        raws = map(hops.__getitem__, depths)
        if walk.scores is None:
            decay = self.config.decay
            scores: Iterable[float] = map([decay**d for d in range(len(hops))].__getitem__, depths)
        else:
            scores = walk.scores[:k]
        return list(map(Hit, nodes, scores, raws, repeat(self.name)))

    def _limits(self, mode: TraverseMode | ExpandMode | TextMode) -> tuple[int, int]:
        c = self.config
        return (c.max_depth if mode.max_depth is None else mode.max_depth, c.max_nodes if mode.max_nodes is None else mode.max_nodes)

    def _present(self, ids: Iterable[str], gate: AbstractSet[str] | None) -> list[str]:
        return [i for i in ids if i in self._out and (gate is None or i in gate)]

    def run_traverse(self, mode: TraverseMode, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """``traverse``: BFS or DFS from the start records; score ``decay ** depth``."""
        gate = None if mode.pass_through else allowed
        starts = self._present(mode.start, gate)
        if not starts:
            return []
        max_depth, max_nodes = self._limits(mode)
        walk = _TRAVERSALS[mode.algorithm](
            starts,
            self._expander(mode.direction, mode.relations, gate),
            max_depth=max_depth,
            max_nodes=max_nodes,
            want=k,
            is_hit=self._is_hit(allowed, frozenset() if mode.include_start else frozenset(starts)),
            order_key=self._order_key(),
        )
        return self._hits(walk, k)

    def _expand(self, mode: ExpandMode | TextMode, seeds: dict[str, float], k: int, allowed: AbstractSet[str] | None, exclude: AbstractSet[str]) -> list[Hit]:
        gate = None if mode.pass_through else allowed
        seeds = {s: v for s, v in seeds.items() if s in self._out and (gate is None or s in gate)}
        if not seeds:
            return []
        max_depth, max_nodes = self._limits(mode)
        walk = best_first(
            seeds,
            self._expander(mode.direction, mode.relations, gate),
            max_depth=max_depth,
            max_nodes=max_nodes,
            want=k,
            is_hit=self._is_hit(allowed, exclude),
            decay=self.config.decay,
            order_key=node_order,
        )
        return self._hits(walk, k)

    def run_expand(self, mode: ExpandMode, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """``expand``: best ``seed x decay ** hops`` per node over all seeds and paths."""
        seeds = {s: float(v) for s, v in mode.seeds.items()}
        return self._expand(mode, seeds, k, allowed, frozenset() if mode.include_seeds else frozenset(seeds))

    def run_text(self, mode: TextMode, query: Query, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """Default mode: seeds from the names in the query text, then ``expand``."""
        return self._expand(mode, self.text_seeds(query.text or ""), k, allowed, frozenset())

    def run_path(self, mode: PathMode, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """``path``: the records of a shortest path source -> target, score ``decay ** hops``."""
        gate = None if mode.pass_through else allowed
        ends = dict.fromkeys((mode.source, mode.target))
        if len(self._present(ends, gate)) < len(ends):
            return []
        path = shortest_path(
            mode.source, mode.target, self._expander(mode.direction, mode.relations, gate), max_depth=mode.max_depth, order_key=self._order_key()
        )
        if path is None:
            return []
        is_hit = self._is_hit(allowed) or _is_record
        kept = [(node, hops) for hops, node in enumerate(path) if is_hit(node)]
        return self._hits(Walk([n for n, _ in kept], [h for _, h in kept], None, len(path)), k)

    def text_seeds(self, text: str) -> dict[str, float]:
        """Seed scores for a query text (see :func:`memcore_graph.seeds.text_seeds`)."""
        return text_seeds(text, self._mentions, self._out, self._name_len)

    # -- persistence ---------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write ``graph.json`` (node-link JSON) atomically."""
        with _gc_paused():
            dump_graph(self._graph, Path(directory))

    def load(self, directory: Path) -> None:
        """Replace the contents with a saved graph; CorruptError when unreadable or inconsistent.

        Every saved edge must follow from the nodes' links and entities, and every such
        edge must be saved; the graph is rebuilt in the saved node and edge order.
        """
        with _gc_paused():
            self._load(Path(directory))

    def _load(self, directory: Path) -> None:
        import networkx as nx

        nodes, edges = read_node_link(directory, directed=self.config.directed, name=self.name)
        out: dict[str, dict[str, dict[str, float]]] = {}
        mentions: dict[str, set[str]] = {}
        entities: set[Any] = set()
        try:
            for node, attrs in nodes:
                if node.__class__ is str:
                    if node in out:
                        raise CorruptError(f"record node {node!r} appears twice")
                    links, keys = check_record_node(node, attrs)
                    out[node] = {t: self._shared({rel: float(w) for rel, w in rels.items()}) for t, rels in links.items()}
                    attrs["links"], attrs["entities"] = out[node], keys
                    for key in keys:
                        mentions.setdefault(key, set()).add(node)
                elif self.config.entity_nodes and not attrs:
                    entities.add(node)
                else:
                    raise CorruptError(f"unexpected node {node!r}")
            if self.config.entity_nodes and entities != {entity_node(key) for key in mentions}:
                raise CorruptError("entity nodes do not match the entities the records mention")
            saved = {(u, v) for u, v in edges} if self.config.directed else {frozenset((u, v)) for u, v in edges}
            if len(saved) != len(edges) or saved != self._derived_edges(out, mentions):
                raise CorruptError("the saved edges differ from those the links and entities give")
        except CorruptError as exc:
            raise CorruptError(f"graph index {self.name!r}: {directory}: {exc}") from None
        graph = nx.DiGraph() if self.config.directed else nx.Graph()
        graph.graph["memcore_graph"] = self._fingerprint()
        graph.add_nodes_from(nodes)
        previous = self._out
        self._out = out  # _relations reads the new links
        try:
            # an undirected edge may be saved as (u, v) when only v links to u
            graph.add_edges_from(
                (u, v, {"relations": self._relations(u, v) if u.__class__ is tuple or v in out[u] else self._relations(v, u)}) for u, v in edges
            )
        finally:
            self._out = previous
        self._graph, self._out, self._mentions = graph, out, mentions
        self._pending = {}
        for src, links in out.items():
            for target in links:
                if target not in out:
                    self._pending.setdefault(target, set()).add(src)
        self._name_len = max((key.count(" ") + 1 for key in mentions), default=1)

    def _derived_edges(self, out: dict[str, dict[str, dict[str, float]]], mentions: dict[str, set[str]]) -> set[Any]:
        """The edges the links and entities give: (source, target) pairs, or frozensets when undirected."""
        pair: Callable[[Any, Any], Any] = (lambda u, v: (u, v)) if self.config.directed else (lambda u, v: frozenset((u, v)))
        edges = {pair(src, target) for src, links in out.items() for target in links if target in out}
        if self.config.entity_nodes:
            for key, holders in mentions.items():
                node = entity_node(key)
                for rid in holders:
                    edges.add(pair(rid, node))
                    edges.add(pair(node, rid))
        return edges

    def stats(self) -> dict[str, Any]:
        """Records, nodes, edges, entity nodes, pending links and the settings that matter."""
        return {
            "size": len(self._out),
            "nodes": self._graph.number_of_nodes(),
            "edges": self._graph.number_of_edges(),
            "entities": len(self._mentions),
            "pending_links": sum(len(s) for s in self._pending.values()),
            "directed": self.config.directed,
            "decay": self.config.decay,
            "max_depth": self.config.max_depth,
            "entity_extraction": self.config.entity_extraction,
            "entity_nodes": self.config.entity_nodes,
            **(
                {"llm_steps": dict(self._extractor.steps), "llm_fallback_reasons": dict(self._extractor.reasons)}
                if isinstance(self._extractor, LLMExtractor)
                else {}
            ),
        }
