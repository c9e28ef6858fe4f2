"""Settings: init > env > TOML/YAML file, nesting, validation, and memcore.open from a file."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import memcore
from memcore import ConfigError, MemcoreSettings, UnknownComponentError, load_settings
from memcore._plugins._host import get_registry
from memcore.api._check import check_settings


@pytest.fixture(autouse=True)
def _no_memcore_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


TOML = """
path = "/from/file"
pipeline = "basic"

[store]
kind = "memory"

[spaces.default.embedder]
kind = "hashing"
dim = 128

[indexes.vector]
kind = "exact"
metric = "cosine"
"""

YAML = """
path: /from/yaml
store: {kind: memory}
spaces:
  default:
    embedder: {kind: hashing, dim: 64}
indexes:
  vector: {kind: exact, metric: l2}
  second: {kind: exact, metric: ip}
"""


def test_defaults():
    s = load_settings()
    assert s.path is None
    assert s.store == {"kind": "sqlite"}
    assert s.spaces == {"default": {"embedder": {"kind": "auto"}}}  # resolved by memcore.open: minilm when installed, else hashing
    assert s.indexes == {"vector": {"kind": "exact", "space": "default"}}
    assert s.service == {"kind": "default"}
    assert s.pipeline == "basic"
    assert isinstance(s, MemcoreSettings)


def test_toml_file(tmp_path):
    s = load_settings(write(tmp_path, "memcore.toml", TOML))
    assert s.path == "/from/file"
    assert s.store == {"kind": "memory"}
    assert s.spaces["default"]["embedder"] == {"kind": "hashing", "dim": 128}
    assert s.indexes == {"vector": {"kind": "exact", "metric": "cosine"}}


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
def test_yaml_file(tmp_path, suffix):
    s = load_settings(write(tmp_path, "memcore" + suffix, YAML))
    assert s.path == "/from/yaml"
    assert s.indexes == {"vector": {"kind": "exact", "metric": "l2"}, "second": {"kind": "exact", "metric": "ip"}}
    assert s.spaces["default"]["embedder"]["dim"] == 64


def test_precedence_init_over_env_over_file(tmp_path, monkeypatch):
    toml = write(tmp_path, "memcore.toml", TOML)
    assert load_settings(toml).indexes["vector"]["metric"] == "cosine"
    monkeypatch.setenv("MEMCORE_INDEXES__VECTOR__METRIC", "ip")
    monkeypatch.setenv("MEMCORE_PATH", "/from/env")
    s = load_settings(toml)
    assert s.indexes["vector"] == {"kind": "exact", "metric": "ip"}  # env is merged into the file's entry
    assert s.path == "/from/env"
    assert s.store == {"kind": "memory"}  # untouched keys keep the file's values
    s = load_settings(toml, path="/from/init", indexes={"vector": {"kind": "exact", "metric": "l2"}})
    assert s.path == "/from/init"
    assert s.indexes["vector"]["metric"] == "l2"
    # the same for YAML
    yaml_file = write(tmp_path, "memcore.yaml", YAML)
    assert load_settings(yaml_file).indexes["vector"]["metric"] == "ip"
    assert load_settings(yaml_file, indexes={"vector": {"kind": "exact", "metric": "cosine"}}).indexes["vector"]["metric"] == "cosine"


def test_env_nesting_tunes_the_default_index(monkeypatch):
    monkeypatch.setenv("MEMCORE_INDEXES__VECTOR__METRIC", "ip")
    s = load_settings()
    assert s.indexes == {"vector": {"kind": "exact", "space": "default", "metric": "ip"}}
    parsed = check_settings(s, get_registry())
    assert parsed["indexes"]["vector"].metric == "ip"
    monkeypatch.setenv("MEMCORE_STORE__KIND", "memory")
    monkeypatch.setenv("MEMCORE_SPACES__DEFAULT__EMBEDDER__DIM", "32")
    monkeypatch.setenv("MEMCORE_DEFAULT_EMBEDDER", "hashing")  # the default space's `auto` embedder is hashing here
    s = load_settings()
    assert s.store == {"kind": "memory"}
    assert s.spaces["default"]["embedder"]["kind"] == "auto"
    assert check_settings(s, get_registry())["spaces"]["default"].dim == 32  # validated by the embedder's model


def test_env_declares_a_new_index(monkeypatch):
    monkeypatch.setenv("MEMCORE_INDEXES__EXTRA__KIND", "exact")
    monkeypatch.setenv("MEMCORE_INDEXES__EXTRA__METRIC", "l2")
    s = load_settings()
    assert s.indexes["extra"] == {"kind": "exact", "metric": "l2"}


def test_other_memcore_variables_are_not_settings(monkeypatch):
    for name, value in {"MEMCORE_LOG": "json", "MEMCORE_LOG_LEVEL": "debug", "MEMCORE_PLUGINS": "", "MEMCORE_DISABLE_PLUGINS": "x"}.items():
        monkeypatch.setenv(name, value)
    assert load_settings().store == {"kind": "sqlite"}


def test_env_entry_without_kind_for_a_new_name_is_rejected(monkeypatch):
    monkeypatch.setenv("MEMCORE_INDEXES__NEWONE__METRIC", "ip")
    with pytest.raises(ConfigError, match="kind"):
        load_settings()


def test_unknown_top_level_key(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings(colour="red")
    assert info.value.location == "colour"
    toml = write(tmp_path, "memcore.toml", 'colour = "red"\n')
    with pytest.raises(ConfigError, match="colour"):
        load_settings(toml)
    yaml_file = write(tmp_path, "memcore.yaml", "indexes: {}\ncolour: red\n")
    with pytest.raises(ConfigError, match="colour"):
        load_settings(yaml_file)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match=r"\.toml, \.yaml or \.yml"):
        load_settings(write(tmp_path, "memcore.json", "{}"))
    with pytest.raises(ConfigError, match=r"\.toml, \.yaml or \.yml"):
        load_settings(write(tmp_path, "memcore", TOML))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path)  # a directory
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(write(tmp_path, "broken.toml", "indexes = [\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(write(tmp_path, "broken.yaml", "indexes:\n  vector: {kind: exact\n"))
    with pytest.raises(ConfigError):
        load_settings(write(tmp_path, "list.yaml", "- a\n- b\n"))


@pytest.mark.parametrize(
    "overrides, location",
    [
        ({"store": {"filename": "x"}}, None),
        ({"indexes": {"vector": 5}}, "indexes"),
        ({"indexes": {"v2": {"metric": "ip"}}}, "indexes"),
        ({"spaces": {"s": {"model": "x"}}}, "spaces"),
        ({"spaces": {"s": {"dim": 0}}}, "spaces"),
        ({"spaces": {"s": {}}}, "spaces"),
        ({"path": 5}, "path"),
        ({"pipeline": 5}, "pipeline"),
    ],
)
def test_invalid_entries(overrides, location):
    if overrides == {"store": {"filename": "x"}}:
        # an entry without kind under a name with a default is completed from it
        assert load_settings(**overrides).store == {"kind": "sqlite", "filename": "x"}
        return
    with pytest.raises(ConfigError) as info:
        load_settings(**overrides)
    assert (info.value.location or "").startswith(location)


def test_check_settings_points_at_the_key():
    with pytest.raises(ConfigError) as info:
        check_settings(load_settings(indexes={"vector": {"kind": "exact", "metrc": "ip"}}), get_registry())
    assert info.value.location == "indexes.vector.metrc"
    with pytest.raises(UnknownComponentError) as info:
        check_settings(load_settings(spaces={"default": {"embedder": "hashng"}}), get_registry())
    assert info.value.location == "spaces.default.embedder.kind"
    assert info.value.closest == "hashing"
    with pytest.raises(ConfigError) as info:
        check_settings(load_settings(spaces={"default": {"embedder": {"kind": "hashing", "dim": 2}}}), get_registry())
    assert info.value.location == "spaces.default.embedder.dim"
    with pytest.raises(ConfigError) as info:
        check_settings(load_settings(store={"kind": "sqlite", "synchronous": "SOMETIMES"}), get_registry())
    assert info.value.location == "store.synchronous"
    with pytest.raises(UnknownComponentError) as info:
        check_settings(load_settings(service="memoryos-ish"), get_registry())
    assert info.value.location == "service.kind"


# -- memcore.open from a file ----------------------------------------------------------

OPEN_TOML = """
[store]
kind = "sqlite"

[spaces.default.embedder]
kind = "hashing"

[spaces.small.embedder]
kind = "hashing"
dim = 64

[indexes.dense]
kind = "exact"

[indexes.near]
kind = "exact"
space = "small"
metric = "l2"

[[pipeline]]
kind = "recall"
index = "dense"

[[pipeline]]
kind = "recall"
index = "near"

[[pipeline]]
kind = "fuse"
fusion = "rrf"

[[pipeline]]
kind = "limit"
"""


def test_open_builds_the_declared_memory(tmp_path):
    toml = write(tmp_path, "memcore.toml", OPEN_TOML)
    directory = tmp_path / "mem"
    with memcore.open(toml, path=directory) as mem:
        listed = {i["name"]: i for i in mem.collection.list_indexes()}
        assert set(listed) == {"dense", "near"}
        assert listed["dense"]["config"] == {"kind": "exact", "space": "default", "metric": "cosine"}
        assert listed["near"]["config"] == {"kind": "exact", "space": "small", "metric": "l2"}
        assert set(mem.collection.spaces) == {"default", "small"}
        assert mem.collection.spaces["small"].dim == 64
        rid = mem.insert("the cat sat on the mat", metadata={"n": 1})
        mem.insert("dogs bark at night", metadata={"n": 2})
        assert mem.collection.count(index="dense") == mem.collection.count(index="near") == 2
        out = mem.retrieve("the cat sat on the mat", k=1)
        assert out[0]["id"] == rid and out[0]["text"] == "the cat sat on the mat" and out[0]["metadata"] == {"n": 1}
        hits = mem.query("the cat sat on the mat", k=2)
        assert hits[0].id == rid
        assert {c.source for c in hits[0].provenance} == {"dense", "near"}
        assert [h["metadata"]["n"] for h in mem.retrieve("dogs", where={"n": 2})] == [2]
    assert (directory / "store.sqlite3").is_file()
    # reopening with the same file loads what is there
    with memcore.open(toml, path=directory) as mem:
        assert mem.collection.count() == 2
        assert all(h.loaded_from_disk for h in mem.collection._indexes.values())
    # the file's path key is used when no path is given
    write(tmp_path, "with_path.toml", f'path = "{directory}"\n' + OPEN_TOML)
    with memcore.open(tmp_path / "with_path.toml") as mem:
        assert mem.collection.path == directory
        assert mem.collection.count() == 2


def test_init_entries_merge_into_the_file_entries(tmp_path):
    s = load_settings(write(tmp_path, "memcore.yaml", YAML), indexes={"vector": {"kind": "exact", "metric": "ip"}})
    assert s.indexes == {"vector": {"kind": "exact", "metric": "ip"}, "second": {"kind": "exact", "metric": "ip"}}


def test_open_with_yaml_and_overrides(tmp_path, monkeypatch):
    yaml_file = write(tmp_path, "memcore.yaml", "store: sqlite\nindexes:\n  vector: {kind: exact, metric: cosine}\n")
    with memcore.open(yaml_file, store="memory", indexes={"vector": {"kind": "exact", "metric": "l2"}}) as mem:
        assert mem.collection.store.__class__.__name__ == "MemoryStore"
        assert [i["name"] for i in mem.collection.list_indexes()] == ["vector"]
        assert mem.collection.list_indexes()[0]["config"]["metric"] == "l2"
    monkeypatch.setenv("MEMCORE_INDEXES__VECTOR__METRIC", "ip")
    with memcore.open({"store": "memory"}) as mem:
        assert mem.collection.list_indexes()[0]["config"]["metric"] == "ip"


def test_open_with_a_settings_dict_holding_path(tmp_path):
    with memcore.open({"path": str(tmp_path / "p"), "indexes": {"vector": {"kind": "exact"}}}) as mem:
        assert mem.collection.path == tmp_path / "p"


def test_open_rejects_changed_index_options(tmp_path):
    toml = write(tmp_path, "memcore.toml", OPEN_TOML)
    directory = tmp_path / "mem"
    memcore.open(toml, path=directory).close()
    changed = write(tmp_path, "changed.toml", OPEN_TOML.replace('metric = "l2"', 'metric = "ip"'))
    with pytest.raises(ConfigError) as info:
        memcore.open(changed, path=directory)
    assert info.value.location == "indexes.near.metric"  # the build-time option, both values and the command
    assert "stored 'l2', new 'ip'" in str(info.value) and "memcore index rebuild near" in str(info.value)
    memcore.open(toml, path=directory).close()  # the failed open released the lock


def test_sqlite_store_needs_a_path():
    with pytest.raises(ConfigError, match="directory"):
        memcore.open({"store": "sqlite"})


def test_service_reserved_index_clash(tmp_path):
    """A user index named like one the service requires is rejected by memcore.open."""
    from types import SimpleNamespace

    from memcore import hookimpl
    from memcore.services._service import DefaultService, DefaultServiceConfig
    from memcore.testing import register_plugin

    class KeepsRecent(DefaultService):
        @classmethod
        def required_indexes(cls, config):
            return {"recent.items": {"kind": "exact", "space": "default"}}

    @hookimpl
    def register_services(register):
        register("keeps_recent", KeepsRecent, DefaultServiceConfig)

    with register_plugin(SimpleNamespace(register_services=register_services), name="reserving"):
        with memcore.open({"service": "keeps_recent"}, path=tmp_path / "ok") as memory:
            assert memory.collection.has_index("recent.items") and memory.collection.has_index("vector")
        clash = {"service": "keeps_recent", "indexes": {"vector": {"kind": "exact"}, "recent.items": {"kind": "exact"}}}
        with pytest.raises(ConfigError, match=r"index name\(s\) \['recent.items'\] are reserved by service 'keeps_recent'") as info:
            memcore.open(clash, path=tmp_path / "clash")
        assert info.value.location == "indexes"
        assert not (tmp_path / "clash").exists()  # refused before anything was created


def test_an_override_that_changes_kind_replaces_the_whole_entry(tmp_path):
    toml = write(tmp_path, "memcore.toml", '[store]\nkind = "sqlite"\nsynchronous = "FULL"\n')
    s = load_settings(toml, store={"kind": "memory"})
    assert s.store == {"kind": "memory"}
    s = load_settings(toml, store={"synchronous": "OFF"})
    assert s.store == {"kind": "sqlite", "synchronous": "OFF"}


def test_a_bad_environment_value_names_the_environment(monkeypatch):
    monkeypatch.setenv("MEMCORE_STORE", "{not json")
    with pytest.raises(ConfigError, match="environment"):
        load_settings()


def test_open_applies_overrides_to_a_settings_object(tmp_path):
    """memcore.open(settings_object, **overrides): the overrides apply (they were dropped
    without a word), validated like any settings; a bad one is a ConfigError naming it."""
    import memcore
    from memcore import ConfigError
    from memcore.settings import load_settings

    settings = load_settings(None, spaces={"default": {"dim": 8}}, indexes={"vector": {"kind": "exact", "space": "default"}})
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.collection.insert({"id": "a", "text": "a", "vectors": {"default": [1.0] * 8}})
    with memcore.open(settings, path=tmp_path / "m", store={"kind": "sqlite", "read_only": True}) as reader:
        assert reader.collection.store.read_only and reader.count() == 1
    with pytest.raises(ConfigError) as caught:
        memcore.open(settings, path=tmp_path / "m", stoer={"kind": "sqlite"})
    assert "stoer" in str(caught.value)
