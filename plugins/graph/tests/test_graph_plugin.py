"""The ``graph`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "graph"]
    assert found, "memcore-graph is not installed (pip install -e ./plugins/graph)"
    assert found[0].value == "memcore_graph"
    assert found[0].dist.metadata["Name"] == "memcore-graph"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["graph"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-graph"
