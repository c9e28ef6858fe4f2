"""The ``embed`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "embed"]
    assert found, "memcore-embed is not installed (pip install -e ./plugins/embed)"
    assert found[0].value == "memcore_embed"
    assert found[0].dist.metadata["Name"] == "memcore-embed"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["embed"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-embed"
