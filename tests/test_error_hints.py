"""Errors that say what to do: closest settings key, failed plugins behind unknown kinds, --path."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import memcore
from memcore import ConfigError, UnknownComponentError
from memcore.cli import main
from memcore._plugins._host import PluginHost


@pytest.mark.parametrize(
    ("settings", "location", "suggestion"),
    [
        ({"indexes": {"vector": {"kind": "exact", "metrc": "ip"}}}, "indexes.vector.metrc", "did you mean 'metric'?"),
        ({"indxes": {}}, "indxes", "did you mean 'indexes'?"),
        ({"store": {"kind": "sqlite", "filenme": "x.db"}}, "store.filenme", "did you mean 'filename'?"),
        ({"service": {"kind": "default", "indexs": ["vector"]}}, "service.indexs", "did you mean 'indexes'?"),
        ({"spaces": {"default": {"embedder": {"kind": "hashing", "dims": 64}}}}, "spaces.default.embedder.dims", "did you mean 'dim'?"),
    ],
)
def test_unknown_settings_key_names_the_closest_valid_key(settings, location, suggestion):
    with pytest.raises(ConfigError) as info:
        memcore.open({"store": {"kind": "memory"}, **settings} if "store" not in settings else settings)
    assert info.value.location == location
    assert str(info.value) == f"{location}: unknown option; {suggestion}"


def test_unknown_key_without_a_close_match_lists_the_options():
    with pytest.raises(ConfigError, match=r"indexes.vector.zzz: unknown option; valid options: metric, space"):
        memcore.open({"store": {"kind": "memory"}, "indexes": {"vector": {"kind": "exact", "zzz": 1}}})


def test_unknown_space_key_is_suggested():
    with pytest.raises(ConfigError, match=r"spaces.default.embeder: unknown option; did you mean 'embedder'\?"):
        memcore.open({"store": {"kind": "memory"}, "spaces": {"default": {"embeder": "hashing"}}})


def test_kind_of_a_plugin_that_failed_to_load_says_so():
    host = PluginHost(load_entry_points=False)
    host.load("extras", lambda: (_ for _ in ()).throw(RuntimeError("needs libtrigram")), distribution="memcore-extras")
    with pytest.raises(UnknownComponentError) as info:
        host.registry.get("indexes", "trigram", location="indexes.t.kind")
    message = str(info.value)
    assert "unknown index kind 'trigram'" in message
    assert "'extras' (RuntimeError: needs libtrigram)" in message and "memcore plugins" in message


def test_known_provider_that_failed_is_named_as_the_provider():
    host = PluginHost(load_entry_points=False)
    host.load("bm25", lambda: (_ for _ in ()).throw(ImportError("No module named 'bm25s'")), distribution="memcore-bm25")
    with pytest.raises(UnknownComponentError, match=r"Plugin 'bm25', which provides it, failed to load \(ImportError: No module named 'bm25s'\)"):
        host.registry.get("indexes", "bm25")


def test_no_failed_plugin_no_note():
    host = PluginHost(load_entry_points=False)
    with pytest.raises(UnknownComponentError) as info:
        host.registry.get("indexes", "trigram")
    assert "failed to load" not in str(info.value)


def test_query_without_path_on_a_file_store_suggests_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in [k for k in __import__("os").environ if k.startswith("MEMCORE_") and k != "MEMCORE_DEFAULT_EMBEDDER"]:
        monkeypatch.delenv(key)
    result = CliRunner().invoke(main, ["query", "where does Alice work"])
    assert result.exit_code == 2
    assert "--path DIR" in result.output and "Traceback" not in result.output
