"""The ``graph`` plugin is installed, loads through the plugin host, and registers its index."""

import subprocess
import sys
from importlib.metadata import entry_points

from memcore import IndexContext
from memcore.plugins import PluginHost, get_registry


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
    assert info.registers == {"indexes": ["graph"], "stages": ["graph_recall"]}
    assert sorted(info.hooks) == ["register_indexes", "register_stages"]


def test_registered_index_builds_from_settings():
    from memcore_graph import GraphIndexConfig
    from memcore_graph.index import GraphIndex

    reg = get_registry().get("indexes", "graph")
    assert reg.config_model is GraphIndexConfig
    config = reg.parse_config({"directed": False, "decay": 0.5}, "indexes.links")
    index = reg.factory(config, IndexContext("links"))
    assert isinstance(index, GraphIndex) and index.config.decay == 0.5 and not index.graph.is_directed()
    assert index.requires.links and not index.requires.spaces


def test_networkx_is_imported_lazily():
    """Loading the plugin (as every `memcore` start does) imports neither networkx nor spaCy."""
    code = (
        "import sys\n"
        "from memcore.plugins import PluginHost\n"
        "host = PluginHost()\n"
        "assert host.infos['graph'].error is None\n"
        "import memcore_graph\n"
        "heavy = [m for m in ('networkx', 'spacy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "memcore_graph.GraphIndex\n"
        "assert 'networkx' not in sys.modules  # the index module itself imports it only when building\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
