"""``memcore.open`` builds each index once: on a first open, on a reopen, with a service's
required indexes, and when a saved index must be rebuilt."""

from __future__ import annotations

import shutil
from collections import Counter
from types import SimpleNamespace

import pytest

import memcore
from memcore import ConfigError, PluginError, hookimpl
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore.default_plugins.services import DefaultService, DefaultServiceConfig
from memcore.testing import register_plugin

BUILDS: Counter[str] = Counter()


class CountedConfig(ExactIndexConfig):
    """The exact index's options under the kind ``counted``."""

    kind: str = "counted"


def counted_index(config, context):
    BUILDS[context.name] += 1
    return ExactIndex(config, context)


class NeedsIndexService(DefaultService):
    """The default service plus an index of its own."""

    @classmethod
    def required_indexes(cls, config):
        return {"svc.recent": {"kind": "counted", "space": "default"}}


@hookimpl
def register_indexes(register):
    register("counted", counted_index, CountedConfig)


@hookimpl
def register_services(register):
    register("needs_index", NeedsIndexService, DefaultServiceConfig)
    register("needs_index_lambda", lambda config, collection, pipeline: NeedsIndexService(config, collection, pipeline), DefaultServiceConfig)


@pytest.fixture(autouse=True)
def counting_plugin():
    BUILDS.clear()
    with register_plugin(SimpleNamespace(register_indexes=register_indexes, register_services=register_services), name="counting"):
        yield


def settings(tmp_path, service="default"):
    return {
        "path": str(tmp_path / "memory"),
        "indexes": {"vector": {"kind": "counted", "space": "default"}, "other": {"kind": "counted", "space": "default", "metric": "ip"}},
        "service": {"kind": service},
    }


def test_first_open_and_reopen_build_each_index_once(tmp_path):
    with memcore.open(settings(tmp_path)) as memory:
        memory.insert("the cat sat on the mat")
    assert BUILDS == {"vector": 1, "other": 1}
    BUILDS.clear()
    with memcore.open(settings(tmp_path)) as memory:
        assert [h.id for h in memory.query("cat", k=1)]
    assert BUILDS == {"vector": 1, "other": 1}


def test_a_rebuild_on_open_fills_the_index_it_built(tmp_path):
    with memcore.open(settings(tmp_path)) as memory:
        memory.insert("the cat sat on the mat")
    shutil.rmtree(tmp_path / "memory" / "indexes" / "vector")  # lost: rebuilt from the store
    BUILDS.clear()
    with memcore.open(settings(tmp_path)) as memory:
        assert len(memory.collection.index("vector")) == 1
    assert BUILDS == {"vector": 1, "other": 1}


def test_a_services_required_index_is_built_once(tmp_path):
    with memcore.open(settings(tmp_path, "needs_index")) as memory:
        assert memory.collection.has_index("svc.recent")
    assert BUILDS == {"vector": 1, "other": 1, "svc.recent": 1}
    BUILDS.clear()
    memcore.open(settings(tmp_path, "needs_index")).close()
    assert BUILDS == {"vector": 1, "other": 1, "svc.recent": 1}


def test_required_indexes_are_not_lost_behind_a_factory_function(tmp_path):
    with pytest.raises(PluginError, match="required_indexes"):
        memcore.open(settings(tmp_path, "needs_index_lambda"))


def test_a_changed_definition_is_refused_without_building(tmp_path):
    memcore.open(settings(tmp_path)).close()
    BUILDS.clear()
    changed = settings(tmp_path)
    changed["indexes"]["other"]["metric"] = "cosine"
    with pytest.raises(ConfigError, match="exists with another kind or options"):
        memcore.open(changed)
    assert BUILDS == {"vector": 1, "other": 1}  # the saved ones, opened by the collection


def test_ensure_index(tmp_path):
    collection = memcore.Collection.create(tmp_path / "c")
    try:
        assert collection.ensure_index("a", "counted", space="default") is True
        assert collection.ensure_index("a", "counted", space="default") is False
        assert BUILDS == {"a": 1}
        with pytest.raises(ConfigError, match="another kind or options"):
            collection.ensure_index("a", "counted", space="default", metric="ip")
        assert BUILDS == {"a": 1}
    finally:
        collection.close()
