"""``retrieve(where=...)``: the filter has the name every other verb gives it; ``metadata=``,
its former name, still works with a DeprecationWarning (Memory, services, make_query)."""

from __future__ import annotations

from typing import Any, Mapping

import pytest

import memcore
from memcore import Service, ValidationError
from memcore.plugin import hit_to_dict

ITEMS = [("dogs bark at night", {"n": 1}), ("dogs chase cats", {"n": 2}), ("cats sleep all day", {"n": 3})]


@pytest.fixture
def memory(tmp_path):
    with memcore.open({}, path=tmp_path) as memory:
        for text, metadata in ITEMS:
            memory.insert(text, metadata=metadata)
        yield memory


def texts(results: list[dict[str, Any]]) -> list[str]:
    return [r["text"] for r in results]


def test_where_filters_retrieve(memory):
    assert texts(memory.retrieve("dogs", where={"n": 2})) == ["dogs chase cats"]
    assert texts(memory.retrieve("dogs", None, {"n": {"$gte": 2}}, 5)) == ["dogs chase cats", "cats sleep all day"]  # third positional
    assert texts(memory.service.retrieve("dogs", where={"n": 1})) == ["dogs bark at night"]


def test_metadata_still_filters_with_a_deprecation_warning(memory):
    with pytest.warns(DeprecationWarning, match=r"retrieve\(metadata=\.\.\.\) is deprecated: the filter is where=") as caught:
        assert texts(memory.retrieve("dogs", metadata={"n": 2})) == ["dogs chase cats"]
    assert caught[0].filename == __file__  # points at the caller
    with pytest.warns(DeprecationWarning, match="is deprecated: the filter is where=") as caught:
        assert texts(memory.service.retrieve("dogs", metadata={"n": 2}, scope=None)) == ["dogs chase cats"]
    assert caught[0].filename == __file__
    with pytest.raises(ValidationError, match="both where= and metadata="):
        memory.retrieve("dogs", where={"n": 1}, metadata={"n": 2})


class WhereService(Service):
    """A third-party service written against the new signature: receives ``where``."""

    seen: list[Any] = []

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        return self.collection.insert([{"text": text, "metadata": dict(metadata or {})}])[0]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        self.reject_unknown("retrieve", kwargs)
        self.seen.append(where)
        return [hit_to_dict(h) for h in self.pipeline.run(self.collection, self.make_query(query, vector, where, k))] if self.pipeline else []


def test_a_service_subclass_receives_a_callers_metadata_as_where(memory):
    service = WhereService(memory.service.config, memory.collection, memory.pipeline)
    with pytest.warns(DeprecationWarning):
        assert texts(service.retrieve("dogs", metadata={"n": 3}, scope=None)) == ["cats sleep all day"]
    assert WhereService.seen[-1] == {"n": 3}
    with pytest.warns(DeprecationWarning, match="is deprecated: the filter is where="):
        assert memory.service.make_query("dogs", None, metadata={"n": 1}, k=3).where is not None
