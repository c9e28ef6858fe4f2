"""Plugin loading with the real installed distributions, and failure isolation.

Needs the development install (requirements-dev.txt): the nine plugin folders, the
keyword example and the two fixture plugins in tests/fixtures/ (``broken``, which raises
at import, and ``duplicate``, which registers the builtin name ``exact``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memcore import hookimpl
from memcore._plugins._host import DEFAULT_PLUGINS, PluginHost
from memcore.plugin import ComponentConfig

MISSION_PLUGINS = ("faiss", "lsh", "fifo-kv", "bm25", "graph", "poincare", "chroma", "colbert", "rrf", "mmr", "embed", "llm")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)


def third_party(host: PluginHost) -> set[str]:
    return {name for name, info in host.infos.items() if not info.builtin}


# -- real entry points ----------------------------------------------------------------


def test_broken_plugin_is_reported_and_the_rest_loads():
    host = PluginHost()
    broken = host.infos["broken"]
    assert broken.error is not None
    assert "broken on purpose" in broken.error
    assert "RuntimeError" in broken.error
    assert broken.registers == {}
    assert not host.pm.has_plugin("broken")

    builtins = {name: info for name, info in host.infos.items() if info.builtin}
    assert set(builtins) == set(DEFAULT_PLUGINS)
    assert {name: info.error for name, info in builtins.items()} == {name: None for name in builtins}

    for name in (*MISSION_PLUGINS, "keyword"):
        assert host.infos[name].error is None, name
    assert "keyword" in host.registry.names("indexes")
    assert "exact" in host.registry.names("indexes")


def test_duplicate_name_is_reported_and_the_plugin_skipped():
    host = PluginHost()
    info = host.infos["duplicate"]
    assert info.error is not None
    assert "already registered" in info.error
    assert "'exact'" in info.error
    assert info.registers == {}
    assert not host.pm.has_plugin("duplicate")
    # the builtin keeps the name, and the plugin's other registration is dropped too
    assert host.registry.get("indexes", "exact").plugin == "memcore.default_plugins.indexes"
    assert "duplicate_only" not in host.registry.names("indexes")
    for category in host.registry.entries.values():
        assert all(reg.plugin != "duplicate" for reg in category.values())


def test_every_plugin_has_version_and_distribution():
    host = PluginHost()
    assert host.infos["keyword"].distribution == "memcore-keyword-index"
    assert host.infos["keyword"].version == "0.1.0"
    assert host.infos["broken"].distribution == "memcore-broken-example"
    for name in MISSION_PLUGINS:
        assert host.infos[name].distribution == f"memcore-{name}"
        assert host.infos[name].to_dict()["name"] == name


def test_empty_allow_list_loads_no_third_party_plugin(monkeypatch):
    monkeypatch.setenv("MEMCORE_PLUGINS", "")
    host = PluginHost()
    assert third_party(host) == set()
    assert {name for name, info in host.infos.items() if info.builtin} == set(DEFAULT_PLUGINS)
    assert "keyword" not in host.registry.names("indexes")
    assert "exact" in host.registry.names("indexes")


def test_allow_list_loads_only_named_plugins(monkeypatch):
    monkeypatch.setenv("MEMCORE_PLUGINS", "keyword")
    host = PluginHost()
    assert third_party(host) == {"keyword"}
    assert host.infos["keyword"].error is None
    assert "keyword" in host.registry.names("indexes")


def test_allow_list_accepts_distribution_names(monkeypatch):
    monkeypatch.setenv("MEMCORE_PLUGINS", "memcore-keyword-index, faiss")
    host = PluginHost()
    assert third_party(host) == {"keyword", "faiss"}


def test_disable_list_skips_plugin(monkeypatch):
    monkeypatch.setenv("MEMCORE_DISABLE_PLUGINS", "keyword")
    host = PluginHost()
    assert "keyword" not in host.infos
    assert "keyword" not in host.registry.names("indexes")
    assert host.infos["faiss"].error is None
    assert "broken" in host.infos


def test_disable_list_can_skip_the_failing_fixtures(monkeypatch):
    monkeypatch.setenv("MEMCORE_DISABLE_PLUGINS", "broken,duplicate")
    host = PluginHost()
    assert {"broken", "duplicate"}.isdisjoint(host.infos)
    assert all(info.error is None for info in host.infos.values())


# -- in-test plugin objects -----------------------------------------------------------


@pytest.fixture
def host() -> PluginHost:
    return PluginHost(load_entry_points=False)


class _Config(ComponentConfig):
    kind: str = "in_test"


def _factory(config, context):
    raise AssertionError("not built in these tests")


def test_valid_in_test_plugin_registers(host):
    @hookimpl
    def register_indexes(register):
        register("in_test", _factory, _Config)

    info = host.add("good", SimpleNamespace(register_indexes=register_indexes))
    assert info.error is None
    assert info.hooks == ["register_indexes"]
    assert info.registers == {"indexes": ["in_test"]}
    assert host.registry.get("indexes", "in_test").plugin == "good"

    host.remove("good")
    assert "in_test" not in host.registry.names("indexes")
    assert "good" not in host.infos


def test_misspelled_hook_is_reported(host):
    @hookimpl
    def register_indexs(register):
        register("typo_index", _factory, _Config)

    info = host.add("typo", SimpleNamespace(register_indexs=register_indexs))
    assert info.error is not None
    assert "unknown hook" in info.error
    assert "register_indexs" in info.error
    assert not host.pm.has_plugin("typo")
    assert "typo_index" not in host.registry.names("indexes")


def test_hook_that_raises_is_reported(host):
    @hookimpl
    def register_indexes(register):
        register("half_done", _factory, _Config)
        raise ValueError("hook exploded")

    info = host.add("raiser", SimpleNamespace(register_indexes=register_indexes))
    assert info.error is not None
    assert "hook exploded" in info.error
    assert not host.pm.has_plugin("raiser")
    assert "half_done" not in host.registry.names("indexes")  # all or nothing


def test_non_callable_factory_is_reported(host):
    @hookimpl
    def register_fusions(register):
        register("not_callable", 42, None)

    info = host.add("badfactory", SimpleNamespace(register_fusions=register_fusions))
    assert info.error is not None
    assert "not callable" in info.error
    assert "not_callable" not in host.registry.names("fusions")


def test_invalid_config_model_is_reported(host):
    @hookimpl
    def register_stages(register):
        register("no_model", _factory, dict)

    info = host.add("badmodel", SimpleNamespace(register_stages=register_stages))
    assert info.error is not None
    assert "config_model" in info.error


def test_loader_that_raises_is_reported(host):
    def load():
        raise ImportError("missing dependency foo")

    info = host.load("unloadable", load)
    assert info.error == "ImportError: missing dependency foo"
    assert host.infos["unloadable"] is info


def test_failing_plugin_does_not_disturb_later_ones(host):
    @hookimpl
    def bad(register):
        raise RuntimeError("nope")

    @hookimpl
    def good(register):
        register("after_failure", _factory, _Config)

    host.add("bad", SimpleNamespace(register_indexes=bad))
    info = host.add("good", SimpleNamespace(register_indexes=good))
    assert host.infos["bad"].error is not None
    assert info.error is None
    assert "after_failure" in host.registry.names("indexes")


# -- hooks called through pluggy ---------------------------------------------------------------


class _Cfg(ComponentConfig):
    kind: str = "x"


def test_hooks_run_through_pluggys_caller_wrappers_included():
    calls = []

    class Plugin:
        @hookimpl(wrapper=True)
        def register_indexes(self, register):
            calls.append("wrapper before")

            def renamed(name, factory, config_model=None):
                register(f"wrapped_{name}", factory, config_model)

            # a new-style wrapper sees the result of the inner implementations
            result = yield
            calls.append("wrapper after")
            return result

        @hookimpl(trylast=True)
        def register_stages(self, register):
            calls.append("stages")
            register("late_stage", lambda config: None, None)

    host = PluginHost(load_entry_points=False)
    info = host.add("wrapping", Plugin())
    assert info.error is None
    assert calls == ["wrapper before", "wrapper after", "stages"]
    assert info.registers == {"stages": ["late_stage"]}


def test_one_plugins_wrapper_does_not_see_another_plugins_registrations():
    seen = []

    class Watcher:
        @hookimpl(hookwrapper=True)
        def register_indexes(self, register):
            seen.append("watcher")
            yield

    @hookimpl
    def register_indexes(register):
        register("other_index", lambda config, context: None, None)

    host = PluginHost(load_entry_points=False)
    assert host.add("watcher", Watcher()).error is None
    seen.clear()
    info = host.add("other", SimpleNamespace(register_indexes=register_indexes))
    assert info.error is None and info.registers == {"indexes": ["other_index"]}
    assert seen == []  # isolated: each plugin's hooks are called for that plugin alone


def test_add_takes_a_plugin_object_and_load_a_loader():
    host = PluginHost(load_entry_points=False)

    @hookimpl
    def register_fusions(register):
        register("loaded_fusion", lambda config: None, None)

    module = SimpleNamespace(register_fusions=register_fusions)
    assert host.load("via-loader", lambda: module).registers == {"fusions": ["loaded_fusion"]}
    host.remove("via-loader")
    assert host.add("via-object", module).registers == {"fusions": ["loaded_fusion"]}


def test_two_distributions_with_one_entry_point_name_are_both_reported(monkeypatch):
    from importlib import metadata

    import memcore._plugins._host as plugins_module

    class Dist:
        def __init__(self, name):
            self.metadata = {"Name": name}
            self.version = "1.0"

    @hookimpl
    def register_fusions(register):
        register("twin_fusion", lambda config: None, None)

    module = SimpleNamespace(register_fusions=register_fusions)
    eps = []
    for dist in ("memcore-twin-a", "memcore-twin-b"):
        ep = SimpleNamespace(name="twin", value="memcore_twin", dist=Dist(dist), load=lambda: module)
        eps.append(ep)
    monkeypatch.setattr(plugins_module.metadata, "entry_points", lambda group: list(reversed(eps)))
    host = PluginHost()
    assert host.infos["twin"].error is None and host.infos["twin"].distribution == "memcore-twin-a"
    second = host.infos["twin (memcore-twin-b)"]
    assert second.distribution == "memcore-twin-b"
    assert "also provided by memcore-twin-a" in second.error
    assert metadata  # the real module is untouched outside this test
