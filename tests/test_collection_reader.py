"""Stages read through the collection's reader (read-only, built once); index factories see their kind."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import memcore
from memcore.plugin import CollectionReader, Stage
from memcore import hookimpl
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore import Pipeline
from memcore.plugin import PipelineContext
from memcore import Query
from memcore.testing import register_plugin

WRITES = ("insert", "upsert", "update", "delete", "create_index", "drop_index", "set_state", "evict", "store", "index", "registry", "close")


@pytest.fixture
def collection():
    c = memcore.Collection.create()
    c.create_index("vector", "exact", space="default")
    c.insert(["the cat sat", "a dog ran"])
    yield c
    c.close()


def test_the_reader_reads_and_searches_but_cannot_write(collection):
    view = CollectionReader(collection)
    assert [i["name"] for i in view.list_indexes()] == ["vector"] and view.has_index("vector")
    assert view.count() == 2 and len(view.ids()) == 2
    assert view.search_index("vector", Query(text="cat", k=1), 1)[0].record is None
    assert view.get_many(view.ids())[0].text == "the cat sat"
    with pytest.raises(TypeError):
        view.spaces["x"] = None  # type: ignore[index]
    for name in WRITES:
        assert not hasattr(view, name), name
    assert CollectionReader(view)._state is collection._state
    assert collection.reader._state is collection._state and collection.reader is collection.reader  # built once


def test_collection_view_is_the_readers_former_name():
    import memcore.plugin

    with pytest.warns(DeprecationWarning, match="CollectionReader"):
        assert memcore.plugin.CollectionView is CollectionReader
    assert "CollectionView" not in memcore.plugin.__all__ and "CollectionReader" in memcore.plugin.__all__


def test_stages_get_the_reader_in_check_and_run(collection):
    seen = []

    class Spy(Stage):
        def check(self, c):
            seen.append(("check", type(c)))

        def run(self, ctx):
            seen.append(("run", type(ctx.collection)))

    pipeline = Pipeline([Spy()])
    pipeline.check(collection)
    pipeline.run(collection, "cat", k=1)
    assert seen == [("check", CollectionReader), ("run", CollectionReader)]
    assert PipelineContext(collection, Query(text="x")).collection is collection.reader


def test_an_index_factory_gets_its_kind(collection):
    contexts = []

    class AliasConfig(ExactIndexConfig):
        kind: str = "alias_exact"

    def factory(config, context):
        contexts.append(context)
        return ExactIndex(config, context)

    @hookimpl
    def register_indexes(register):
        register("alias_exact", factory, AliasConfig)

    with register_plugin(SimpleNamespace(register_indexes=register_indexes), name="alias"):
        collection.create_index("aliased", "alias_exact", space="default")
    assert [(c.name, c.kind) for c in contexts] == [("aliased", "alias_exact")]
