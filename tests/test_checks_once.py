"""A request is checked once: k, the query vector, the where filter and the scope.

``CollectionReader.request`` is the one entry point that checks a request (a service's
``make_query`` goes through it); the pipeline, the stages and ``search_index`` trust the
checked query. Each check function is wrapped with a counter in every core module that
looks it up (and on its class for methods), then one default ``Memory.retrieve`` with all
four runs. An index's own public ``search`` keeps validating ``k`` for direct callers: the
builtin exact index does it inline, without a call, when ``k`` is a positive int.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest

import memcore
from memcore.collection._reads import CollectionReader
from memcore.embedders._embedder import Space
from memcore.model import _checks, _filters
from memcore.model._record import Scope


def count_calls(monkeypatch: pytest.MonkeyPatch, counts: Counter[str], label: str, original: Callable[..., Any], name: str) -> None:
    """Wrap ``original`` with a counter wherever a core module holds it as the global ``name``."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[label] += 1
        return original(*args, **kwargs)

    holders = [m for n, m in list(sys.modules.items()) if n.startswith("memcore") and vars(m).get(name) is original]
    assert holders, name
    for module in holders:
        monkeypatch.setattr(module, name, counted)


@pytest.fixture
def memory(tmp_path):
    mem = memcore.open(path=tmp_path / "m")
    mem.insert([{"text": f"note {i} about cats and tea", "metadata": {"even": i % 2 == 0}, "scope": {"user_id": f"u{i % 2}"}} for i in range(12)])
    yield mem
    mem.close()


@pytest.fixture
def counts(monkeypatch):
    counts: Counter[str] = Counter()
    count_calls(monkeypatch, counts, "k", _checks.validate_k, "validate_k")
    count_calls(monkeypatch, counts, "vector values", _checks._query_vector, "_query_vector")
    count_calls(monkeypatch, counts, "vector values", _checks.as_vector, "as_vector")
    count_calls(monkeypatch, counts, "filter", _filters.parse_filter, "parse_filter")
    check_dimension, coerce = Space.check_query_vector, Scope.coerce.__func__

    def counted_dimension(self: Space, vector: Any) -> None:
        counts["vector space and dimension"] += 1
        check_dimension(self, vector)

    def counted_coerce(cls: type[Scope], value: Any) -> Scope | None:
        counts["scope"] += 1
        return coerce(cls, value)

    monkeypatch.setattr(Space, "check_query_vector", counted_dimension)
    monkeypatch.setattr(Scope, "coerce", classmethod(counted_coerce))
    return counts


def test_one_retrieve_checks_each_part_of_the_request_once(memory, counts):
    dim = memory.collection.spaces["default"].dim
    vector = memory.collection.spaces["default"].embed_queries(["cats and tea"])[0]
    assert vector.shape == (dim,)
    counts.clear()
    results = memory.retrieve("cats and tea", vector=vector, metadata={"even": True}, k=3, scope={"user_id": "u0"})
    assert len(results) == 3 and all(r["metadata"]["even"] is True for r in results)
    assert dict(counts) == {"k": 1, "vector values": 1, "vector space and dimension": 1, "filter": 1, "scope": 1}


def test_a_bad_request_still_fails_at_the_entry_point(memory):
    with pytest.raises(memcore.ValidationError, match="k must be a positive integer"):
        memory.retrieve("cats", k=0)
    with pytest.raises(memcore.DimensionError):
        memory.retrieve("cats", vector=np.ones(3, dtype=np.float32))
    with pytest.raises(memcore.FilterError):
        memory.retrieve("cats", metadata={"even": {"$nope": 1}})
    with pytest.raises(memcore.ValidationError):
        memory.retrieve("cats", scope={"user": "u0"})


def test_the_reader_is_built_once_per_collection_not_per_query(memory, monkeypatch):
    built = []
    init = CollectionReader.__init__

    def counted(self: CollectionReader, source: Any) -> None:
        built.append(type(self))
        init(self, source)

    monkeypatch.setattr(CollectionReader, "__init__", counted)
    for text in ("cats", "tea", "notes"):
        memory.retrieve(text, k=2)
        memory.query(text, k=2)
    assert built == []
    ctx = memory.pipeline.run_context(memory.collection, memory.collection.request("cats", k=2))
    assert ctx.collection is memory.collection.reader and built == []


def test_a_checked_query_is_trusted_and_a_copy_is_not(memory):
    collection = memory.collection
    q = collection.request("cats", k=2, where={"even": True})
    assert q.checked and collection.request(q) is q  # no second check, no second query
    copy = q.evolve(k=3)
    assert not copy.checked and collection.request(copy).checked
    assert not memcore.Query(text="cats").checked


@pytest.mark.parametrize("reopen", [False, True], ids=["fresh", "reopened"])
def test_open_asks_the_registry_once_per_component_and_parses_each_config_once(tmp_path, monkeypatch, reopen):
    from memcore._plugins._registry import Registration, Registry

    if reopen:
        memcore.open(path=tmp_path).close()
    visits: Counter[tuple[str, str]] = Counter()
    parses: Counter[str] = Counter()
    get, parse = Registry.get, Registration.parse_config

    def counted_get(self: Registry, category: str, name: str, **kwargs: Any) -> Registration:
        visits[(category, name)] += 1
        return get(self, category, name, **kwargs)

    def counted_parse(self: Registration, data: Any, location: str) -> Any:
        if not isinstance(data, self.config_model):  # a config already validated is not parsed again
            parses[location] += 1
        return parse(self, data, location)

    monkeypatch.setattr(Registry, "get", counted_get)
    monkeypatch.setattr(Registration, "parse_config", counted_parse)
    memcore.open(path=tmp_path).close()  # defaults: sqlite, hashing, exact "vector", basic preset (+ relevance), default service
    # Known extra lookups, pinned so that no new one slips in: the stored settings are read
    # first through a second open of the store (api/_stored.py peek), and on a reopen the
    # stored layer checks the service's required indexes and the stored index definitions.
    # (To remove: reuse the peeked store for the real open.)
    extra = {("stores", "sqlite"): 2} | ({("services", "default"): 2, ("indexes", "exact"): 2} if reopen else {})
    assert {key: n for key, n in visits.items() if n != 1} == extra and len(visits) == 8, visits
    assert parses["indexes.vector"] == 1 and set(parses.values()) <= {1, 2}, parses
