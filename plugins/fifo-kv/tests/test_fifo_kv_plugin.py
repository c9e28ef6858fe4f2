"""The ``fifo-kv`` plugin is installed and loads through the plugin host."""

from importlib.metadata import entry_points

from memcore.plugins import PluginHost


def test_entry_point_is_installed():
    found = [ep for ep in entry_points(group="memcore") if ep.name == "fifo-kv"]
    assert found, "memcore-fifo-kv is not installed (pip install -e ./plugins/fifo-kv)"
    assert found[0].value == "memcore_fifo_kv"
    assert found[0].dist.metadata["Name"] == "memcore-fifo-kv"


def test_plugin_host_loads_it(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    host = PluginHost()
    info = host.infos["fifo-kv"]
    assert info.error is None
    assert info.builtin is False
    assert info.distribution == "memcore-fifo-kv"


def test_it_registers_the_fifo_and_sorted_indexes(monkeypatch):
    monkeypatch.delenv("MEMCORE_PLUGINS", raising=False)
    monkeypatch.delenv("MEMCORE_DISABLE_PLUGINS", raising=False)
    from memcore_fifo_kv import FifoIndex, FifoIndexConfig, SortedIndex, SortedIndexConfig

    host = PluginHost()
    assert {"fifo", "sorted"} <= set(host.infos["fifo-kv"].registers["indexes"])
    assert host.infos["fifo-kv"].hooks == ["register_indexes"]
    fifo = host.registry.get("indexes", "fifo")
    assert (fifo.factory, fifo.config_model, fifo.plugin) == (FifoIndex, FifoIndexConfig, "fifo-kv")
    sorted_ = host.registry.get("indexes", "sorted")
    assert (sorted_.factory, sorted_.config_model, sorted_.plugin) == (SortedIndex, SortedIndexConfig, "fifo-kv")


def test_fifo_and_sorted_modules_import_no_heavy_library():
    import subprocess
    import sys

    code = (
        "import sys, memcore_fifo_kv.fifo, memcore_fifo_kv.sorted_index; "
        "heavy = sorted(m for m in ('bm25s', 'Stemmer', 'scipy', 'faiss', 'torch', 'networkx') if m in sys.modules); "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
