"""The ``lsh`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "lsh"]
    assert found, "memcore-lsh is not installed (pip install -e ./plugins/lsh)"
    assert found[0].value == "memcore_lsh"
    assert found[0].dist.metadata["Name"] == "memcore-lsh"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["lsh"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-lsh"


def test_it_registers_the_lsh_index(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    assert host.infos["lsh"].registers == {"indexes": ["lsh"]}
    registration = host.registry.get("indexes", "lsh")
    from memcore_lsh import LSHIndex, LSHIndexConfig

    assert registration.factory is LSHIndex
    assert registration.config_model is LSHIndexConfig
    assert registration.plugin == "lsh"


def test_importing_the_plugin_stays_light():
    """Loading the plugin (every memcore start does) imports no heavy library."""
    import subprocess
    import sys

    code = "import sys, memcore_lsh; heavy = {'faiss', 'torch', 'scipy', 'sklearn'} & set(sys.modules); print(sorted(heavy))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
