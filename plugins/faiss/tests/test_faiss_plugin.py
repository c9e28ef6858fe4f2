"""The ``faiss`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "faiss"]
    assert found, "memcore-faiss is not installed (pip install -e ./plugins/faiss)"
    assert found[0].value == "memcore_faiss"
    assert found[0].dist.metadata["Name"] == "memcore-faiss"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["faiss"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-faiss"


def test_it_registers_the_faiss_index_kind(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    import memcore_faiss

    host = PluginHost()
    assert host.infos["faiss"].registers == {"indexes": ["faiss"]}
    assert host.infos["faiss"].hooks == ["register_indexes"]
    registration = host.registry.get("indexes", "faiss")
    assert registration.config_model is memcore_faiss.FaissIndexConfig
    config = registration.parse_config({"factory": "HNSW32", "ef_search": 64}, "indexes.vec")
    assert (config.kind, config.factory, config.metric, config.space) == ("faiss", "HNSW32", "cosine", "default")


def test_loading_the_plugin_does_not_import_faiss():
    import subprocess
    import sys

    code = (
        "import sys; from memcore.plugins import PluginHost; host = PluginHost(); "
        "assert host.infos['faiss'].error is None; "
        "print('faiss' in sys.modules, 'memcore_faiss' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
