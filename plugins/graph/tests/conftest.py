"""Helpers shared by the graph plugin tests: small hand-made graphs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from memcore.plugin import IndexContext
from memcore import Link, Query, Record
from memcore_graph import GraphIndexConfig
from memcore_graph.index import GraphIndex


def make_index(**options: Any) -> GraphIndex:
    """A graph index named ``g``; entity extraction off unless asked for."""
    options.setdefault("entity_extraction", "none")
    return GraphIndex(GraphIndexConfig(**options), IndexContext("g"))


def rec(id: str, *targets: Any, text: str | None = None, **kw: Any) -> Record:
    """Record ``id`` linking to ``targets`` (ids, ``(target, relation)`` or ``(target, relation, weight)``)."""
    links = [Link(t) if isinstance(t, str) else Link(*t) for t in targets]
    return Record.create(text or f"record {id}", id=id, links=links, **kw)


def graph_query(text: str | None = None, **mode: Any) -> Query:
    """A query whose graph mode is ``mode`` (``extras={"graph": mode}``; no mode: the text mode)."""
    return Query(text=text, extras={"graph": mode} if mode else {})


def search(index: GraphIndex, k: int = 50, allowed=None, text: str | None = None, **mode: Any) -> list[tuple[str, float]]:
    """(id, score) pairs of a search with this graph mode (``extras["graph"]``)."""
    return [(h.id, h.score) for h in index.search(graph_query(text, **mode), k, allowed)]


def ids(index: GraphIndex, k: int = 50, allowed=None, text: str | None = None, **mode: Any) -> list[str]:
    """Ids of a search with this graph mode (``extras["graph"]``)."""
    return [h.id for h in index.search(graph_query(text, **mode), k, allowed)]


@pytest.fixture
def g() -> SimpleNamespace:
    """The helpers above as one fixture: ``g.make(...)``, ``g.rec(...)``, ``g.search(...)``, ``g.ids(...)``."""
    return SimpleNamespace(make=make_index, rec=rec, search=search, ids=ids)


@pytest.fixture
def chain() -> GraphIndex:
    """a -> b -> c -> d, plus a branch b -> e -> f and a side link a -x-> g."""
    index = make_index(max_depth=10)
    index.add([rec("a", "b", ("g", "x")), rec("b", "c", "e"), rec("c", "d"), rec("d"), rec("e", "f"), rec("f"), rec("g")])
    return index
