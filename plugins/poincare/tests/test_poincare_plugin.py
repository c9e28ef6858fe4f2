"""The ``poincare`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "poincare"]
    assert found, "memcore-poincare is not installed (pip install -e ./plugins/poincare)"
    assert found[0].value == "memcore_poincare"
    assert found[0].dist.metadata["Name"] == "memcore-poincare"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["poincare"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-poincare"
